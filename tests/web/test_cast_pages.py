"""Characters, stories and novels on pages (issue 15.6): create, attach and detach books with the API's
refusals (W-9, P-1, P-3), and the chat preview of each (W-10). Test client; the browser scenario is
in test_cast_living_browser.py."""
from __future__ import annotations

import re

import pytest
from django.test import Client

from books.models import Book, Visibility
from cast.attachments import book_attach
from cast.chats import novel_create, story_create
from cast.models import Attachment, Novel, Story
from cast.services import character_import
from sharing.services import book_link_rotate, book_visibility_set
from tests.books.factories import admin_actor, make_book, make_entry, member_actor
from tests.web.support import signed_in
from tests.web.test_browser import browser  # noqa: F401  (the module's Chromium, a fixture)
from tests.web.visitors import signed_in_visitor

pytestmark = pytest.mark.django_db


def html(response) -> str:
    return response.content.decode()


def attachments(setup, **target) -> list[int]:
    return list(Attachment.objects.for_tenant(setup.tenant).filter(**target).values_list("book_id", flat=True))


def unlisted_link(setup, title: str = "By link only") -> tuple[Book, str]:
    book = make_book(setup, title=title, owner="admin")
    share = book_visibility_set(actor=admin_actor(setup), book=book, visibility=Visibility.UNLISTED)
    return book, share.link_token


# --- create, with the services' rules --------------------------------------------------------


@pytest.mark.parametrize("kind,model", [("stories", Story), ("novels", Novel)])
def test_stories_and_novels_are_created_with_their_cast(tenant_a, tenant_b, kind, model):
    mira = character_import(tenant=tenant_a.tenant, name="Mira")
    character_import(tenant=tenant_a.tenant, name="Kael")
    owner = signed_in(tenant_a.member)
    page = html(owner.get(f"/{kind}"))
    assert "Mira" in page and "Kael" in page  # the cast to choose from
    made = owner.post(f"/{kind}", {"title": "The salt war", "cast_ids": [str(mira.pk)]})
    assert made.status_code == 302 and made["Location"] == f"/{kind}"
    created = model.objects.for_tenant(tenant_a.tenant).get()
    assert created.title == "The salt war" and [c.name for c in created.cast.all()] == ["Mira"]
    listed = html(owner.get(f"/{kind}"))
    assert "The salt war" in listed and "Cast: Mira" in listed
    # The service's rule, inline: a title is 1–120 characters.
    refused = owner.post(f"/{kind}", {"title": "x" * 121})
    assert refused.status_code == 400 and "A title is 1–120 characters." in html(refused)
    # Another tenant's character is no choice for the cast.
    stranger = character_import(tenant=tenant_b.tenant, name="Stranger")
    assert "Stranger" not in html(owner.get(f"/{kind}"))
    foreign = owner.post(f"/{kind}", {"title": "Mixed cast", "cast_ids": [str(stranger.pk)]})
    assert foreign.status_code == 400 and not model.objects.for_tenant(tenant_a.tenant).filter(
        title="Mixed cast").exists()


# --- attach and detach, with the API's refusals -------------------------------------------


def test_attach_my_book_to_a_story_then_detach_it(tenant_a):
    book = make_book(tenant_a, title="Salt roads")
    story = story_create(actor=member_actor(tenant_a), title="The salt war")
    owner = signed_in(tenant_a.member)
    page = html(owner.get("/stories"))
    assert f'value="{book.pk}">Salt roads<' in page  # my books are in the picker
    done = owner.post(f"/stories/{story.pk}/attach", {f"story{story.pk}-book_id": str(book.pk)})
    assert done.status_code == 302 and attachments(tenant_a, story=story) == [book.pk]
    page = html(owner.get("/stories"))
    assert "Detach Salt roads from The salt war" in page
    attachment = Attachment.objects.for_tenant(tenant_a.tenant).get(story=story)
    owner.post(f"/attachments/{attachment.pk}/detach", {"next": "/stories"})
    assert attachments(tenant_a, story=story) == []
    assert "Detach Salt roads" not in html(owner.get("/stories"))


def test_a_book_i_may_not_read_is_refused_inline_and_nothing_is_attached(tenant_a, tenant_b):
    secret = make_book(tenant_b, title="Their private diary")
    novel = novel_create(actor=member_actor(tenant_a), title="Tides")
    owner = signed_in(tenant_a.member)
    assert "Their private diary" not in html(owner.get("/novels"))
    refused = owner.post(f"/novels/{novel.pk}/attach", {f"novel{novel.pk}-link_token": "no-such-token"})
    assert refused.status_code == 404  # as the API answers (P-3)
    assert "the link is no longer valid" in html(refused) and 'role="alert"' in html(refused)
    # By id, another tenant's private book is no choice at all (the form refuses it).
    by_id = owner.post(f"/novels/{novel.pk}/attach", {f"novel{novel.pk}-book_id": str(secret.pk)})
    assert by_id.status_code == 400 and attachments(tenant_a, novel=novel) == []
    nothing = owner.post(f"/novels/{novel.pk}/attach", {})
    assert nothing.status_code == 400 and "paste a book" in html(nothing)


