"""A backup restores everything a tenant owns (issue 33.7, I-6), and never a secret.

A tenant with one of everything is made through the API and the services; its backup
(``GET /api/v1/backup?request_logs=1``) is restored into another tenant
(``POST /api/v1/backup/restore``) and every table is compared row by row: ids and
timestamps ignored, every reference (foreign keys, entry and book ids inside timed
state, request logs, lore writes and job receipts) compared by what it points at.
"""
from __future__ import annotations

import io
import json
from typing import Any

import pytest

from books.models import Book, Entry, Lineage, LoreWrite, Profile, Scope
from cast.models import Attachment, Character, Chat, Novel, RequestLog, Story
from jobs.models import Job, TenantModelSettings
from lore_platform.tenancy.models import ApiKey, Tenant
from lore_platform.tenancy.services import (
    api_key_create,
    membership_set,
    tenant_default_profile_set,
)
from retrieval.adapter.loading import engine_book
from sharing.models import BookShare
from tests.books.factories import SMART_LORE, fill, make_book, make_entry
from tests.jobs.test_jobs import NOTES

pytestmark = pytest.mark.django_db

MODEL = {"tokenizer": "ceil-chars-4", "input_window": 8192, "tools": True}
MODEL_KEY = "sk-model-secret-0123456789"


def _ok(response: Any, status: int = 201) -> Any:
    assert response.status_code == status, response.content
    return response.json() if response.content else None


def _turn(client: Any, chat: int, *texts: str, model: dict[str, Any] = MODEL) -> dict[str, Any]:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "text": t} for i, t in enumerate(texts)]
    return _ok(client.post(f"/api/v1/chats/{chat}/context", {"messages": messages, "model": model}, format="json"),
               200)


def _tool(client: Any, chat: int, name: str, reply: str, **arguments: Any) -> dict[str, Any]:
    body = _ok(client.post(f"/api/v1/chats/{chat}/tool-calls", {
        "reply_id": reply, "model": "gpt-test",
        "tool_call": {"id": f"call_{reply}", "type": "function",
                      "function": {"name": name, "arguments": json.dumps(arguments)}},
    }, format="json"), 200)
    assert body["ok"], body
    return body


