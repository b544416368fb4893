"""The AI-updates pages (the living world, issue 17, on pages: L-1..L-4). The model's writes come
through the same tool-call service the API runs; the page lists them per book and chat and undoes,
edits, accepts, rejects and reverts with the services' refusals shown inline."""
from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from books.models import Book, Entry, LoreWrite, Profile, Visibility
from books.services import entry_update
from cast.attachments import book_attach
from cast.chats import chat_create
from cast.living import tool_call_run
from cast.services import character_import
from tests.books.factories import fill, make_book, make_entry, member_actor
from tests.web.support import signed_in
from tests.web.test_browser import browser  # noqa: F401  (the module's Chromium, a fixture)
from tests.web.visitors import signed_in_visitor

pytestmark = pytest.mark.django_db

LORE = "The Glass Tower stands on the salt flats; its keepers trade light for water."


def html(response) -> str:
    return response.content.decode()


def living_book(setup, **fields) -> Book:
    fields.setdefault("title", "Varn")
    return make_book(setup, owner="member", profile=Profile.SMART, living_world=True, **fields)


def play(setup, book: Book, name: str = "Mirelda"):
    """The owner's character chat with ``book`` attached."""
    actor = member_actor(setup)
    character = character_import(tenant=setup.tenant, name=name)
    book_attach(actor=actor, target="character", target_id=character.pk, book_id=book.pk)
    return chat_create(actor=actor, kind="character", character_id=character.pk, profile="smart")


def model_writes(setup, chat, tool: str, reply: str = "r1", **arguments) -> LoreWrite:
    result = tool_call_run(actor=member_actor(setup), chat_id=chat.pk, reply_id=reply, model="gpt-test",
                           tool_call={"id": "c1", "type": "function",
                                      "function": {"name": tool, "arguments": json.dumps(arguments)}})
    assert result.ok, result.result
    return result.write


def entries(book: Book) -> dict[str, Entry]:
    return {e.title: e for e in Entry.objects.for_tenant(book.tenant).filter(book=book)}


def state(write: LoreWrite) -> str:
    return LoreWrite.objects.for_tenant(write.tenant).get(pk=write.pk).state


# --- the list, per book and per chat ---------------------------------------------------------


def test_ai_updates_lists_what_the_model_wrote_per_book_and_chat(tenant_a):
    book = living_book(tenant_a)
    salt = make_entry(book, title="Salt", content="Salt is money in Varn; the guild weighs it.")
    first, second = play(tenant_a, book, "Mirelda"), play(tenant_a, book, "Kael")
    model_writes(tenant_a, first, "lore_create", title="Glass Tower", lore=LORE, aliases=["the Tower"])
    model_writes(tenant_a, second, "lore_append", reply="r9", entry=salt.pk, text="Salt also buys silence.")
    owner = signed_in(tenant_a.member)
    page = html(owner.get(f"/books/{book.pk}/ai-updates"))
    assert "New entry: Glass Tower" in page and "Added to: Salt" in page
    assert "Salt also buys silence." in page and "the Tower" in page
    assert f"#{first.pk} · Mirelda" in page and f"#{second.pk} · Kael" in page
    only_kael = html(owner.get(f"/books/{book.pk}/ai-updates?chat={second.pk}"))
    assert "Added to: Salt" in only_kael and "Glass Tower" not in only_kael
    overview = html(owner.get("/ai-updates"))
    assert f'href="/books/{book.pk}/ai-updates">Varn<' in overview
    # The book page links to it; the nav does too.
    assert f'href="/books/{book.pk}/ai-updates"' in html(owner.get(f"/books/{book.pk}"))
    assert 'href="/ai-updates"' in page


# --- undo, newest first and only while unchanged (L-4) ----------------------------------------


def test_undo_removes_the_entry_and_a_changed_entry_is_refused_with_l4(tenant_a):
    book = living_book(tenant_a)
    chat = play(tenant_a, book)
    tower = model_writes(tenant_a, chat, "lore_create", title="Glass Tower", lore=LORE)
    well = model_writes(tenant_a, chat, "lore_create", reply="r2", title="Deep Well",
                        lore="The Deep Well of Varn answers one question a year, always truthfully.")
    owner = signed_in(tenant_a.member)
    done = owner.post(f"/books/{book.pk}/ai-updates/{tower.pk}", {"action": "undo"})
    assert done.status_code == 302 and "Glass Tower" not in entries(book) and state(tower) == "undone"
    # Edited by hand since the write: undoing would lose that edit, so it is refused and kept.
    well_entry = entries(book)["Deep Well"]
    entry_update(actor=member_actor(tenant_a), entry=well_entry, content=well_entry.content + " By hand.")
    refused = owner.post(f"/books/{book.pk}/ai-updates/{well.pk}", {"action": "undo"})
    assert refused.status_code == 409
    assert "changed since this AI update" in html(refused) and "(L-4)" in html(refused)
    assert entries(book)["Deep Well"].content.endswith("By hand.") and state(well) == "applied"
    # Nothing left to undo on the undone one: the service says so.
    again = owner.post(f"/books/{book.pk}/ai-updates/{tower.pk}", {"action": "undo"})
    assert again.status_code == 409 and "nothing to undo" in html(again)


