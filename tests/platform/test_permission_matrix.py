"""The permission matrix over every operation of the URL conf (STYLE habit 9).

Each operation of the OpenAPI schema (the URL conf, as served) is listed once below; a
new endpoint fails ``test_the_matrix_covers_every_operation`` until it is added. Each
is called by: anonymous (401, public library pages excepted), another tenant's admin
(404 for anything naming tenant A's objects: P-3), tenant A's read-only key (403 on
writes), and for admin-only operations tenant A's member (403). Every denial is
checked to have changed nothing in the database.
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.apps import apps
from django.test import Client
from rest_framework.test import APIClient

from books.models import Profile
from tests.books.factories import make_book, make_entry

pytestmark = pytest.mark.django_db

PROJECT_APPS = ("tenancy", "cast", "books", "retrieval", "sharing", "jobs")
# Rewritten by authentication itself on every call, denied or not.
VOLATILE = {("tenancy", "apikey"): {"last_used_at"}}


@dataclass(frozen=True)
class Op:
    method: str
    path: str  # as in the schema
    write: bool = False
    admin_only: bool = False
    public: bool = False  # readable by anyone (the library)
    names_a: bool = True  # the request names tenant A's objects: another tenant gets 404
    multipart: bool = False


OPS = [
    Op("get", "/api/v1/tenant", names_a=False),
    Op("get", "/api/v1/tenant/cors", admin_only=True, names_a=False),
    Op("put", "/api/v1/tenant/cors", write=True, admin_only=True, names_a=False),
    Op("get", "/api/v1/tenant/preconditions", admin_only=True, names_a=False),
    Op("put", "/api/v1/tenant/preconditions", write=True, admin_only=True, names_a=False),
    Op("get", "/api/v1/api-keys", admin_only=True, names_a=False),
    Op("post", "/api/v1/api-keys", write=True, admin_only=True, names_a=False),
    Op("get", "/api/v1/api-keys/{id}", admin_only=True),
    Op("post", "/api/v1/api-keys/{id}/revoke", write=True, admin_only=True),
    Op("get", "/api/v1/backup", admin_only=True, names_a=False),
    Op("post", "/api/v1/backup/restore", write=True, admin_only=True, names_a=False, multipart=True),
    Op("get", "/api/v1/import-limits", names_a=False),
    Op("get", "/api/v1/books", names_a=False),
    Op("post", "/api/v1/books", write=True, names_a=False),
    Op("post", "/api/v1/books/import", write=True, names_a=False, multipart=True),
    Op("get", "/api/v1/books/{id}"),
    Op("patch", "/api/v1/books/{id}", write=True),
    Op("delete", "/api/v1/books/{id}", write=True),
    Op("get", "/api/v1/books/trash", names_a=False),
    Op("post", "/api/v1/books/{id}/restore", write=True),
    Op("post", "/api/v1/books/{id}/active", write=True),
    Op("get", "/api/v1/books/{id}/canon-meter"),
    Op("get", "/api/v1/books/{book_id}/entries"),
    Op("post", "/api/v1/books/{book_id}/entries", write=True),
    Op("get", "/api/v1/books/{book_id}/entries/{id}"),
    Op("patch", "/api/v1/books/{book_id}/entries/{id}", write=True),
    Op("delete", "/api/v1/books/{book_id}/entries/{id}", write=True),
    Op("post", "/api/v1/books/{book_id}/entries/{id}/move", write=True),
    Op("post", "/api/v1/books/{book_id}/entries/bulk", write=True),
    Op("post", "/api/v1/books/{book_id}/entries/bulk-create", write=True),
    Op("post", "/api/v1/books/{book_id}/entries/reorder", write=True),
    Op("get", "/api/v1/books/{book_id}/export"),
    Op("post", "/api/v1/books/{book_id}/import", write=True, multipart=True),
    Op("get", "/api/v1/books/{book_id}/lore/{entry_id}"),
    Op("post", "/api/v1/books/{book_id}/preview"),
    Op("get", "/api/v1/books/{book_id}/sharing"),
    Op("post", "/api/v1/books/{book_id}/visibility", write=True),
    Op("post", "/api/v1/books/{book_id}/link/rotate", write=True),
    Op("get", "/api/v1/characters", names_a=False),
    Op("post", "/api/v1/characters", write=True, names_a=False),
    Op("get", "/api/v1/characters/{id}"),
    Op("delete", "/api/v1/characters/{id}", write=True),
    Op("get", "/api/v1/stories", names_a=False),
    Op("post", "/api/v1/stories", write=True),
    Op("get", "/api/v1/stories/{id}"),
    Op("get", "/api/v1/novels", names_a=False),
    Op("post", "/api/v1/novels", write=True),
    Op("get", "/api/v1/novels/{id}"),
    Op("get", "/api/v1/attachments", names_a=False),
    Op("post", "/api/v1/attachments", write=True),
    Op("delete", "/api/v1/attachments/{id}", write=True),
    Op("get", "/api/v1/chats", names_a=False),
    Op("post", "/api/v1/chats", write=True),
    Op("get", "/api/v1/chats/{id}"),
    Op("post", "/api/v1/chats/{id}/context", write=True),
    Op("post", "/api/v1/chats/{id}/preview"),
    Op("get", "/api/v1/chats/{id}/lore/{entry_id}"),
    Op("get", "/api/v1/chats/{id}/requests"),
    Op("post", "/api/v1/context"),
    Op("get", "/api/v1/library/books", public=True, names_a=False),
    Op("get", "/api/v1/library/books/{book_id}", public=True, names_a=False),
    Op("get", "/api/v1/library/books/{book_id}/entries", public=True, names_a=False),
    Op("get", "/api/v1/library/links/{token}", public=True, names_a=False),
    Op("get", "/api/v1/library/links/{token}/entries", public=True, names_a=False),
    Op("get", "/api/v1/library/languages", public=True, names_a=False),
    Op("post", "/api/v1/library/copies", write=True),
    Op("get", "/api/v1/library/books/{book_id}/export", public=True, names_a=False),
    Op("get", "/api/v1/library/links/{token}/export", public=True, names_a=False),
    # Members and personas (S-1, S-2).
    Op("get", "/api/v1/members", admin_only=True, names_a=False),
    Op("post", "/api/v1/members", write=True, admin_only=True, names_a=False),
    Op("patch", "/api/v1/members/{id}", write=True, admin_only=True),
    Op("delete", "/api/v1/members/{id}", write=True, admin_only=True),
    Op("post", "/api/v1/members/{id}/api-keys", write=True, admin_only=True),
    # Invitations (issue 26): POST /members invites; admins list and revoke the pending ones.
    Op("get", "/api/v1/invitations", admin_only=True, names_a=False),
    Op("post", "/api/v1/invitations/{id}/revoke", write=True, admin_only=True),
    Op("get", "/api/v1/personas", names_a=False),
    Op("post", "/api/v1/personas/import", write=True, admin_only=True, names_a=False, multipart=True),
    # The living world (L-1..L-4).
    Op("post", "/api/v1/chats/{id}/tool-calls", write=True),
    Op("post", "/api/v1/chats/{id}/replies/{reply_id}/revert", write=True),
    Op("get", "/api/v1/books/{book_id}/ai-updates"),
    Op("patch", "/api/v1/books/{book_id}/ai-updates/{write_id}", write=True),
    Op("post", "/api/v1/books/{book_id}/ai-updates/{write_id}/accept", write=True),
    Op("post", "/api/v1/books/{book_id}/ai-updates/{write_id}/reject", write=True),
    Op("post", "/api/v1/books/{book_id}/ai-updates/{write_id}/undo", write=True),
    # AI jobs (A-1..A-3).
    Op("get", "/api/v1/jobs", names_a=False),
    Op("post", "/api/v1/jobs/generate", write=True, names_a=False),
    Op("post", "/api/v1/jobs/split", write=True, names_a=False),
    Op("get", "/api/v1/jobs/model", admin_only=True, names_a=False),
    Op("put", "/api/v1/jobs/model", write=True, admin_only=True, names_a=False),
    Op("get", "/api/v1/jobs/{job_id}"),
    Op("post", "/api/v1/jobs/{job_id}/cancel", write=True),
    Op("post", "/api/v1/jobs/{job_id}/retry", write=True),
    Op("post", "/api/v1/jobs/{job_id}/accept", write=True),
]


def _world_info() -> bytes:
    return json.dumps({"entries": {"0": {"uid": 0, "key": ["Varn"], "content": "Varn is a river city."}}}).encode()


@pytest.fixture
def world(tenant_a):
    """Tenant A's objects, one of each, owned by A's member (whose read-only key is the read caller)."""
    member = tenant_a.member_client
    book = make_book(tenant_a, owner="member", profile=Profile.CLASSIC)
    entry = make_entry(book, title="Varn", content="Varn is a river city with a long history.")
    spare = make_entry(book, title="Spare", content="Spare lore for the matrix.")
    public = make_book(tenant_a, owner="member", profile=Profile.CLASSIC, title="Open")
    for i in range(10):
        make_entry(public, title=f"Open {i}", content=f"Public lore number {i}, long enough.")
    assert member.post(f"/api/v1/books/{public.pk}/visibility", {"visibility": "public"}, format="json").status_code == 200
    link = member.get(f"/api/v1/books/{public.pk}/sharing").json()["link"]["token"]
    character = member.post("/api/v1/characters", {"name": "Ilsa"}, format="json").json()
    story = member.post("/api/v1/stories", {"title": "The Crossing", "cast_ids": [character["id"]]}, format="json").json()
    novel = member.post("/api/v1/novels", {"title": "Tides", "cast_ids": [character["id"]]}, format="json").json()
    attachment = member.post(
        "/api/v1/attachments", {"target": "character", "target_id": character["id"], "book_id": book.pk}, format="json"
    ).json()
    chat = member.post("/api/v1/chats", {"kind": "character", "character_id": character["id"]}, format="json").json()
    turn = {"messages": [{"role": "user", "text": "Tell me of Varn."}]}
    assert member.post(f"/api/v1/chats/{chat['id']}/context", turn, format="json").status_code == 200
    key = tenant_a.admin_client.post("/api/v1/api-keys", {"name": "spare", "scopes": ["read"]}, format="json").json()
    members = tenant_a.admin_client.get("/api/v1/members").json()
    rows = members["results"] if isinstance(members, dict) else members
    membership = next(row["id"] for row in rows if row["role"] == "member")
    invitation = tenant_a.admin_client.post("/api/v1/members", {"email": "invited@tenant-a.test"}, format="json")
    assert invitation.status_code == 201, invitation.content
    trashed = make_book(tenant_a, owner="member", profile=Profile.CLASSIC, title="In the trash")
    assert member.delete(f"/api/v1/books/{trashed.pk}").status_code == 204
    job = member.post("/api/v1/jobs/split", {"text": "# Varn\nVarn is a river city with a long history."},
                      format="json")
    assert job.status_code in (200, 201, 202), job.content
    return {
        "member": membership, "job": job.json()["id"], "invitation": invitation.json()["id"],
        "book": book.pk, "entry": entry.pk, "spare": spare.pk, "public": public.pk, "link": link,
        "character": character["id"], "story": story["id"], "novel": novel["id"], "attachment": attachment["id"],
        "chat": chat["id"], "key": key["id"], "trashed": trashed.pk,
    }


def _request(op: Op, w: dict[str, Any]) -> tuple[str, Any]:
    """The concrete path and a valid body for ``op`` on tenant A's objects."""
    path = op.path
    book_ops = path.startswith(("/api/v1/books/{book_id}", "/api/v1/books/{id}"))
    subs = {
        "{book_id}": w["public"] if path.startswith("/api/v1/library/") else w["book"],
        "{token}": w["link"],
        "{entry_id}": w["entry"],
        "{job_id}": w["job"],
        # No such write or reply: every denial below comes before the lookup.
        "{write_id}": 0,
        "{reply_id}": "reply-1",
    }
    if book_ops and "/entries/{id}" in path:
        subs["{id}"] = w["entry"]
    elif path == "/api/v1/books/{id}/restore":
        subs["{id}"] = w["trashed"]
    elif path.startswith("/api/v1/books/{id}"):
        subs["{id}"] = w["book"]
    else:
        resource = path.split("/")[3]
        subs["{id}"] = {
            "api-keys": w["key"], "characters": w["character"], "stories": w["story"], "novels": w["novel"],
            "attachments": w["attachment"], "chats": w["chat"], "members": w["member"],
            "invitations": w["invitation"],
        }.get(resource, 0)
    for name, value in subs.items():
        path = path.replace(name, str(value))
    turn = {"messages": [{"role": "user", "text": "Varn again."}]}
    bodies = {
        ("post", "/api/v1/api-keys"): {"name": "new", "scopes": ["read"]},
        ("post", "/api/v1/books"): {"title": "New book"},
        ("patch", "/api/v1/books/{id}"): {"title": "Changed"},
        ("post", "/api/v1/books/{id}/active"): {"active": False},
        ("post", "/api/v1/books/{book_id}/entries"): {"title": "New", "content": "New lore for the book."},
        ("patch", "/api/v1/books/{book_id}/entries/{id}"): {"content": "Changed lore."},
        ("post", "/api/v1/books/{book_id}/entries/{id}/move"): {"to": "bottom"},
        ("post", "/api/v1/books/{book_id}/entries/bulk"): {"action": "disable", "entry_ids": [w["entry"]]},
        ("post", "/api/v1/books/{book_id}/entries/bulk-create"): {"entries": [{"content": "More lore."}]},
        ("post", "/api/v1/books/{book_id}/entries/reorder"): {"entry_ids": [w["spare"], w["entry"]]},
        ("post", "/api/v1/books/{book_id}/preview"): {"message": "Varn"},
        ("post", "/api/v1/books/{book_id}/visibility"): {"visibility": "unlisted"},
        ("post", "/api/v1/characters"): {"name": "New"},
        ("post", "/api/v1/stories"): {"title": "New", "cast_ids": [w["character"]]},
        ("post", "/api/v1/novels"): {"title": "New", "cast_ids": [w["character"]]},
        ("post", "/api/v1/attachments"): {"target": "story", "target_id": w["story"], "book_id": w["book"]},
        ("post", "/api/v1/chats"): {"kind": "character", "character_id": w["character"]},
        ("post", "/api/v1/chats/{id}/context"): turn,
        ("post", "/api/v1/chats/{id}/preview"): {"message": "Varn"},
        ("post", "/api/v1/context"): {**turn, "book_ids": [w["book"]]},
        ("post", "/api/v1/library/copies"): {"book_id": w["book"]},
        ("post", "/api/v1/members"): {"email": "new-member@tenant-a.test", "role": "member"},
        ("patch", "/api/v1/members/{id}"): {"role": "admin"},
        ("post", "/api/v1/members/{id}/api-keys"): {"name": "member key", "scopes": ["read"]},
        ("post", "/api/v1/chats/{id}/tool-calls"): {
            "reply_id": "reply-1",
            "tool_call": {"id": "call-1", "type": "function",
                          "function": {"name": "lore_create", "arguments": "{\"title\": \"Varn\"}"}},
        },
        ("patch", "/api/v1/books/{book_id}/ai-updates/{write_id}"): {"lore": "Edited lore for the matrix."},
        ("post", "/api/v1/jobs/generate"): {"description": "A river city and its guilds."},
        ("post", "/api/v1/jobs/split"): {"text": "# Varn\nVarn is a river city with a long history."},
        ("put", "/api/v1/tenant/cors"): {"origins": ["https://partner.example"]},
        ("put", "/api/v1/tenant/preconditions"): {"require_if_match": False},
        ("put", "/api/v1/jobs/model"): {"base_url": "http://127.0.0.1:9/v1", "model": "m"},
        ("post", "/api/v1/jobs/{job_id}/accept"): {"title": "From the matrix"},
    }
    if op.multipart:
        name = "backup.json" if "restore" in op.path else "card.json" if "personas" in op.path else "world.json"
        upload = io.BytesIO(_world_info())
        upload.name = name
        return path, {"file": upload}
    return path, bodies.get((op.method, op.path))