def _everything(a: Any, other: Any, capture: Any, settings: Any) -> dict[str, Any]:
    """One of everything a tenant owns, made the way people make it."""
    admin, member = a.admin_client, a.member_client
    settings.LOREWEAVE_LLM_BASE_URL = ""
    settings.LOREWEAVE_LLM_MODEL = ""
    # Books of every kind: tenant-wide, a persona's, a member's shared one, the admin's living worlds.
    server = make_book(a, owner=None, profile=Profile.SERVER, title="Server rules", channels=["222"])
    make_entry(server, title="Rule", content="Server-wide lore for every persona.", order=5)
    hero_id = _ok(admin.post("/api/v1/characters", {"name": "Hero", "lineage_key": "Hero of Varn"},
                             format="json"))["id"]
    hero = Character.objects.for_tenant(a.tenant).get(pk=hero_id).lineage
    persona = make_book(a, owner=None, profile=Profile.SERVER, scope=Scope.PERSONA, lineage=hero, title="Hero lore")
    make_entry(persona, title="Oath", content="Persona lore in two channels.", channels=["111"])
    shared = make_book(a, owner="member", title="Member notes", visibility="unlisted", tags=["notes"])
    make_entry(shared, title="Note", content="A note everyone reads.", keys=["note"])
    world = make_book(a, owner="admin", profile=Profile.SMART, title="Varn", living_world=True)
    salt = make_entry(world, title="Salt", content="Salt is money in Varn; the guild weighs it.", keys=["salt"])
    # Decorated entries leave their ids in the chat's timed state (kept / spent).
    make_entry(server, title="Ledger", keys=["salt"], content="@@keep\nThe salt ledger is kept in the tower.")
    make_entry(server, title="Omen", keys=["salt"], content="@@dont_activate_after_match\nA gull cries once.")
    held = make_book(a, owner="admin", profile=Profile.SMART, title="Grey Sea", living_world=True,
                     living_world_review=True)
    make_entry(held, title="Tides", content=SMART_LORE)
    dragons = make_book(a, owner="admin", title="Dragons", profile="sillytavern", scan_depth=2)
    make_entry(dragons, title="Lair", keys=["dragon"], content="Dragons sleep in the lair.")
    make_entry(dragons, title="Sword", keys=["sword"], content="The sword remembers.",
               extra={"st": {"sticky": 5}})
    # Another tenant's public book, attached here.
    public = make_book(other, owner="admin", title="Open atlas")
    fill(public, 10)
    Book.objects.for_tenant(other.tenant).filter(pk=public.pk).update(visibility="public")

    # Characters (one by the member), a story and a novel with casts.
    kael = _ok(admin.post("/api/v1/characters", {"name": "Kael"}, format="json"))["id"]
    mira = _ok(member.post("/api/v1/characters", {"name": "Mira"}, format="json"))["id"]
    story = _ok(admin.post("/api/v1/stories", {"title": "The Salt War", "cast_ids": [kael, mira]},
                           format="json"))["id"]
    novel = _ok(admin.post("/api/v1/novels", {"title": "Tide Book", "cast_ids": [hero_id]}, format="json"))["id"]
    # Attachments to each kind of target, by the admin and by the member.
    for target, target_id, book in (("character", kael, world), ("character", kael, held),
                                    ("character", kael, dragons), ("story", story, shared),
                                    ("novel", novel, persona), ("tenant", None, server),
                                    ("character", hero_id, public)):
        _ok(admin.post("/api/v1/attachments", {"target": target, "target_id": target_id, "book_id": book.pk},
                       format="json"))
    _ok(member.post("/api/v1/attachments", {"target": "character", "target_id": mira, "book_id": shared.pk},
                    format="json"))

    # Chats of every kind; turns leave request logs and timed state (SillyTavern's sticky timer).
    chat = _ok(admin.post("/api/v1/chats", {"kind": "character", "character_id": kael, "profile": "smart"},
                          format="json"))["id"]
    st = _ok(admin.post("/api/v1/chats", {"kind": "character", "character_id": kael, "profile": "sillytavern"},
                        format="json"))["id"]
    group = _ok(member.post("/api/v1/chats", {"kind": "group", "member_ids": [kael, mira]}, format="json"))["id"]
    _ok(admin.post("/api/v1/chats", {"kind": "story", "story_id": story}, format="json"))
    _ok(admin.post("/api/v1/chats", {"kind": "novel", "novel_id": novel, "channel_id": "111"}, format="json"))
    _turn(admin, chat, "Tell me about salt.")
    _turn(admin, st, "I draw the sword.")
    _turn(member, group, "A note, please, and the salt price.")
    # Living-world writes: applied, then one held for review (the review queue) and one rejected.
    _tool(admin, chat, "lore_create", "r1", book=world.pk, title="Glass Tower",
          lore="The Glass Tower stands on the salt flats.")
    _tool(admin, chat, "lore_append", "r2", book=world.pk, entry=salt.pk, text="The guild also taxes it.")
    _tool(admin, chat, "lore_create", "r3", book=held.pk, title="Drowned Bell", lore="A bell rings under the sea.")
    _tool(admin, chat, "lore_create", "r4", book=held.pk, title="False Isle", lore="An island that is not there.")
    rejected = LoreWrite.objects.for_tenant(a.tenant).get(title="False Isle")
    _ok(admin.post(f"/api/v1/books/{held.pk}/ai-updates/{rejected.pk}/reject", format="json"), 200)

    # Jobs: one accepted into a book, one done and waiting for review, one failed.
    jobs = []
    for text in (NOTES, NOTES, "Too short."):
        with capture(execute=True):
            jobs.append(_ok(admin.post("/api/v1/jobs/split", {"text": text, "book_id": world.pk}, format="json"),
                            202)["id"])
    _ok(admin.post(f"/api/v1/jobs/{jobs[0]}/accept", {"title": "Drowned Isles"}, format="json"))
    # Settings: the model (with its secret key) and the tenant's default profile. The operator lets
    # tenants name their own model server here, and this one by name.
    settings.MODEL_TENANT_ENDPOINTS = True
    settings.OUTBOUND_ALLOW = [*getattr(settings, "OUTBOUND_ALLOW", []), "203.0.113.10"]
    _ok(admin.put("/api/v1/jobs/model", {"base_url": "http://203.0.113.10/v1", "model": "tiny",
                                         "api_key": MODEL_KEY}, format="json"), 200)
    tenant_default_profile_set(tenant=a.tenant, profile="smart")
    return {"dragons": dragons, "st_chat": st}