def test_unlisted_book_by_its_link_and_a_rotated_link_is_shown_left_out(tenant_a, tenant_b):
    book, token = unlisted_link(tenant_b)
    story = story_create(actor=member_actor(tenant_a), title="The salt war")
    owner = signed_in(tenant_a.member)
    pasted = f"http://testserver/link/{token}"  # the whole link, as the owner shares it
    assert owner.post(f"/stories/{story.pk}/attach", {f"story{story.pk}-link_token": pasted}).status_code == 302
    assert attachments(tenant_a, story=story) == [book.pk]
    assert 'data-testid="left-out"' not in html(owner.get("/stories"))
    book_link_rotate(actor=admin_actor(tenant_b), book=book)
    page = html(owner.get("/stories"))
    assert 'data-testid="left-out"' in page and "replaced this book&#x27;s link" in page
    # The old link attaches nothing any more; the new one reaches the book again.
    again = owner.post(f"/stories/{story.pk}/attach", {f"story{story.pk}-link_token": token})
    assert again.status_code == 404 and "no longer valid" in html(again)


def test_another_tenants_story_novel_and_attachment_are_404(tenant_a, tenant_b):
    book = make_book(tenant_b, title="Theirs")
    story = story_create(actor=member_actor(tenant_b), title="Their story")
    novel = novel_create(actor=member_actor(tenant_b), title="Their novel")
    character = character_import(tenant=tenant_b.tenant, name="Their hero")
    attachment = book_attach(actor=member_actor(tenant_b), target="story", target_id=story.pk, book_id=book.pk)
    mine = make_book(tenant_a, title="Mine")
    outsider = signed_in(tenant_a.member)
    for kind, pk in (("stories", story.pk), ("novels", novel.pk), ("characters", character.pk)):
        assert outsider.get(f"/{kind}/{pk}/preview").status_code == 404, kind
        assert outsider.post(f"/{kind}/{pk}/preview", {"message": "hola"}).status_code == 404, kind
        singular = {"stories": "story", "novels": "novel", "characters": "character"}[kind]
        attach = outsider.post(f"/{kind}/{pk}/attach", {f"{singular}{pk}-book_id": str(mine.pk)})
        assert attach.status_code == 404, kind
    assert outsider.post(f"/attachments/{attachment.pk}/detach").status_code == 404
    assert attachments(tenant_b, story=story) == [book.pk]
    assert attachments(tenant_a) == []
    listed = html(outsider.get("/stories")) + html(outsider.get("/novels"))
    assert "Their story" not in listed and "Their novel" not in listed


# --- chat preview ------------------------------------------------------------------------


def test_story_preview_gets_its_own_books_and_its_casts(tenant_a):
    actor = member_actor(tenant_a)
    hero = character_import(tenant=tenant_a.tenant, name="Mira")
    hers = make_book(tenant_a, title="Mira's past")
    make_entry(hers, title="Mira's oath", content="Mira swore never to sail north of the salt line.", constant=True)
    world = make_book(tenant_a, title="Salt world")
    make_entry(world, title="Salt line", content="The salt line is where the sea turns sweet.", constant=True)
    book_attach(actor=actor, target="character", target_id=hero.pk, book_id=hers.pk)
    story = story_create(actor=actor, title="The salt war", cast_ids=[hero.pk])
    book_attach(actor=actor, target="story", target_id=story.pk, book_id=world.pk)
    lonely = novel_create(actor=actor, title="Empty novel")
    owner = signed_in(tenant_a.member)
    page = owner.post(f"/stories/{story.pk}/preview", {"message": "We sail north"})
    assert page.status_code == 200
    included = re.search(r'data-testid="included">(.*?)</table>', html(page), re.DOTALL).group(1)
    assert "Mira&#x27;s oath" in included and "Salt line" in included
    empty = owner.post(f"/novels/{lonely.pk}/preview", {"message": "We sail north"})
    assert empty.status_code == 200 and "Nothing would be included." in html(empty)
    too_long = owner.post(f"/novels/{lonely.pk}/preview", {"message": "x" * 2001})
    assert too_long.status_code == 400 and "W-10" in html(too_long)


def test_characters_page_groups_personas_by_lineage(tenant_a):
    first = character_import(tenant=tenant_a.tenant, name="Mira", lineage_key="card:mira")
    character_import(tenant=tenant_a.tenant, name="Mira (winter)", lineage_key="card:mira")
    character_import(tenant=tenant_a.tenant, name="Kael")  # a lineage of its own, no book: not listed
    make_book(tenant_a, title="Mira's persona", owner=None, scope="persona", lineage=first.lineage)
    page = html(signed_in(tenant_a.member).get("/characters"))
    table = re.search(r'data-testid="lineages">(.*?)</table>', page, re.DOTALL).group(1)
    assert "card:mira" in table and "Mira, Mira (winter)" in table and "Mira&#x27;s persona (0 entries)" in table
    assert "Kael" not in table


