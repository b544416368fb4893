"""The pages through Django's test client: what a person sees and may do (issue 15, points 1–6).

Browser checks (htmx, axe, screenshots) are in test_browser.py; these pin the rules at their
boundaries, fast.
"""
from __future__ import annotations

import io
import re

import pytest
from django.test import Client, TestCase

from books.models import Book, Entry, Visibility
from cast.models import Attachment
from lore_platform.tenancy.models import ApiKey
from lore_platform.tenancy.services import membership_set
from sharing.services import book_visibility_set
from tests.books.factories import admin_actor, fill, make_book, make_entry, member_actor
from tests.web.support import PASSWORD, signed_in, with_password, world_info

pytestmark = pytest.mark.django_db


def upload(data: bytes, name: str = "varn.json") -> io.BytesIO:
    f = io.BytesIO(data)
    f.name = name
    return f


def public_book(setup, *, entries: int = 10, **fields) -> Book:
    """Published through the service, its after-commit work run (search document, book vector)."""
    owner = fields.pop("owner", "member")
    book = make_book(setup, profile="smart", owner=owner, **fields)
    fill(book, entries)
    actor = admin_actor(setup) if owner == "admin" else member_actor(setup)
    with TestCase.captureOnCommitCallbacks(execute=True):
        book_visibility_set(actor=actor, book=book, visibility="public")
    return Book.objects.for_tenant(setup.tenant).get(pk=book.pk)


def html(response) -> str:
    return response.content.decode()


# --- 1. sign-in, tenant switcher, API keys ------------------------------------------------


def test_sign_in_with_email_and_password_then_sign_out(tenant_a):
    with_password(tenant_a.member)
    client = Client()
    assert client.get("/books").status_code == 302  # my books need a signed-in user
    bad = client.post("/login", {"username": tenant_a.member.email, "password": "wrong"})
    assert bad.status_code == 422 and "/logout" not in html(bad)
    good = client.post("/login", {"username": tenant_a.member.email, "password": PASSWORD})
    assert good.status_code == 302 and good["Location"] == "/books"
    assert client.get("/books").status_code == 200
    client.post("/logout")
    assert client.get("/books").status_code == 302


def test_sign_up_creates_a_workspace_once_its_email_is_confirmed(tenant_a, django_capture_on_commit_callbacks):
    from django.core import mail

    client = Client()
    with django_capture_on_commit_callbacks(execute=True):
        sent = client.post("/signup", {"tenant": "Gamma", "email": "new@gamma.test", "password": PASSWORD})
    assert sent.status_code == 200 and "Check your email" in html(sent)
    link = re.search(r"http://testserver(/signup/confirm/\S+)", mail.outbox[-1].body).group(1)
    made = client.post(link)
    assert made.status_code == 302
    page = html(client.get("/books"))
    assert "Gamma" in page
    # Signed in, /signup makes another workspace of the same person.
    assert client.post("/signup", {"tenant": "Gamma Two"}).status_code == 302
    assert "Gamma Two" in html(client.get("/books"))
    # The address has an account now: a second sign-up changes nothing and signs nobody in.
    taken = Client()
    answer = taken.post("/signup", {"tenant": "Delta", "email": "new@gamma.test", "password": "another 77 phrase"})
    assert answer.status_code == 200 and taken.get("/books").status_code == 302
    assert not Client().login(username="new@gamma.test", password="another 77 phrase")
    assert Client().login(username="new@gamma.test", password=PASSWORD)


def test_tenant_switcher_shows_the_chosen_workspace_books(tenant_a, tenant_b):
    membership_set(tenant=tenant_b.tenant, user=tenant_a.member, role="member")
    make_book(tenant_a, title="Alpha lore")
    make_book(tenant_b, title="Beta lore", owner="member")
    Book.objects.for_tenant(tenant_b.tenant).update(visibility=Visibility.UNLISTED)  # readable by members
    client = signed_in(tenant_a.member)
    first = html(client.get("/books"))
    assert 'id="tenant-switch"' in first and "Alpha lore" in first and "Beta lore" not in first
    client.post("/tenant", {"tenant": tenant_b.tenant.slug, "next": "/books"})
    second = html(client.get("/books"))
    assert "Beta lore" in second and "Alpha lore" not in second
    # A workspace the user is not in cannot be switched to.
    stranger = signed_in(tenant_b.admin)
    stranger.post("/tenant", {"tenant": tenant_a.tenant.slug})
    assert "Alpha lore" not in html(stranger.get("/books"))