# --- every row, by what it points at ------------------------------------------------------------


def _idents(tenant: Tenant, outside: Tenant) -> dict[str, dict[int, str]]:
    """What each id names, for the tenant's own rows and ``outside``'s (a public book attached here): an id
    of the backed-up tenant left unmapped in the restored one names nothing, and shows."""
    mine = [tenant.pk, outside.pk]
    books = {b.pk: f"book:{b.title}" for b in Book.objects.unscoped().filter(tenant_id__in=mine)}
    entries = {e.pk: f"entry:{books[e.book_id]}/{e.title}" for e in Entry.objects.unscoped().filter(tenant_id__in=mine)}
    chats = {pk: f"chat:{i}" for i, pk in enumerate(Chat.objects.for_tenant(tenant).order_by("pk")
                                                   .values_list("pk", flat=True))}
    jobs = {pk: f"job:{i}" for i, pk in enumerate(Job.objects.for_tenant(tenant).order_by("pk")
                                                 .values_list("pk", flat=True))}
    # SillyTavern timers name an entry's current fingerprint: a stale one matches nothing.
    prints = {}
    for book in Book.objects.for_tenant(tenant):
        for entry in engine_book(book, profile="sillytavern").world_info or ():
            prints[entry.fingerprint] = entries[int(entry.uid)]
    return {"book": books, "entry": entries, "chat": chats, "job": jobs, "hash": prints,
            "tenant": {tenant.pk: "tenant"}}