def _call(client: Any, op: Op, w: dict[str, Any]) -> Any:
    path, body = _request(op, w)
    if op.method == "get":
        return client.get(path, {"input_window": 8000} if op.path.endswith("canon-meter") else {})
    if op.multipart:
        return client.post(path, body, format="multipart")
    return getattr(client, op.method)(path, body, format="json")


def _db_state() -> dict[str, list[dict[str, Any]]]:
    state = {}
    for config in apps.get_app_configs():
        if config.label not in PROJECT_APPS:
            continue
        for model in config.get_models():
            skip = VOLATILE.get((config.label, model._meta.model_name), set())
            fields = [f.attname for f in model._meta.concrete_fields if f.attname not in skip]
            state[model._meta.label] = list(model._base_manager.order_by("pk").values(*fields))
    return state


def _denied(client: Any, op: Op, w: dict[str, Any], status: int) -> None:
    before = _db_state()
    response = _call(client, op, w)
    assert response.status_code == status, (op.method, op.path, response.status_code, response.content[:300])
    assert "error" in response.json()
    after = _db_state()
    changed = [label for label in before if before[label] != after[label]]
    assert not changed, (op.method, op.path, changed)


def test_the_matrix_covers_every_operation(client):
    schema = Client().get("/api/schema/?format=json").json()
    served = {(m, p) for p, ops in schema["paths"].items() for m in ops if m in {"get", "post", "patch", "put", "delete"}}
    assert served == {(op.method, op.path) for op in OPS}