def test_api_keys_page_shows_a_new_key_once_and_revokes(tenant_a):
    admin = signed_in(tenant_a.admin)
    created = html(admin.post("/keys", {"name": "bot", "write": "on"}))
    secret = re.search(r'data-testid="new-key">([^<]+)<', created).group(1)
    key = ApiKey.objects.for_tenant(tenant_a.tenant).get(name="bot")
    assert key.scopes == ["read", "write"]
    assert secret not in html(admin.get("/keys"))  # shown once
    api = Client(HTTP_AUTHORIZATION=f"Api-Key {secret}")
    assert api.get("/api/v1/tenant").status_code == 200
    admin.post(f"/keys/{key.pk}/revoke")
    assert Client(HTTP_AUTHORIZATION=f"Api-Key {secret}").get("/api/v1/tenant").status_code == 401


def test_members_may_not_manage_keys(tenant_a):
    member = signed_in(tenant_a.member)
    assert member.get("/keys").status_code == 403
    before = ApiKey.objects.for_tenant(tenant_a.tenant).count()
    assert member.post("/keys", {"name": "sneaky"}).status_code == 403
    key = ApiKey.objects.for_tenant(tenant_a.tenant).first()
    assert member.post(f"/keys/{key.pk}/revoke").status_code == 403
    assert ApiKey.objects.for_tenant(tenant_a.tenant).count() == before
    assert ApiKey.objects.for_tenant(tenant_a.tenant).get(pk=key.pk).revoked_at is None


# --- 2. the public library ----------------------------------------------------------------


def test_library_lists_public_books_only_with_their_cards(tenant_a, tenant_b):
    shown = public_book(tenant_a, title="Salt roads", tags=["trade"], description="Merchants of Varn")
    make_entry(shown, title="Charter", content="The salt charter binds every merchant of Varn.", constant=True)
    hidden = make_book(tenant_a, title="Secret diary")
    fill(hidden, 10)
    unlisted = public_book(tenant_a, title="Hidden path")
    Book.objects.for_tenant(tenant_a.tenant).filter(pk=unlisted.pk).update(visibility=Visibility.UNLISTED)
    page = html(Client().get("/library"))
    assert "Salt roads" in page and "Secret diary" not in page and "Hidden path" not in page
    card = page[page.index("Salt roads"):]
    assert "Merchants of Varn" in card and "trade" in card and ">11<" in card and "Alpha" in card
    assert re.search(r"Canon</dt><dd>[1-9]\d* tokens", card)


def test_library_text_search_tag_and_language_filters(tenant_a):
    public_book(tenant_a, title="Salt roads", tags=["trade"], language="en")
    public_book(tenant_a, title="Caminos de sal", tags=["comercio"], language="es")
    assert "Salt roads" in html(Client().get("/library?q=salt"))
    assert "Caminos de sal" not in html(Client().get("/library?q=salt"))
    by_tag = html(Client().get("/library?tag=comercio"))
    assert "Caminos de sal" in by_tag and "Salt roads" not in by_tag
    by_language = html(Client().get("/library?language=en"))
    assert "Salt roads" in by_language and "Caminos de sal" not in by_language


def test_library_pages_twenty_books(tenant_a):
    for i in range(21):
        public_book(tenant_a, title=f"Book {i:02d}", entries=10)
    first = html(Client().get("/library?sort=newest"))
    second = html(Client().get("/library?sort=newest&page=2"))
    assert first.count('class="card book"') == 20 and second.count('class="card book"') == 1
    assert 'rel="next"' in first and "21 books" in first


def test_library_sorts_by_most_copied(tenant_a, tenant_b):
    plain = public_book(tenant_a, title="Plain book")
    copied = public_book(tenant_a, title="Loved book")
    from sharing.models import BookShare

    later = BookShare.objects.for_tenant(tenant_a.tenant).get(book=copied).published_at.replace(year=2030)
    BookShare.objects.for_tenant(tenant_a.tenant).filter(book=plain).update(published_at=later)  # plain is newest
    signed_in(tenant_b.member).post(f"/library/{copied.pk}/copy")
    page = html(Client().get("/library?sort=most_copied"))
    assert page.index("Loved book") < page.index("Plain book")
    newest = html(Client().get("/library?sort=newest"))
    assert newest.index("Plain book") < newest.index("Loved book")