def _id(idents: dict[str, dict[Any, str]], kind: str, value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if kind == "hash":
        return idents["hash"].get(value, f"stale:{value}")
    key = int(value) if isinstance(value, str) and value.isdigit() else value
    return idents[kind].get(key, f"{kind}?{value}")


def _canon(value: Any, idents: dict[str, dict[Any, str]]) -> Any:
    """JSON with every id replaced by what it names."""
    if isinstance(value, list):
        return [_canon(v, idents) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key in ("entry", "via_entry") or (key == "entry_ids" and isinstance(item, list)):
            item = [_id(idents, "entry", i) for i in item] if isinstance(item, list) else _id(idents, "entry", item)
        elif key in ("book", "book_id") and not isinstance(item, dict):
            item = _id(idents, "book", item)
        elif key == "job":
            item = _id(idents, "job", item)
        elif key in ("kept", "spent"):
            item = sorted(_id(idents, "entry", i) for i in item)
        elif key in ("sticky", "cooldown") and isinstance(item, dict):
            item = {f"{_id(idents, 'book', k.partition('.')[0])}.{_id(idents, 'entry', k.partition('.')[2])}":
                    {**v, "hash": _id(idents, "hash", v.get("hash"))} for k, v in item.items()}
        elif key.isdigit() and int(key) in idents["tenant"]:  # a request log's usage: {tenant id: [entry ids]}
            key, item = "tenant", [_id(idents, "entry", i) for i in item]
        else:
            item = _canon(item, idents)
        out[key] = item
    return out


SKIP = {"id", "tenant", "created_at", "updated_at", "decided_at", "started_at", "finished_at", "last_used_at",
        "usage_recorded_at", "version", "chunks",
        "queued_at", "lease_until", "lease_token", "runs",  # a job's run bookkeeping: a backup keeps ended jobs only
        "api_key"}  # never in a backup (asserted blank below); chunks: the model answers behind a retry (not kept)


def _row(obj: Any, idents: dict[str, dict[Any, str]], **refs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in obj._meta.concrete_fields:
        if f.name in SKIP or f.name in refs:
            continue
        value = getattr(obj, f.attname)
        if f.is_relation:
            value = {"owner": "user", "created_by": "user", "attached_by": "user"}.get(f.name) and (
                getattr(obj, f.name).email if value is not None else None)
        out[f.name] = _canon(value, idents)
    for name, value in refs.items():
        out[name] = value
    return out


def _names(rows: Any) -> list[str]:
    return sorted(r.name for r in rows.all())


def tenant_rows(tenant: Tenant, outside: Tenant) -> dict[str, list[Any]]:
    idents = _idents(tenant, outside)
    def book(pk: Any) -> Any:
        return idents["book"].get(pk)

    def entry(pk: Any) -> Any:
        return _id(idents, "entry", pk)

    def chat(pk: Any) -> Any:
        return _id(idents, "chat", pk)

    def of(model: Any, order: str = "pk") -> Any:
        return model.objects.for_tenant(tenant).order_by(order)

    tables = {
        "book": [_row(b, idents, lineage=b.lineage.key if b.lineage_id else None) for b in of(Book)],
        "entry": [_row(e, idents, book=book(e.book_id)) for e in of(Entry)],
        "lineage": [{"key": lin.key} for lin in of(Lineage)],
        "character": [_row(c, idents, lineage=c.lineage.key) for c in of(Character)],
        "story": [_row(s, idents, cast=_names(s.cast)) for s in of(Story)],
        "novel": [_row(n, idents, cast=_names(n.cast)) for n in of(Novel)],
        "attachment": [
            _row(a, idents, book=book(a.book_id), character=a.character and a.character.name,
                 story=a.story and a.story.title, novel=a.novel and a.novel.title)
            for a in of(Attachment)
        ],
        "chat": [
            _row(c, idents, character=c.character and c.character.name, members=_names(c.members),
                 story=c.story and c.story.title, novel=c.novel and c.novel.title)
            for c in of(Chat)
        ],
        "request_log": [_row(r, idents, chat=chat(r.chat_id), recorded=r.usage_recorded_at is not None)
                        for r in of(RequestLog)],
        "lore_write": [_row(w, idents, book=book(w.book_id), entry=entry(w.entry_id), chat_id=chat(w.chat_id))
                       for w in of(LoreWrite)],
        "job": [_row(j, idents) for j in of(Job)],
        "model_settings": [_row(s, idents) for s in of(TenantModelSettings)],
        "tenant": [{"default_profile": Tenant.objects.get(pk=tenant.pk).default_profile}],
    }
    for name in ("book", "entry", "character", "attachment", "chat", "request_log", "lore_write", "job"):
        tables[name].sort(key=lambda row: json.dumps(row, sort_keys=True, default=str))
    return tables


def _restore(client: Any, data: bytes) -> Any:
    return client.post("/api/v1/backup/restore", {"file": io.BytesIO(data)}, format="multipart")


def test_a_restore_brings_back_every_row_the_tenant_owns(make_tenant, settings,
                                                         django_capture_on_commit_callbacks):
    a, b, other = make_tenant("Alpha"), make_tenant("Beta"), make_tenant("Gamma")
    made = _everything(a, other, django_capture_on_commit_callbacks, settings)
    # People are global: Alpha's admin and member belong to Beta too, so their rows go back to them.
    membership_set(tenant=b.tenant, user=a.admin, role="admin")
    membership_set(tenant=b.tenant, user=a.member, role="member")

    download = a.admin_client.get("/api/v1/backup", {"request_logs": "1"})
    assert download.status_code == 200, download.content
    data = b"".join(download.streaming_content) if download.streaming else download.content
    receipt = _ok(_restore(b.admin_client, data))

    source, restored = tenant_rows(a.tenant, other.tenant), tenant_rows(b.tenant, other.tenant)
    for table, rows in source.items():
        assert rows, f"the source tenant has no {table} row: the test would prove nothing"
        assert restored[table] == rows, table
    timed = [c["timed_state"] for c in source["chat"] if c["timed_state"]]
    assert {"kept", "spent", "sillytavern"} <= {k for state in timed for k in state}, timed
    assert len(source["request_log"]) == 3 and len(source["lore_write"]) == 4 and len(source["job"]) == 3
    assert {w["state"] for w in source["lore_write"]} == {"applied", "held", "rejected"}
    assert receipt["restored"]["chats"] == 5 and receipt["restored"]["request_logs"] == 3
    # The model key is never in a backup: the restored settings have none, and the receipt says so.
    assert TenantModelSettings.objects.for_tenant(b.tenant).get().api_key == ""
    assert any("API key" in w for w in receipt["warnings"])

    # Restored means working: the sticky sword keeps coming back in the restored chat, as in the original.
    st_new = Chat.objects.for_tenant(b.tenant).get(kind="character", profile="sillytavern").pk
    sword = Entry.objects.for_tenant(b.tenant).get(book__title="Dragons", title="Sword").pk
    # Alpha's admin plays it (the Dragons book is theirs and private, P-1).
    players = b.client(api_key_create(tenant=b.tenant, name="alpha admin", scopes=["read", "write"],
                                      user=a.admin).secret)
    later = _turn(players, st_new, "I draw the sword.", "Steel rings.", "We walk on.")
    assert sword in {i["entry"] for i in later["injections"]}
    original = _turn(a.admin_client, made["st_chat"], "I draw the sword.", "Steel rings.", "We walk on.")
    assert len(original["injections"]) == len(later["injections"])


def test_request_logs_only_when_asked_for(tenant_a, tenant_b, make_tenant, settings,
                                          django_capture_on_commit_callbacks):
    _everything(tenant_a, make_tenant("Gamma"), django_capture_on_commit_callbacks, settings)
    plain = json.loads(tenant_a.admin_client.get("/api/v1/backup").content)
    assert plain["backup"]["request_logs"] is None and len(plain["backup"]["chats"]) == 5
    refused = tenant_a.admin_client.get("/api/v1/backup", {"request_logs": "maybe"})
    assert refused.status_code == 400 and refused.json()["error"]["field"] == "request_logs"


def test_a_backup_never_holds_a_secret(make_tenant, settings, django_capture_on_commit_callbacks):
    a, other = make_tenant("Alpha"), make_tenant("Gamma")
    _everything(a, other, django_capture_on_commit_callbacks, settings)
    data = a.admin_client.get("/api/v1/backup", {"request_logs": "1"}).content.decode()
    secrets = [MODEL_KEY, a.admin_key, a.member_key, a.read_key]
    secrets += [k.secret_hash for k in ApiKey.objects.for_tenant(a.tenant)]
    secrets += list(BookShare.objects.unscoped().values_list("link_token", flat=True))
    secrets += [u.password for u in (a.admin, a.member) if u.password]
    assert all(s and s not in data for s in secrets), [s for s in secrets if s in data]
    assert "api_key" not in data and "secret" not in data.lower()
    # Not empty: everything else is there.
    doc = json.loads(data)
    assert doc["backup"]["settings"]["model"] == {"base_url": "http://203.0.113.10/v1", "model": "tiny"}


def test_people_who_are_not_members_leave_their_rows_ownerless(make_tenant, settings,
                                                               django_capture_on_commit_callbacks):
    a, b, other = make_tenant("Alpha"), make_tenant("Beta"), make_tenant("Gamma")
    _everything(a, other, django_capture_on_commit_callbacks, settings)
    make_book(b, owner="admin", title="Beta's own")  # Beta is in use: its settings stay its own
    receipt = _ok(_restore(b.admin_client, a.admin_client.get("/api/v1/backup").content))
    assert Tenant.objects.get(pk=b.tenant.pk).default_profile == "classic"
    assert any("default profile 'smart' was not applied" in w for w in receipt["warnings"])
    # Nobody of Alpha is a member of Beta: their chats, characters, attachments, jobs are nobody's now.
    assert set(Chat.objects.for_tenant(b.tenant).values_list("owner", flat=True)) == {None}
    assert Character.objects.for_tenant(b.tenant).get(name="Mira").created_by is None
    assert any("member@alpha.test" in w and "not members" in w for w in receipt["warnings"])
    assert any(w.startswith("chats made by people") for w in receipt["warnings"])
    # …and never became members.
    assert not b.tenant.memberships.filter(user=a.member).exists()


def test_a_bad_backup_names_the_problem_and_writes_nothing(make_tenant, settings,
                                                           django_capture_on_commit_callbacks):
    a, b, other = make_tenant("Alpha"), make_tenant("Beta"), make_tenant("Gamma")
    _everything(a, other, django_capture_on_commit_callbacks, settings)
    doc = json.loads(a.admin_client.get("/api/v1/backup").content)
    def counts() -> list[int]:
        return [m.objects.for_tenant(b.tenant).count() for m in (Book, Character, Chat, LoreWrite)]
    before = counts()
    cases = [
        (lambda d: d["backup"]["chats"][0].update(character=999_999), "backup.chats.0.character"),
        (lambda d: d["backup"]["lore_writes"][0].update(state="maybe"), "backup.lore_writes.0.state"),
        (lambda d: d["backup"].update(version=9), "backup.version"),
        (lambda d: d["backup"]["books"][0].update(entries=[]), "backup.books.0.entries"),
        (lambda d: d["backup"].update(chats={}), "backup.chats"),
    ]
    for change, field in cases:
        bad = json.loads(json.dumps(doc))
        change(bad)
        refused = _restore(b.admin_client, json.dumps(bad).encode())
        assert refused.status_code == 400, (field, refused.content)
        assert refused.json()["error"]["field"] == field and refused.json()["error"]["rule"] == "I-6"
        assert counts() == before, field


def test_an_old_backup_of_books_and_lineages_still_restores(tenant_a, tenant_b):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER, title="Rules")
    make_entry(book, content="Old lore.")
    doc = json.loads(tenant_a.admin_client.get("/api/v1/backup").content)
    del doc["backup"]  # what a backup was before version 2
    receipt = _ok(_restore(tenant_b.admin_client, json.dumps(doc).encode()))
    assert receipt["backup_version"] == 1 and receipt["books_restored"] == 1


def test_a_members_private_book_stays_theirs_alone(tenant_a):
    """P-1: an admin's backup holds no member's private book, nor its ids or lore in chats and logs."""
    secret = make_book(tenant_a, owner="member", title="Diary of Mira")
    entry = make_entry(secret, title="Crush", keys=["salt"], content="@@keep\nMira loves the salt merchant.")
    client = tenant_a.member_client
    mira = _ok(client.post("/api/v1/characters", {"name": "Mira"}, format="json"))["id"]
    _ok(client.post("/api/v1/attachments", {"target": "character", "target_id": mira, "book_id": secret.pk},
                    format="json"))
    chat = _ok(client.post("/api/v1/chats", {"kind": "character", "character_id": mira}, format="json"))["id"]
    _turn(client, chat, "The salt, again.")
    assert Chat.objects.for_tenant(tenant_a.tenant).get(pk=chat).timed_state["kept"] == [str(entry.pk)]

    data = tenant_a.admin_client.get("/api/v1/backup", {"request_logs": "1"}).content.decode()
    doc = json.loads(data)
    assert "Diary of Mira" not in data and "salt merchant" not in data
    assert doc["backup"]["left_out"] == {"private_books": 1, "attachments": 1, "jobs_in_progress": 0}
    assert doc["backup"]["chats"][0]["timed_state"] == {"kept": []}
    assert len(doc["backup"]["request_logs"]) == 1