# --- CSRF, Spanish -------------------------------------------------------------------------


def test_every_new_form_needs_its_csrf_token(tenant_a):
    actor = member_actor(tenant_a)
    book = make_book(tenant_a, title="Salt roads")
    story = story_create(actor=actor, title="S")
    novel = novel_create(actor=actor, title="N")
    character = character_import(tenant=tenant_a.tenant, name="C")
    attachment = book_attach(actor=actor, target="story", target_id=story.pk, book_id=book.pk)
    client = signed_in(tenant_a.member, csrf=True)
    posts = ["/stories", "/novels", f"/stories/{story.pk}/attach", f"/novels/{novel.pk}/attach",
             f"/characters/{character.pk}/attach", f"/stories/{story.pk}/preview", f"/novels/{novel.pk}/preview",
             f"/attachments/{attachment.pk}/detach"]
    for url in posts:
        assert client.post(url, {"title": "x", "message": "hola"}).status_code == 403, url
    assert Story.objects.for_tenant(tenant_a.tenant).count() == 1
    assert Attachment.objects.for_tenant(tenant_a.tenant).filter(pk=attachment.pk).exists()
    for page in ("/stories", "/novels", "/characters", f"/stories/{story.pk}/preview"):
        body = html(client.get(page))
        forms = body.count('<form method="post"')
        assert forms >= 1 and forms == body.count("csrfmiddlewaretoken"), page


def test_stories_and_novels_pages_in_spanish(tenant_a):
    actor = member_actor(tenant_a)
    story = story_create(actor=actor, title="La guerra de la sal")
    client = signed_in(tenant_a.member)
    client.defaults["HTTP_ACCEPT_LANGUAGE"] = "es"
    stories = html(client.get("/stories"))
    assert "<h1>Historias</h1>" in stories and "Nueva historia" in stories and "Vincular" in stories
    assert "Novelas" in stories  # the nav
    novels = html(client.get("/novels"))
    assert "<h1>Novelas</h1>" in novels and "Nueva novela" in novels
    preview = html(client.get(f"/stories/{story.pk}/preview"))
    assert "Vista previa del chat: La guerra de la sal" in preview and "Mensaje de prueba" in preview
    refused = client.post(f"/stories/{story.pk}/attach", {})
    assert "Elige uno de tus libros o pega el enlace de un libro." in html(refused)
    assert Client(HTTP_ACCEPT_LANGUAGE="es").get("/stories").status_code == 302  # sign-in first


# --- in the browser: stories and novels, axe-checked and photographed -------------------------


@pytest.mark.django_db(transaction=True)
def test_browser_story_with_cast_attach_preview_detach_and_a_novel(browser, live_server, tenant_a):  # noqa: F811 (the fixture)
    book = make_book(tenant_a, title="Salt roads")
    make_entry(book, title="Salt line", content="The salt line is where the sea turns sweet.", constant=True)
    character_import(tenant=tenant_a.tenant, name="Mira")
    visitor = signed_in_visitor(browser, live_server, tenant_a.member, "en-GB", "stories")
    page = visitor.go("/stories")
    page.get_by_role("link", name="Stories").first.wait_for()
    page.get_by_label("Title").fill("The salt war")
    page.get_by_label("Mira").check()
    page.get_by_role("button", name="Create").click()
    page.wait_for_selector("text=Cast: Mira")
    visitor.check("story-created")
    page.get_by_label("Book:", exact=True).select_option(label="Salt roads")
    page.get_by_role("button", name="Attach", exact=True).click()
    page.wait_for_selector(".messages")
    assert "Salt roads" in page.locator('[data-testid="owners"]').inner_text()
    visitor.check("story-attached")
    # A stale link is refused on the form, with the service's words.
    page.get_by_label("Or the link of an unlisted book").fill("http://elsewhere/link/not-a-token")
    page.get_by_role("button", name="Attach", exact=True).click()
    assert "no longer valid" in page.get_by_role("alert").first.inner_text()
    visitor.check("story-attach-refused")
    page.get_by_role("link", name="Preview a chat").click()
    page.get_by_label("Sample message").fill("Where does the sea turn sweet?")
    page.get_by_role("button", name="Preview", exact=True).click()
    page.wait_for_selector('[data-testid="included"]')
    assert "Salt line" in page.get_by_test_id("included").inner_text()
    visitor.check("story-preview")
    page = visitor.go("/stories")
    page.get_by_role("button", name="Detach Salt roads from The salt war").click()
    page.wait_for_selector(".messages")
    assert "Detach Salt roads" not in page.content()
    page = visitor.go("/novels")
    page.get_by_label("Title").fill("Tides")
    page.get_by_role("button", name="Create").click()
    page.wait_for_selector("text=Tides")
    visitor.check("novel-created")
    visitor.context.close()