def test_book_page_readable_without_sign_in_and_private_is_404(tenant_a, tenant_b):
    book = public_book(tenant_a, title="Salt roads")
    page = Client().get(f"/library/{book.pk}")
    assert page.status_code == 200 and "Filler 0" in html(page)
    private = make_book(tenant_a, title="Secret")
    fill(private, 10)
    assert Client().get(f"/library/{private.pk}").status_code == 404
    assert signed_in(tenant_b.admin).get(f"/library/{private.pk}").status_code == 404
    # P-3 on every page of a book: another tenant's private book is 404, never 403.
    other = signed_in(tenant_b.admin)
    for path in ("", "/preview", "/export?format=sillytavern", "/settings", "/delete"):
        assert other.get(f"/books/{private.pk}{path}").status_code == 404, path
    for path in ("/visibility", "/link/rotate", "/import", "/entries", "/entries/bulk", "/living-world",
                 "/settings", "/delete", "/restore"):
        assert other.post(f"/books/{private.pk}{path}", {"visibility": "public"}).status_code == 404, path
    assert Book.objects.for_tenant(tenant_a.tenant).get(pk=private.pk).visibility == Visibility.PRIVATE
    assert other.post(f"/library/{private.pk}/copy").status_code == 404


def test_book_page_in_the_readers_language_says_why_it_is_the_original(tenant_a):
    book = public_book(tenant_a, title="Salt roads", language="en")
    spanish = html(Client(HTTP_ACCEPT_LANGUAGE="es").get(f"/library/{book.pk}"))
    assert "Biblioteca" in spanish and "Se muestra en su idioma original" in spanish
    english = html(Client(HTTP_ACCEPT_LANGUAGE="en").get(f"/library/{book.pk}"))
    assert "original language" not in english  # an English reader reads the original as such


def test_unlisted_book_by_link_and_rotation_ends_the_old_link(tenant_a, tenant_b):
    book = make_book(tenant_a, title="By link only", profile="smart")
    fill(book, 3)
    owner = signed_in(tenant_a.member)
    owner.post(f"/books/{book.pk}/visibility", {"visibility": "unlisted"})
    link = re.search(r'data-testid="share-link">[^<]*(/link/[^<"]+)<', html(owner.get(f"/books/{book.pk}"))).group(1)
    assert "By link only" in html(Client().get(link))
    assert "By link only" not in html(Client().get("/library"))
    owner.post(f"/books/{book.pk}/link/rotate")
    assert Client().get(link).status_code == 404
    fresh = re.search(r'data-testid="share-link">[^<]*(/link/[^<"]+)<', html(owner.get(f"/books/{book.pk}"))).group(1)
    assert fresh != link and Client().get(fresh).status_code == 200


def test_copy_and_attach_from_the_library(tenant_a, tenant_b):
    book = public_book(tenant_a, title="Salt roads")
    reader = signed_in(tenant_b.member)
    reader.post("/characters", {"name": "Ana"})
    page = html(reader.get(f"/library/{book.pk}"))
    target = re.search(r'value="(character:\d+)"', page).group(1)
    copied = reader.post(f"/library/{book.pk}/copy")
    copy = Book.objects.for_tenant(tenant_b.tenant).get()
    assert copied["Location"] == f"/books/{copy.pk}" and copy.owner == tenant_b.member
    assert Entry.objects.for_tenant(tenant_b.tenant).filter(book=copy).count() == 10
    reader.post(f"/library/{book.pk}/attach", {"target": target})
    assert Attachment.objects.for_tenant(tenant_b.tenant).filter(book=book).count() == 1
    assert "Salt roads" in html(reader.get("/characters"))


def test_export_from_the_library_is_world_info(tenant_a):
    book = public_book(tenant_a, title="Salt roads")
    response = Client().get(f"/library/{book.pk}/export")
    assert response.status_code == 200 and "Salt roads.json" in response["Content-Disposition"]
    assert len(response.json()["entries"]) == 10


# --- 3. my books: create, import with receipt, export, visibility --------------------------