# Each caller runs every operation on one set of tenant A's objects: a denial changes nothing
# (checked after each call), so the next call meets the same state.


def test_anonymous(world):
    for op in OPS:
        if op.public:
            assert _call(APIClient(), op, world).status_code == 200, op.path
        else:
            _denied(APIClient(), op, world, 401)


def test_another_tenant_gets_404(world, tenant_b):
    for op in OPS:
        if op.names_a:
            _denied(tenant_b.admin_client, op, world, 404)


def test_a_read_only_key_cannot_write(world, tenant_a):
    for op in OPS:
        if op.write:
            _denied(tenant_a.read_client, op, world, 403)


def test_a_member_cannot_do_admin_work(world, tenant_a):
    for op in OPS:
        if op.admin_only:
            _denied(tenant_a.member_client, op, world, 403)


def test_a_read_only_key_reads(world, tenant_a):
    """The same calls are allowed to the right caller: the denials above are about who, not what."""
    for op in OPS:
        if not op.write:
            client = tenant_a.client(tenant_a.admin_key) if op.admin_only else tenant_a.read_client
            response = _call(client, op, world)
            assert response.status_code == 200, (op.method, op.path, response.status_code, response.content[:300])


def test_another_tenant_lists_none_of_a(world, tenant_b):
    for op in OPS:
        if not op.names_a and not op.public and not op.write:
            response = _call(tenant_b.admin_client, op, world)
            assert response.status_code == 200, op.path
            text = response.content.decode()
            for needle in ("Ilsa", "The Crossing", "Tides", "Varn is a river city", "invited@tenant-a.test"):
                assert needle not in text, (op.path, needle)


