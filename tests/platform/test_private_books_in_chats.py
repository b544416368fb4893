"""Private means the owner alone, on every path (issue 26.4; P-1, W-9, S-1).

A private book attached to a tenant-shared character, story or novel is used only in its
owner's own calls: every other caller's context answer lists it in ``books_left_out`` (without
its title) and its lore never reaches them through the context call, a preview, the stored
request logs, the lookup tool or the attachment listings. Deleting a character takes its creator
or a tenant admin; detaching a book takes whoever attached it, the book's owner or a tenant admin
(API and pages alike).
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from books.models import Book, Scope
from cast.models import Attachment, Character, Chat, RequestLog
from cast.selectors import PRIVATE_REASON, PRIVATE_TITLE
from lore_platform.tenancy.models import Membership
from lore_platform.tenancy.services import (
    api_key_create,
    membership_set,
    user_get_or_create,
)
from tests.books.factories import make_book, make_entry
from tests.web.support import signed_in

pytestmark = pytest.mark.django_db

SECRET = "The vault code is 4471-KESTREL, known to nobody else."
TITLE = "Ledger of the vault"
ENTRY_TITLE = "Kestrel vault"
TURN = {"messages": [{"role": "user", "text": "Kael, open the vault."}], "profile": "classic"}


@dataclass
class World:
    book: object
    entry: object
    character: int
    attachment: int
    chat: int


def _private_world(setup, client, owner) -> World:
    """``owner``'s private book attached (by ``owner``'s ``client``) to a character they created, and their chat."""
    book = Book.objects.create(tenant=setup.tenant, owner=owner, profile="classic", scope=Scope.PERSONAL,
                               title=TITLE)
    entry = make_entry(book, title=ENTRY_TITLE, keys=["vault"], content=SECRET)
    character = client.post("/api/v1/characters", {"name": "Kael"}, format="json").json()["id"]
    attached = client.post("/api/v1/attachments", {"target": "character", "target_id": character,
                                                  "book_id": book.pk}, format="json")
    assert attached.status_code == 201, attached.content
    chat = client.post("/api/v1/chats", {"kind": "character", "character_id": character}, format="json").json()["id"]
    own = client.post(f"/api/v1/chats/{chat}/context", TURN, format="json")
    assert own.status_code == 200 and SECRET in _injected(own.json()), "the owner's own turn uses the book"
    return World(book=book, entry=entry, character=character, attachment=attached.json()["id"], chat=chat)


def _injected(body) -> list[str]:
    return [i["content"] for i in body["injections"]]


def _left_out_privately(body, book) -> None:
    """The book is named as left out, with the reason, but neither its title nor its lore appear."""
    assert book.pk not in [b["id"] for b in body["books"]]
    left = {b["id"]: b for b in body["books_left_out"]}
    assert left[book.pk]["reason"] == PRIVATE_REASON
    assert left[book.pk]["title"] == PRIVATE_TITLE
    text = str(body)
    assert SECRET not in text and TITLE not in text and ENTRY_TITLE not in text


@pytest.fixture
def admins(tenant_a) -> World:
    return _private_world(tenant_a, tenant_a.admin_client, tenant_a.admin)


@pytest.fixture
def second_member(tenant_a):
    """Another member of tenant A with a key of their own."""
    user = user_get_or_create(email="second@alpha.test")
    membership_set(tenant=tenant_a.tenant, user=user, role=Membership.Role.MEMBER)
    key = api_key_create(tenant=tenant_a.tenant, name="second", scopes=["read", "write"], user=user)
    return user, tenant_a.client(key.secret)


# --- the leak paths -------------------------------------------------------------------------


def test_a_member_on_the_admins_chat_gets_the_reason_not_the_lore(tenant_a, admins):
    assert tenant_a.member_client.get(f"/api/v1/books/{admins.book.pk}").status_code == 404
    answer = tenant_a.member_client.post(f"/api/v1/chats/{admins.chat}/context", TURN, format="json")
    assert answer.status_code == 200
    _left_out_privately(answer.json(), admins.book)
    preview = tenant_a.member_client.post(f"/api/v1/chats/{admins.chat}/preview", {"message": "The vault?"},
                                          format="json")
    assert preview.status_code == 200
    _left_out_privately(preview.json(), admins.book)


def test_a_member_on_a_chat_of_its_own_with_the_admins_character(tenant_a, admins):
    chat = tenant_a.member_client.post("/api/v1/chats", {"kind": "character", "character_id": admins.character},
                                       format="json").json()["id"]
    answer = tenant_a.member_client.post(f"/api/v1/chats/{chat}/context", TURN, format="json")
    assert answer.status_code == 200
    _left_out_privately(answer.json(), admins.book)
    # Its stored log holds nothing of the book either.
    stored = RequestLog.objects.for_tenant(tenant_a.tenant).get(chat_id=chat)
    assert SECRET not in str(stored.injections) + str(stored.log)


def test_the_stateless_context_call_with_the_admins_character(tenant_a, admins):
    answer = tenant_a.member_client.post("/api/v1/context", {**TURN, "character_id": admins.character},
                                         format="json")
    assert answer.status_code == 200
    _left_out_privately(answer.json(), admins.book)
    # The owner's same call still reads it.
    own = tenant_a.admin_client.post("/api/v1/context", {**TURN, "character_id": admins.character}, format="json")
    assert SECRET in _injected(own.json())
    assert admins.book.pk in [b["id"] for b in own.json()["books"]]


def test_stored_request_logs_show_the_owner_everything_and_others_nothing_of_the_book(tenant_a, admins):
    # A log as a smart turn stores it, its world index naming the private entry.
    RequestLog.objects.create(tenant=tenant_a.tenant, chat_id=admins.chat, turn=9, profile="smart",
                              world_index=[{"entry": admins.entry.pk, "line": f"{ENTRY_TITLE}: the vault"}],
                              injections=[], log=[{"entry": admins.entry.pk, "book": admins.book.pk,
                                                   "outcome": "indexed", "detail": ENTRY_TITLE}])
    # One naming the entry only in its world index (its book is then looked up), and one naming an
    # entry deleted since (nothing says whose it was: dropped).
    RequestLog.objects.create(tenant=tenant_a.tenant, chat_id=admins.chat, turn=10, profile="smart",
                              world_index=[{"entry": admins.entry.pk, "line": f"{ENTRY_TITLE}: again"},
                                           {"entry": 999_999, "line": "Gone: a deleted entry"}],
                              injections=[], log=[])
    theirs = tenant_a.member_client.get(f"/api/v1/chats/{admins.chat}/requests")
    assert theirs.status_code == 200
    text = theirs.content.decode()
    assert SECRET not in text and ENTRY_TITLE not in text and "Gone" not in text
    assert len(theirs.json()["results"]) == 3  # the turns are listed, without the book's rows
    own = tenant_a.admin_client.get(f"/api/v1/chats/{admins.chat}/requests").content.decode()
    assert SECRET in own and ENTRY_TITLE in own


def test_the_lookup_tool_serves_the_entry_to_its_owner_only(tenant_a, admins):
    path = f"/api/v1/chats/{admins.chat}/lore/{admins.entry.pk}"
    assert tenant_a.admin_client.get(path).json()["content"] == SECRET
    refused = tenant_a.member_client.get(path)
    assert refused.status_code == 404 and SECRET not in refused.content.decode()
    chat = tenant_a.member_client.post("/api/v1/chats", {"kind": "character", "character_id": admins.character},
                                       format="json").json()["id"]
    assert tenant_a.member_client.get(f"/api/v1/chats/{chat}/lore/{admins.entry.pk}").status_code == 404


def test_attachment_listings_say_a_private_book_is_there_without_its_title(tenant_a, admins):
    rows = tenant_a.member_client.get("/api/v1/attachments").json()["results"]
    row = next(r for r in rows if r["id"] == admins.attachment)
    assert row["book_title"] == PRIVATE_TITLE and not row["injected"] and row["reason"] == PRIVATE_REASON
    assert TITLE not in str(rows)
    own = next(r for r in tenant_a.admin_client.get("/api/v1/attachments").json()["results"]
               if r["id"] == admins.attachment)
    assert own["book_title"] == TITLE and own["injected"]
    # The characters page, as the member sees it.
    page = signed_in(tenant_a.member).get("/characters").content.decode()
    assert TITLE not in page and "A private book" in page
    assert TITLE in signed_in(tenant_a.admin).get("/characters").content.decode()


def test_the_preview_page_of_the_character_shows_the_member_none_of_it(tenant_a, admins):
    page = signed_in(tenant_a.member).post(f"/characters/{admins.character}/preview",
                                           {"message": "Open the vault", "profile": "classic"})
    assert page.status_code == 200
    assert SECRET not in page.content.decode() and TITLE not in page.content.decode()


def test_a_server_profile_turn_does_not_name_anothers_private_book(tenant_a, admins):
    chat = tenant_a.member_client.post("/api/v1/chats", {"kind": "character", "character_id": admins.character,
                                                         "profile": "server"}, format="json").json()["id"]
    make_book(tenant_a, owner=None, title="Server lore", scope=Scope.SERVER, profile="server")
    body = tenant_a.member_client.post(f"/api/v1/chats/{chat}/context", {"messages": TURN["messages"]},
                                       format="json").json()
    _left_out_privately(body, admins.book)


def test_member_versus_member(tenant_a, second_member):
    user, second = second_member
    theirs = _private_world(tenant_a, second, user)
    member = tenant_a.member_client
    answer = member.post(f"/api/v1/chats/{theirs.chat}/context", TURN, format="json").json()
    _left_out_privately(answer, theirs.book)
    assert member.get(f"/api/v1/chats/{theirs.chat}/lore/{theirs.entry.pk}").status_code == 404
    assert SECRET not in member.get(f"/api/v1/chats/{theirs.chat}/requests").content.decode()
    assert member.delete(f"/api/v1/characters/{theirs.character}").status_code == 403
    assert member.delete(f"/api/v1/attachments/{theirs.attachment}").status_code == 403
    # An admin is not the owner either (private is the owner alone).
    answer = tenant_a.admin_client.post(f"/api/v1/chats/{theirs.chat}/context", TURN, format="json").json()
    _left_out_privately(answer, theirs.book)


# --- who may delete a character or detach a book ----------------------------------------------


def test_a_member_cannot_delete_the_admins_character_and_nothing_changes(tenant_a, admins):
    refused = tenant_a.member_client.delete(f"/api/v1/characters/{admins.character}")
    assert refused.status_code == 403 and refused.json()["error"]["rule"] == "S-1"
    assert Character.objects.for_tenant(tenant_a.tenant).filter(pk=admins.character).exists()
    assert Chat.objects.for_tenant(tenant_a.tenant).get(pk=admins.chat).character_id == admins.character


def test_the_creator_and_an_admin_delete_a_character_another_member_cannot(tenant_a, second_member):
    _, second = second_member
    mine = tenant_a.member_client.post("/api/v1/characters", {"name": "Mira"}, format="json").json()["id"]
    assert second.delete(f"/api/v1/characters/{mine}").status_code == 403
    assert tenant_a.member_client.delete(f"/api/v1/characters/{mine}").status_code == 204
    other = tenant_a.member_client.post("/api/v1/characters", {"name": "Ilsa"}, format="json").json()["id"]
    assert tenant_a.admin_client.delete(f"/api/v1/characters/{other}").status_code == 204
    assert not Character.objects.for_tenant(tenant_a.tenant).filter(pk__in=[mine, other]).exists()


def test_a_member_cannot_detach_what_the_admin_attached_on_api_or_page(tenant_a, admins):
    refused = tenant_a.member_client.delete(f"/api/v1/attachments/{admins.attachment}")
    assert refused.status_code == 403 and refused.json()["error"]["rule"] == "S-1"
    member_page = signed_in(tenant_a.member)
    assert f"/attachments/{admins.attachment}/detach" not in member_page.get("/characters").content.decode()
    assert f"/attachments/{admins.attachment}/detach" in signed_in(tenant_a.admin).get("/characters").content.decode()
    page = member_page.post(f"/attachments/{admins.attachment}/detach", {"next": "/characters"})
    assert page.status_code == 403 and "Only whoever attached the book" in page.content.decode()
    assert Attachment.objects.for_tenant(tenant_a.tenant).filter(pk=admins.attachment).exists()
    assert tenant_a.admin_client.delete(f"/api/v1/attachments/{admins.attachment}").status_code == 204


def test_the_attacher_and_the_books_owner_may_detach(tenant_a, second_member):
    _, second = second_member
    book = make_book(tenant_a, owner="member", title="Shared roads")
    assert tenant_a.member_client.post(f"/api/v1/books/{book.pk}/visibility", {"visibility": "unlisted"},
                                       format="json").status_code == 200
    character = tenant_a.admin_client.post("/api/v1/characters", {"name": "Kael"}, format="json").json()["id"]
    # The second member attaches the member's non-private book: the member (its owner) may take it off.
    attached = second.post("/api/v1/attachments", {"target": "character", "target_id": character,
                                                   "book_id": book.pk}, format="json").json()["id"]
    assert signed_in(tenant_a.member).post(f"/attachments/{attached}/detach").status_code == 302
    again = second.post("/api/v1/attachments", {"target": "character", "target_id": character,
                                                "book_id": book.pk}, format="json").json()["id"]
    assert second.delete(f"/api/v1/attachments/{again}").status_code == 204  # its attacher
    assert not Attachment.objects.for_tenant(tenant_a.tenant).filter(book=book).exists()