def test_import_a_new_book_shows_the_receipt(tenant_a):
    owner = signed_in(tenant_a.member)
    response = owner.post("/books", {"action": "import", "profile": "smart", "language": "es",
                                     "file": upload(world_info())}, follow=True)
    page = html(response)
    book = Book.objects.for_tenant(tenant_a.tenant).get()
    assert book.title == "Mundo de Varn" and book.language == "es"
    assert 'data-testid="receipt-added">Added: 12' in page
    assert "Skipped: 2" in page and "duplicate" in page and "empty content" in page
    assert "sticky: 1" in page  # dropped: no equivalent in the smart profile (I-4)
    assert "receipt-h" not in html(owner.get(f"/books/{book.pk}"))  # shown once, after the import


def test_import_refused_whole_names_the_rule(tenant_a):
    owner = signed_in(tenant_a.member)
    owner.post("/books", {"action": "import", "profile": "smart", "language": "es", "file": upload(world_info())})
    again = owner.post("/books", {"action": "import", "profile": "smart", "language": "es",
                                  "file": upload(world_info())})
    assert again.status_code == 409 and "I-2" in html(again)  # an existing name is never overwritten
    assert Book.objects.for_tenant(tenant_a.tenant).count() == 1


def test_import_into_a_book_appends_and_replaces(tenant_a):
    owner = signed_in(tenant_a.member)
    owner.post("/books", {"action": "create", "title": "Target", "profile": "smart", "language": "es"})
    book = Book.objects.for_tenant(tenant_a.tenant).get()
    page = html(owner.post(f"/books/{book.pk}/import", {"mode": "append", "file": upload(world_info())}, follow=True))
    assert "Added: 12" in page
    page = html(owner.post(f"/books/{book.pk}/import", {"mode": "append", "file": upload(world_info())}, follow=True))
    assert "Added: 0" in page  # entries that exist are skipped (I-2)
    small = world_info([("Varn", "La ciudad fluvial de Varn comercia sal por hierro.")], extras=False)
    page = html(owner.post(f"/books/{book.pk}/import", {"mode": "replace", "file": upload(small)}, follow=True))
    assert "Added: 1" in page and Entry.objects.for_tenant(tenant_a.tenant).filter(book=book).count() == 1


def test_export_in_every_format(tenant_a):
    book = make_book(tenant_a, title="Salt roads", profile="smart")
    fill(book, 2)
    owner = signed_in(tenant_a.member)
    page = html(owner.get(f"/books/{book.pk}"))
    for fmt, name in (("sillytavern", ".json"), ("card-v2", ".card.json"), ("card-v2-png", ".png"),
                      ("native", ".loreweave.json")):
        assert f"format={fmt}" in page
        response = owner.get(f"/books/{book.pk}/export?format={fmt}")
        assert response.status_code == 200 and f'Salt roads{name}"' in response["Content-Disposition"]


def test_publishing_needs_ten_entries(tenant_a):
    book = make_book(tenant_a, title="Almost", profile="smart")
    fill(book, 9)
    owner = signed_in(tenant_a.member)
    refused = html(owner.post(f"/books/{book.pk}/visibility", {"visibility": "public"}, follow=True))
    assert "P-1" in refused
    assert Book.objects.for_tenant(tenant_a.tenant).get(pk=book.pk).visibility == Visibility.PRIVATE
    make_entry(book)
    owner.post(f"/books/{book.pk}/visibility", {"visibility": "public"})
    assert "Almost" in html(Client().get("/library"))


def test_entry_form_shows_the_services_message_and_rule_inline(tenant_a):
    book = make_book(tenant_a, title="World", profile="smart")
    owner = signed_in(tenant_a.member)
    refused = owner.post(f"/books/{book.pk}/entries", {"title": "Varn", "content": "too short"})
    assert refused.status_code == 400
    assert re.search(r'class="error"[^>]*>[^<]*W-12', html(refused))
    owner.post(f"/books/{book.pk}/entries", {"title": "Varn", "content": "La ciudad fluvial comercia sal."})
    assert Entry.objects.for_tenant(tenant_a.tenant).filter(book=book).count() == 1


def test_move_to_top_and_bottom(tenant_a):
    book = make_book(tenant_a, title="World", profile="smart")
    first, second, third = (make_entry(book, title=t) for t in ("Uno", "Dos", "Tres"))
    owner = signed_in(tenant_a.member)
    owner.post(f"/books/{book.pk}/entries/{third.pk}/move", {"to": "top"})
    owner.post(f"/books/{book.pk}/entries/{first.pk}/move", {"to": "bottom"})
    page = html(owner.get(f"/books/{book.pk}"))
    assert page.index(">Tres<") < page.index(">Dos<") < page.index(">Uno<")