# --- inside one tenant: a member against another member's and an admin's private book (issue 26.4) ----
# A private book attached to a shared character is its owner's alone (P-1): every path that could
# carry its lore answers the member nothing of it, and deleting or detaching what the owner made is
# refused with nothing changed (S-1: the creator, the attacher, the book's owner or an admin).

SECRET_LORE = "Only the owner knows the salt vault opens at low tide."
SECRET_TITLE = "Owner's salt ledger"
SECRET_ENTRY = "Salt vault"
SECRET_TURN = {"messages": [{"role": "user", "text": "Where is the salt vault?"}], "profile": "classic"}

# (method, path, body, status for a member who is not the owner)
PRIVATE_ROWS: list[tuple[str, str, Any, int]] = [
    ("post", "/api/v1/chats/{chat}/context", SECRET_TURN, 200),
    ("post", "/api/v1/chats/{chat}/preview", {"message": "the salt vault"}, 200),
    ("get", "/api/v1/chats/{chat}/requests", None, 200),
    ("get", "/api/v1/chats/{chat}/lore/{entry}", None, 404),
    ("post", "/api/v1/chats/{own_chat}/context", SECRET_TURN, 200),
    ("get", "/api/v1/chats/{own_chat}/requests", None, 200),
    ("get", "/api/v1/chats/{own_chat}/lore/{entry}", None, 404),
    ("post", "/api/v1/context", {**SECRET_TURN, "character_id": "{character}"}, 200),
    ("post", "/api/v1/context", {**SECRET_TURN, "book_ids": ["{book}"]}, 404),
    ("get", "/api/v1/attachments", None, 200),
    ("get", "/api/v1/characters/{character}", None, 200),
    ("get", "/api/v1/books", None, 200),
    ("get", "/api/v1/books/{book}", None, 404),
    ("get", "/api/v1/books/{book}/entries", None, 404),
    ("get", "/api/v1/books/{book}/lore/{entry}", None, 404),
    ("post", "/api/v1/books/{book}/preview", {"message": "the salt vault"}, 404),
    ("delete", "/api/v1/characters/{character}", None, 403),
    ("delete", "/api/v1/attachments/{attachment}", None, 403),
]