# --- review before saving: edit, accept, reject ----------------------------------------------


def test_review_holds_writes_then_accept_with_edits_and_reject(tenant_a):
    book = living_book(tenant_a)
    owner = signed_in(tenant_a.member)
    owner.post(f"/books/{book.pk}/ai-updates/settings", {"living_world": "on", "review": "on"})
    assert Book.objects.for_tenant(tenant_a.tenant).get(pk=book.pk).living_world_review
    chat = play(tenant_a, book)
    held = model_writes(tenant_a, chat, "lore_create", title="Glass Tower", lore=LORE)
    other = model_writes(tenant_a, chat, "lore_create", reply="r2", title="Deep Well",
                         lore="The Deep Well of Varn answers one question a year, always truthfully.")
    assert held.state == "held" and entries(book) == {}
    page = html(owner.get(f"/books/{book.pk}/ai-updates"))
    assert page.count('value="accept"') == 2 and "wait here for your review" in page
    prefix = f"w{held.pk}-"
    accepted = owner.post(f"/books/{book.pk}/ai-updates/{held.pk}", {
        "action": "accept", prefix + "title": "Tower of Glass", prefix + "lore": LORE, prefix + "aliases": "the Tower"})
    assert accepted.status_code == 302 and state(held) == "applied"
    made = entries(book)["Tower of Glass"]
    assert made.keys == ["the Tower"] and made.content == LORE and not made.constant  # L-2: never canon
    rejected = owner.post(f"/books/{book.pk}/ai-updates/{other.pk}", {"action": "reject"})
    assert rejected.status_code == 302 and state(other) == "rejected" and "Deep Well" not in entries(book)
    # An edit the rules refuse is shown on its field, with the rule, and nothing is applied.
    third = model_writes(tenant_a, chat, "lore_create", reply="r3", title="Salt Gate",
                         lore="The Salt Gate opens only for caravans that carry a guild seal.")
    bad = owner.post(f"/books/{book.pk}/ai-updates/{third.pk}", {
        "action": "accept", f"w{third.pk}-title": "S", f"w{third.pk}-lore": "too short", f"w{third.pk}-aliases": ""})
    assert bad.status_code in (400, 422) and "W-12" in html(bad) and state(third) == "held"


def test_revert_a_reply_undoes_all_its_writes_together(tenant_a):
    book = living_book(tenant_a)
    salt = make_entry(book, title="Salt", content="Salt is money in Varn; the guild weighs it.")
    chat = play(tenant_a, book)
    tower = model_writes(tenant_a, chat, "lore_create", reply="r7", title="Glass Tower", lore=LORE)
    grown = model_writes(tenant_a, chat, "lore_append", reply="r7", entry=salt.pk, text="Salt also buys silence.")
    kept = model_writes(tenant_a, chat, "lore_create", reply="r8", title="Deep Well",
                        lore="The Deep Well of Varn answers one question a year, always truthfully.")
    owner = signed_in(tenant_a.member)
    page = html(owner.get(f"/books/{book.pk}/ai-updates"))
    assert "Revert reply r7" in page and "Revert reply r8" in page
    done = owner.post(f"/books/{book.pk}/ai-updates/revert", {"chat": str(chat.pk), "reply": "r7"})
    assert done.status_code == 302
    assert state(tower) == state(grown) == "undone" and state(kept) == "applied"
    assert "Glass Tower" not in entries(book) and entries(book)["Salt"].content == salt.content


# --- L-1: off on unlisted and public books, with the API's notice -----------------------------


def test_publishing_turns_the_living_world_off_with_the_l1_notice(tenant_a):
    book = living_book(tenant_a)
    fill(book, 10)
    owner = signed_in(tenant_a.member)
    shown = owner.post(f"/books/{book.pk}/visibility", {"visibility": "public"}, follow=True)
    assert "The living world is now off: it works only on private books" in html(shown) and "(L-1)" in html(shown)
    assert not Book.objects.for_tenant(tenant_a.tenant).get(pk=book.pk).living_world
    page = html(owner.get(f"/books/{book.pk}/ai-updates"))
    assert "this book is public" in page and 'name="living_world"' not in page  # no switch to turn back on
    # Forcing it through the settings form is refused by the book's own rule.
    owner.post(f"/books/{book.pk}/ai-updates/settings", {"living_world": "on"})
    assert not Book.objects.for_tenant(tenant_a.tenant).get(pk=book.pk).living_world


# --- who sees them: the owner only; another tenant not at all --------------------------------