def test_editor_pages_a_big_book_and_filters(tenant_a):
    book = make_book(tenant_a, title="Big", profile="smart")
    fill(book, 250)
    make_entry(book, title="Off", enabled=False)
    owner = signed_in(tenant_a.member)
    page = html(owner.get(f"/books/{book.pk}"))
    assert page.count('name="entry"') == 50 and "251 entries" in page
    assert html(owner.get(f"/books/{book.pk}?page=6")).count('name="entry"') == 1
    disabled = html(owner.get(f"/books/{book.pk}?state=disabled"))
    assert disabled.count('name="entry"') == 1 and ">Off<" in disabled


# --- 5. preview -----------------------------------------------------------------------------


def test_preview_shows_included_entries_and_the_log(tenant_a):
    book = make_book(tenant_a, title="World", profile="smart")
    make_entry(book, title="Varn", content="La ciudad fluvial de Varn comercia sal.", constant=True)
    make_entry(book, title="Lira", content="El Bosque de Lira canta con el viento.")
    owner = signed_in(tenant_a.member)
    page = html(owner.post(f"/books/{book.pk}/preview", {"message": "Vamos a Varn", "model": "gpt-4o"},
                           HTTP_HX_REQUEST="true"))
    assert page.startswith('\n<div id="preview-result"') or page.lstrip().startswith('<div id="preview-result"')
    included = page[page.index('data-testid="included"'):page.index("</table>", page.index('data-testid="included"'))]
    assert "Varn" in included and "canon" in page
    assert 'data-testid="request-log"' in page


def test_preview_message_is_at_most_2000_characters(tenant_a):
    book = make_book(tenant_a, title="World", profile="smart")
    make_entry(book, title="Varn", content="La ciudad fluvial de Varn comercia sal.", constant=True)
    owner = signed_in(tenant_a.member)
    assert owner.post(f"/books/{book.pk}/preview", {"message": "x" * 2000}).status_code == 200
    too_long = owner.post(f"/books/{book.pk}/preview", {"message": "x" * 2001})
    assert too_long.status_code == 400 and "W-10" in html(too_long)


# --- CSRF on every form ------------------------------------------------------------------------

POSTS = [
    "/logout", "/tenant", "/keys", "/keys/origins", "/keys/{key}/revoke", "/books", "/books/{book}/import",
    "/books/{book}/visibility", "/books/{book}/link/rotate", "/books/{book}/living-world", "/books/{book}/entries",
    "/books/{book}/entries/bulk", "/books/{book}/entries/{entry}/move", "/books/{book}/preview",
    "/library/{book}/copy", "/library/{book}/attach", "/characters", "/characters/{character}/preview",
    "/i18n/setlang/", "/books/{book}/settings", "/books/{book}/delete", "/books/{book}/restore",
]


def test_every_form_needs_its_csrf_token(tenant_a):
    from cast.services import character_import

    book = public_book(tenant_a, owner="admin")
    entry = Entry.objects.for_tenant(tenant_a.tenant).filter(book=book).first()
    character = character_import(tenant=tenant_a.tenant, name="Ana")
    key = ApiKey.objects.for_tenant(tenant_a.tenant).first()
    client = signed_in(tenant_a.admin, csrf=True)
    for path in POSTS:
        url = path.format(book=book.pk, entry=entry.pk, key=key.pk, character=character.pk)
        assert client.post(url, {"visibility": "private", "name": "x", "message": "hola"}).status_code == 403, url
    assert Client(enforce_csrf_checks=True).post("/login", {"username": "a", "password": "b"}).status_code == 403
    assert Book.objects.for_tenant(tenant_a.tenant).get(pk=book.pk).visibility == Visibility.PUBLIC
    # Every page's forms carry the token.
    for page in ("/books", f"/books/{book.pk}", f"/library/{book.pk}", "/keys", "/characters",
                 f"/books/{book.pk}/preview", f"/books/{book.pk}/settings", f"/books/{book.pk}/delete",
                 "/books/trash"):
        body = html(client.get(page))
        assert body.count("<form method=\"post\"") <= body.count("csrfmiddlewaretoken"), page