def _filled(value: Any, ids: dict[str, int]) -> Any:
    if isinstance(value, str):
        for name, number in ids.items():
            if value == "{" + name + "}":
                return number
            value = value.replace("{" + name + "}", str(number))
        return value
    if isinstance(value, list):
        return [_filled(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _filled(v, ids) for k, v in value.items()}
    return value


def _owners_private_world(setup: Any, owner: Any, client: Any, caller: Any) -> dict[str, int]:
    """``owner``'s private book on a character they made, their chat with a turn stored, and the caller's
    own chat with that character."""
    from books.models import Book, Scope

    book = Book.objects.create(tenant=setup.tenant, owner=owner, profile=Profile.CLASSIC, scope=Scope.PERSONAL,
                               title=SECRET_TITLE)
    entry = make_entry(book, title=SECRET_ENTRY, keys=["salt vault"], content=SECRET_LORE)
    character = client.post("/api/v1/characters", {"name": "Tessa"}, format="json").json()["id"]
    attachment = client.post("/api/v1/attachments", {"target": "character", "target_id": character,
                                                     "book_id": book.pk}, format="json").json()["id"]
    chat = client.post("/api/v1/chats", {"kind": "character", "character_id": character}, format="json").json()["id"]
    own = client.post(f"/api/v1/chats/{chat}/context", SECRET_TURN, format="json").json()
    assert SECRET_LORE in [i["content"] for i in own["injections"]], "the owner's own turn uses the book"
    own_chat = caller.post("/api/v1/chats", {"kind": "character", "character_id": character},
                           format="json").json()["id"]
    return {"book": book.pk, "entry": entry.pk, "character": character, "attachment": attachment, "chat": chat,
            "own_chat": own_chat}


def _second_member(setup: Any) -> tuple[Any, Any]:
    from lore_platform.tenancy.models import Membership
    from lore_platform.tenancy.services import (
        api_key_create,
        membership_set,
        user_get_or_create,
    )

    user = user_get_or_create(email="second-member@alpha.test")
    membership_set(tenant=setup.tenant, user=user, role=Membership.Role.MEMBER)
    key = api_key_create(tenant=setup.tenant, name="second", scopes=["read", "write"], user=user)
    return user, setup.client(key.secret)


@pytest.mark.parametrize("owner_kind", ["admin", "member"])
def test_a_member_meets_nothing_of_anothers_private_book(tenant_a, owner_kind):
    caller = tenant_a.member_client
    if owner_kind == "admin":
        owner, owner_client = tenant_a.admin, tenant_a.admin_client
    else:
        owner, owner_client = _second_member(tenant_a)
    ids = _owners_private_world(tenant_a, owner, owner_client, caller)
    leaks, wrong = [], []
    for method, path, body, status in PRIVATE_ROWS:
        path, body = _filled(path, ids), _filled(body, ids)
        before = _db_state() if status >= 400 else None
        response = getattr(caller, method)(path, body, format="json") if body is not None else \
            getattr(caller, method)(path)
        if response.status_code != status:
            wrong.append((method, path, response.status_code, response.content[:200]))
        text = response.content.decode()
        leaks += [(method, path, needle) for needle in (SECRET_LORE, SECRET_TITLE, SECRET_ENTRY) if needle in text]
        if before is not None:
            changed = [label for label, rows in _db_state().items() if before[label] != rows]
            assert not changed, (method, path, changed)
    assert wrong == [] and leaks == []
    # The same paths do carry the book to its owner: the rows above are about who, not what.
    for method, path, body in [("post", "/api/v1/chats/{chat}/context", SECRET_TURN),
                               ("get", "/api/v1/chats/{chat}/lore/{entry}", None),
                               ("post", "/api/v1/context", {**SECRET_TURN, "character_id": "{character}"})]:
        path, body = _filled(path, ids), _filled(body, ids)
        response = getattr(owner_client, method)(path, body, format="json") if body else owner_client.get(path)
        assert SECRET_LORE in response.content.decode(), path