def test_only_the_owner_sees_ai_updates_and_another_tenant_gets_404(tenant_a, tenant_b):
    book = living_book(tenant_a)
    Book.objects.for_tenant(tenant_a.tenant).filter(pk=book.pk).update(visibility=Visibility.PRIVATE)
    chat = play(tenant_a, book)
    write = model_writes(tenant_a, chat, "lore_create", title="Glass Tower", lore=LORE)
    admin = signed_in(tenant_a.admin)  # same tenant, not the owner
    assert admin.get(f"/books/{book.pk}/ai-updates").status_code in (403, 404)
    assert admin.post(f"/books/{book.pk}/ai-updates/{write.pk}", {"action": "undo"}).status_code in (403, 404)
    stranger = signed_in(tenant_b.member)
    assert stranger.get(f"/books/{book.pk}/ai-updates").status_code == 404
    for path in (f"/{write.pk}", "/revert", "/settings"):
        response = stranger.post(f"/books/{book.pk}/ai-updates{path}",
                                 {"action": "undo", "chat": str(chat.pk), "reply": "r1", "living_world": ""})
        assert response.status_code == 404, path
    assert state(write) == "applied" and Book.objects.for_tenant(tenant_a.tenant).get(pk=book.pk).living_world
    assert "Varn" not in html(stranger.get("/ai-updates"))


# --- CSRF, Spanish -------------------------------------------------------------------------


def test_every_ai_updates_form_needs_its_csrf_token(tenant_a):
    book = living_book(tenant_a, living_world_review=True)
    chat = play(tenant_a, book)
    held = model_writes(tenant_a, chat, "lore_create", title="Glass Tower", lore=LORE)
    client = signed_in(tenant_a.member, csrf=True)
    for path in (f"/{held.pk}", "/revert", "/settings"):
        response = client.post(f"/books/{book.pk}/ai-updates{path}", {"action": "reject", "chat": str(chat.pk),
                                                                     "reply": "r1"})
        assert response.status_code == 403, path
    assert state(held) == "held" and Book.objects.for_tenant(tenant_a.tenant).get(pk=book.pk).living_world
    body = html(client.get(f"/books/{book.pk}/ai-updates"))
    forms = body.count('<form method="post"')
    assert forms >= 3 and forms == body.count("csrfmiddlewaretoken")


def test_ai_updates_in_spanish(tenant_a):
    book = living_book(tenant_a)
    chat = play(tenant_a, book)
    model_writes(tenant_a, chat, "lore_create", title="Glass Tower", lore=LORE)
    client = signed_in(tenant_a.member)
    client.defaults["HTTP_ACCEPT_LANGUAGE"] = "es"
    page = html(client.get(f"/books/{book.pk}/ai-updates"))
    assert "Actualizaciones de la IA: Varn" in page and "Deshacer" in page and "Nueva entrada: Glass Tower" in page
    assert re.search(r"Aplicada · chat #\d+ · Mirelda · respuesta r1 · modelo gpt-test", page)
    overview = html(client.get("/ai-updates"))
    assert "<h1>Actualizaciones de la IA</h1>" in overview
    assert Client(HTTP_ACCEPT_LANGUAGE="es").get("/ai-updates").status_code == 302


# --- in the browser, in Spanish: the overview, undo, and a held write accepted with an edit ------


@pytest.mark.django_db(transaction=True)
def test_browser_ai_updates_undo_and_review_in_spanish(browser, live_server, tenant_a):  # noqa: F811 (the fixture)
    book = living_book(tenant_a)
    chat = play(tenant_a, book)
    tower = model_writes(tenant_a, chat, "lore_create", title="Glass Tower", lore=LORE)
    reviewed = living_book(tenant_a, title="Archivo", living_world_review=True)
    held = model_writes(tenant_a, play(tenant_a, reviewed, "Kael"), "lore_create", reply="r5", title="Deep Well",
                        lore="The Deep Well of Varn answers one question a year, always truthfully.")
    visitor = signed_in_visitor(browser, live_server, tenant_a.member, "es-ES", "ai-updates")
    page = visitor.page
    page.get_by_role("link", name="Actualizaciones de la IA").click()
    page.wait_for_selector('[data-testid="living-books"]')
    visitor.check("overview")
    page.get_by_role("link", name="Varn").click()
    page.wait_for_selector(f'[data-testid="write-{tower.pk}"]')
    visitor.check("book-applied")
    page.get_by_role("button", name="Deshacer Glass Tower").click()
    page.wait_for_selector(".messages")
    assert page.locator(f'[data-testid="write-{tower.pk}"]').get_attribute("data-state") == "undone"
    assert "Deshecha" in page.locator(f'[data-testid="write-{tower.pk}"]').inner_text()
    visitor.check("book-undone")
    visitor.go(f"/books/{reviewed.pk}/ai-updates")
    assert "esperan aquí tu revisión" in page.get_by_test_id("living-state").inner_text()
    card = page.locator(f'[data-testid="write-{held.pk}"]')
    card.get_by_label("Título").fill("Pozo Hondo")
    card.get_by_role("button", name="Aceptar").click()
    page.wait_for_selector(".messages")
    assert page.locator(f'[data-testid="write-{held.pk}"]').get_attribute("data-state") == "applied"
    assert "Pozo Hondo" in entries(reviewed)
    visitor.check("book-accepted")
    visitor.context.close()
