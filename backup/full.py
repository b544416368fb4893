"""The part of a tenant backup beyond books and lineages: the ``"backup"`` section (I-6).

A backup is a native document (``books.formats.native``, version 1: books with
their entries and collection state, lineages with their characters' names) plus
``"backup": {"version": 2, ...}`` holding everything else the tenant owns:

* ``tenant``/``settings``: the default profile and the model settings (base URL
  and model name; never the API key);
* ``members``: who belonged to the tenant (email, role), so rows they made can go
  back to them;
* ``books``: per native book (same order) its id and its entries' ids and usage
  figures, so everything that names an entry or a book can be pointed at the
  restored rows;
* ``characters`` (name, lineage, who made it), ``stories`` and ``novels`` (title,
  cast), ``attachments`` (book, target, position, who attached it), ``chats``
  (kind, owner, character/members/story/novel, channels, profile, model, timed
  state, turns), ``request_logs`` (only when asked for: they can be large),
  ``lore_writes`` (the living world's records, the review queue included) and
  ``jobs`` that ended (outcome, draft, warnings, usage, accepted receipt).

Never in a backup: API keys and their hashes, the model API key, invitation or
share-link tokens (a restored unlisted book gets a new link), a member's private
book (P-1: it stays its owner's alone, with its living-world records and the
attachments of it — the section counts what was left out), derived data rebuilt
on restore (vectors, index coverage, library search documents, translations).

Restore maps every old id to the new row: foreign keys, entry and book ids in a
chat's timed state (``kept``/``spent`` and SillyTavern's ``"<book>.<entry>"``
timers, whose entry fingerprints are recomputed for the new ids) and in request
logs, lore-write targets, job inputs and receipts. People are global: a row made
by someone is theirs again when a member of the target tenant has their email;
otherwise it is nobody's (admins manage it), and the receipt says so. A restore
never adds members: granting access stays an admin's act (the receipt lists them).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, overload

from django.utils.dateparse import parse_datetime

from books.exports import book_as_imported
from books.formats.jsonio import as_object, refuse, type_name
from books.formats.sillytavern import world_entry
from books.models import Book, Entry, LoreWrite
from books.restore import entry_usage_restore, lore_write_restore
from cast.models import Attachment, Character, Chat, Novel, RequestLog, Story
from cast.restore import (
    attachment_restore,
    chat_restore,
    novel_restore,
    request_logs_restore,
    story_restore,
)
from cast.selectors import request_logs_for
from cast.services import character_import
from jobs.models import FINAL_STATES, Job, JobKind, TenantModelSettings
from jobs.restore import job_restore, model_settings_restore
from lore_platform.errors import NotFound
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Membership, Tenant, User
from lore_platform.tenancy.services import tenant_default_profile_set
from retrieval.engine.sillytavern.entries import book_from_st_json
from sharing.selectors import book_for_attach

BACKUP_VERSION = 2
RULE = "I-6"

_CHAT_COLUMNS = ("kind", "channel_id", "parent_channel_id", "profile", "model_id", "turns")
_LOG_COLUMNS = ("turn", "profile", "model_id", "log_detail", "entries_considered", "not_matched")
_WRITE_COLUMNS = ("reply_id", "model", "kind", "title", "aliases", "text", "state", "edit_title", "edit_aliases",
                  "edit_text", "content_before", "content_after", "decided_by")
_JOB_COLUMNS = ("kind", "state", "progress", "model", "draft", "warnings", "usage", "error")
_TIMES = ("created_at", "decided_at", "started_at", "finished_at", "usage_recorded_at")


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


# --- writing ---------------------------------------------------------------------------------


def section(actor: Actor, books: Sequence[Book], *, request_logs: bool) -> dict[str, Any]:
    """The ``"backup"`` section for ``books`` (the native part's books, same order)."""
    # The row as it is now: an actor's tenant may come from a process's cache of verified keys.
    tenant = Tenant.objects.get(pk=actor.tenant.pk)
    book_ids = {book.pk for book in books}
    emails = _Emails()
    entries: dict[int, list[dict[str, Any]]] = {}
    for pk, book_id, count, last in (
        Entry.objects.for_tenant(tenant).filter(book_id__in=book_ids)
        .order_by("book_id", "position", "id").values_list("pk", "book_id", "usage_count", "last_used_at")
    ):
        entries.setdefault(book_id, []).append({"id": pk, "usage_count": count, "last_used_at": _iso(last)})
    model = TenantModelSettings.objects.for_tenant(tenant).first()
    members = Membership.objects.for_tenant(tenant).select_related("user").order_by("pk")
    characters = Character.objects.for_tenant(tenant).select_related("lineage").order_by("pk")
    attachments = Attachment.objects.for_tenant(tenant).select_related("book").order_by("pk")
    own_books = set(Book.objects.for_tenant(tenant).values_list("pk", flat=True))
    kept_attachments = [a for a in attachments if a.book_id in book_ids or a.book_id not in own_books]
    chats = Chat.objects.for_tenant(tenant).prefetch_related("members").order_by("pk")
    # Entries of books the backup leaves out (members' private ones): their ids would name nothing, or
    # another entry, after a restore.
    unsaved = {str(pk) for pk in Entry.objects.for_tenant(tenant).exclude(book_id__in=book_ids)
               .values_list("pk", flat=True)}
    out: dict[str, Any] = {
        "version": BACKUP_VERSION,
        "tenant": {"id": tenant.pk, "name": tenant.name, "default_profile": tenant.default_profile},
        "settings": {"model": {"base_url": model.base_url if model else "", "model": model.model if model else ""}},
        "members": [{"email": m.user.email, "role": m.role} for m in members],
        "books": [{"id": book.pk, "entries": entries.get(book.pk, [])} for book in books],
        "left_out": {
            "private_books": len(own_books - book_ids),
            "attachments": len(attachments) - len(kept_attachments),
        },
        "characters": [
            {"id": c.pk, "name": c.name, "lineage": c.lineage.key, "created_by": emails.of(c.created_by_id),
             "created_at": _iso(c.created_at)}
            for c in characters
        ],
        "stories": _casts(Story.objects.for_tenant(tenant).prefetch_related("cast").order_by("pk")),
        "novels": _casts(Novel.objects.for_tenant(tenant).prefetch_related("cast").order_by("pk")),
        "attachments": [
            {"book": a.book_id, "own": a.book_id in own_books, "book_title": a.book.title,
             "target": a.target_kind, "target_id": a.character_id or a.story_id or a.novel_id,
             "position": a.position, "attached_by": emails.of(a.attached_by_id), "created_at": _iso(a.created_at)}
            for a in kept_attachments
        ],
        "chats": [
            {"id": c.pk, "owner": emails.of(c.owner_id), "character": c.character_id,
             "members": sorted(m.pk for m in c.members.all()), "story": c.story_id, "novel": c.novel_id,
             "timed_state": _state_without(c.timed_state or {}, unsaved), "created_at": _iso(c.created_at),
             **{name: getattr(c, name) for name in _CHAT_COLUMNS}}
            for c in chats
        ],
        "request_logs": _logs(actor) if request_logs else None,
        "lore_writes": [
            {"book": w.book_id, "entry": w.entry_id, "chat": w.chat_id, "created_at": _iso(w.created_at),
             "decided_at": _iso(w.decided_at), **{name: getattr(w, name) for name in _WRITE_COLUMNS}}
            for w in LoreWrite.objects.for_tenant(tenant).filter(book_id__in=book_ids).order_by("pk")
        ],
        # Jobs that ended; a queued or running one would need its worker and is left out.
        "jobs": [
            {"id": j.pk, "input": j.input, "accepted": j.accepted, "created_by": emails.of(j.created_by_id),
             "created_at": _iso(j.created_at), "started_at": _iso(j.started_at),
             "finished_at": _iso(j.finished_at), **{name: getattr(j, name) for name in _JOB_COLUMNS}}
            for j in Job.objects.for_tenant(tenant).filter(state__in=FINAL_STATES).order_by("pk")
        ],
    }
    out["left_out"]["jobs_in_progress"] = Job.objects.for_tenant(tenant).exclude(state__in=FINAL_STATES).count()
    return out


def _state_without(state: Mapping[str, Any], unsaved: set[str]) -> dict[str, Any]:
    """A chat's timed state without the entries the backup does not hold."""
    if not unsaved:
        return dict(state)
    out = dict(state)
    for name in ("kept", "spent"):
        if isinstance(state.get(name), list):
            out[name] = [x for x in state[name] if str(x) not in unsaved]
    st = state.get("sillytavern")
    if isinstance(st, Mapping):
        out["sillytavern"] = {
            kind: ({k: v for k, v in effects.items() if str(k).partition(".")[2] not in unsaved}
                   if kind in ("sticky", "cooldown") and isinstance(effects, Mapping) else effects)
            for kind, effects in st.items()
        }
    return out


class _Emails:
    """User id → email, one query per new id (people are global: a backup names them by email)."""

    def __init__(self) -> None:
        self._known: dict[int, str] = {}

    def of(self, user_id: int | None) -> str | None:
        if user_id is None:
            return None
        if user_id not in self._known:
            self._known[user_id] = User.objects.filter(pk=user_id).values_list("email", flat=True).first() or ""
        return self._known[user_id] or None


def _casts(rows: Any) -> list[dict[str, Any]]:
    return [{"id": r.pk, "title": r.title, "cast": sorted(c.pk for c in r.cast.all()),
             "created_at": _iso(r.created_at)} for r in rows]


def _logs(actor: Actor) -> list[dict[str, Any]]:
    """Every chat's request logs as the backing-up admin may read them (P-1: rows of other
    members' private books are left out, as on the chat page)."""
    out: list[dict[str, Any]] = []
    query = RequestLog.objects.for_tenant(actor.tenant).order_by("pk")
    last = 0
    while True:  # in pages: each log is decompressed once and let go
        page = list(query.filter(pk__gt=last)[:500])
        if not page:
            return out
        last = page[-1].pk
        for log in request_logs_for(actor, page):
            out.append({"chat": log.chat_id, "injections": log.injections, "world_index": log.world_index,
                        "log": log.log, "usage": log.usage, "created_at": _iso(log.created_at),
                        "usage_recorded_at": _iso(log.usage_recorded_at),
                        **{name: getattr(log, name) for name in _LOG_COLUMNS}})


# --- reading ---------------------------------------------------------------------------------


def read_section(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``"backup"`` section of a decoded document; ``None`` for a version-1 backup (books and lineages)."""
    raw = doc.get("backup")
    if raw is None:
        return None
    raw = as_object(raw, "backup")
    version = raw.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 2:
        refuse("{path} must be an integer of at least 2", "backup.version", rule=RULE,
               values={"path": "backup.version"})
    if version > BACKUP_VERSION:
        refuse("this is a version {version} backup; this Loreweave restores up to version {supported}",
               "backup.version", rule=RULE, values={"version": version, "supported": BACKUP_VERSION})
    for name in ("members", "books", "characters", "stories", "novels", "attachments", "chats", "lore_writes", "jobs"):
        _rows(raw, name)
    if raw.get("request_logs") is not None:
        _rows(raw, "request_logs")
    return raw


def _rows(raw: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
    value = raw.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        refuse("{path} must be a list, not {type}", f"backup.{name}", rule=RULE,
               values={"path": f"backup.{name}", "type": type_name(value)})
    for i, row in enumerate(value):
        as_object(row, f"backup.{name}.{i}")
    return value


def _text(row: Mapping[str, Any], key: str, path: str, *, default: str = "", limit: int = 0) -> str:
    value = row.get(key, default)
    if value is None:
        value = default
    if not isinstance(value, str) or (limit and len(value) > limit):
        refuse("{path} must be a string of at most {limit} characters", f"{path}.{key}", rule=RULE,
               values={"path": f"{path}.{key}", "limit": limit or "any number of"})
    return value


@overload
def _int(row: Mapping[str, Any], key: str, path: str, *, default: int = 0) -> int: ...
@overload
def _int(row: Mapping[str, Any], key: str, path: str, *, default: None) -> int | None: ...
def _int(row: Mapping[str, Any], key: str, path: str, *, default: int | None = 0) -> int | None:
    value = row.get(key, default)
    if value is None and default is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        refuse("{path} must be a whole number of at least 0", f"{path}.{key}", rule=RULE,
               values={"path": f"{path}.{key}"})
    return value


def _time(row: Mapping[str, Any], key: str, path: str) -> datetime | None:
    value = row.get(key)
    if value is None:
        return None
    parsed = parse_datetime(value) if isinstance(value, str) else None
    if parsed is None:
        refuse("{path} must be a date and time (ISO 8601)", f"{path}.{key}", rule=RULE,
               values={"path": f"{path}.{key}"})
    return parsed


def _choice(row: Mapping[str, Any], key: str, path: str, choices: Sequence[str]) -> str:
    value = row.get(key)
    if not isinstance(value, str) or value not in choices:
        refuse("{path} must be one of {choices}", f"{path}.{key}", rule=RULE,
               values={"path": f"{path}.{key}", "choices": ", ".join(choices)})
    return value


def _json(row: Mapping[str, Any], key: str, path: str, kind: type, default: Any) -> Any:
    value = row.get(key, default)
    if value is None:
        value = default
    if not isinstance(value, kind):
        refuse("{path} must be a {kind}, not {type}", f"{path}.{key}", rule=RULE,
               values={"path": f"{path}.{key}", "kind": "list" if kind is list else "object",
                       "type": type_name(value)})
    return value


# --- restoring -------------------------------------------------------------------------------


@dataclass
class Restored:
    """What a restore wrote so far, keyed by the backup's ids."""

    tenant: Tenant
    old_tenant: int | None
    books: dict[int, Book] = field(default_factory=dict)
    entries: dict[int, int] = field(default_factory=dict)
    characters: dict[int, Character] = field(default_factory=dict)
    stories: dict[int, Story] = field(default_factory=dict)
    novels: dict[int, Novel] = field(default_factory=dict)
    chats: dict[int, Chat] = field(default_factory=dict)
    jobs: dict[int, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    ownerless: dict[str, set[str]] = field(default_factory=dict)

    book_pks: dict[int, int] = field(default_factory=dict)
    # No books, chats or characters before the restore: the backup's tenant settings come back too.
    fresh: bool = False

    def book_add(self, old: int, book: Book) -> None:
        self.books[old] = book
        self.book_pks[old] = book.pk

    def book_id(self, old: Any) -> Any:
        return _mapped(old, self.book_pks)

    def entry_id(self, old: Any) -> Any:
        return _mapped(old, self.entries)


def _mapped(old: Any, mapping: Mapping[int, int]) -> Any:
    """``old`` (an id as a number or as text) mapped, in the same type; ids the backup does not hold
    (another tenant's public book, a member's private one) stay as they are."""
    if isinstance(old, bool):
        return old
    if isinstance(old, int):
        return mapping.get(old, old)
    if isinstance(old, str) and old.isdigit():
        new = mapping.get(int(old))
        return str(new) if new is not None else old
    return old


def _ref(mapping: Mapping[int, Any], value: Any, path: str, what: str, *, optional: bool = True) -> Any:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value not in mapping:
        refuse("{path} names a {what} the backup does not hold", path, rule=RULE, values={"path": path, "what": what})
    return mapping[value]


def book_entries(raw: Mapping[str, Any], index: int, count: int) -> list[dict[str, Any]]:
    """The ids and usage of native book ``index``'s entries (file order), checked against its ``count``."""
    books = _rows(raw, "books")
    if index >= len(books):
        refuse("{path} is missing: the backup lists fewer books than it holds", f"backup.books.{index}", rule=RULE,
               values={"path": f"backup.books.{index}"})
    rows = _json(books[index], "entries", f"backup.books.{index}", list, [])
    if len(rows) != count:
        refuse("{path} lists {listed} entries; the book holds {count}", f"backup.books.{index}.entries", rule=RULE,
               values={"path": f"backup.books.{index}.entries", "listed": len(rows), "count": count})
    for i, row in enumerate(rows):
        as_object(row, f"backup.books.{index}.entries.{i}")
    return rows


def restore_rest(actor: Actor, raw: Mapping[str, Any], done: Restored, warnings: list[str]) -> dict[str, int]:
    """Everything after the books: written in dependency order, every reference checked (a bad one
    refuses the whole restore: the caller's transaction rolls back)."""
    tenant = actor.tenant
    members = {m.user.email.casefold(): m.user
               for m in Membership.objects.for_tenant(tenant).select_related("user") if m.user.email}
    missing = [f"{m.get('email')} ({m.get('role')})" for m in _rows(raw, "members")
               if isinstance(m.get("email"), str) and m["email"].casefold() not in members]
    if missing:
        warnings.append("not members of this tenant, so not restored as members (add them, then their rows stay "
                        "nobody's until an admin reassigns them): " + ", ".join(missing))

    def person(email: Any, kind: str) -> User | None:
        if not isinstance(email, str) or not email:
            return None
        user = members.get(email.casefold())
        if user is None:
            done.ownerless.setdefault(kind, set()).add(email)
        return user

    _settings(actor, raw, warnings, fresh=done.fresh)
    _characters(tenant, raw, done, person)
    restorers: tuple[tuple[str, dict[int, Any], Any], ...] = (("stories", done.stories, story_restore),
                                                              ("novels", done.novels, novel_restore))
    for name, store, write in restorers:
        for i, row in enumerate(_rows(raw, name)):
            path = f"backup.{name}.{i}"
            cast = [_ref(done.characters, c, f"{path}.cast", "character", optional=False)
                    for c in _json(row, "cast", path, list, [])]
            store[_int(row, "id", path)] = write(tenant=tenant, title=_text(row, "title", path, limit=120) or "Untitled",
                                                 cast=cast, created_at=_time(row, "created_at", path))
    _attachments(actor, raw, done, person, warnings)
    _chats(tenant, raw, done, person)
    _logs_restore(tenant, raw, done)
    _lore_writes(tenant, raw, done)
    _jobs(tenant, raw, done, person)
    for kind, who in sorted(done.ownerless.items()):
        warnings.append(f"{kind} made by people who are not members of this tenant are nobody's now "
                        f"(tenant admins manage them): {', '.join(sorted(who))}")
    return {
        "characters": len(done.characters), "stories": len(done.stories), "novels": len(done.novels),
        "chats": len(done.chats), "jobs": len(done.jobs), **done.counts,
    }


def _settings(actor: Actor, raw: Mapping[str, Any], warnings: list[str], *, fresh: bool) -> None:
    settings = as_object(raw.get("settings") or {}, "backup.settings")
    model = as_object(settings.get("model") or {}, "backup.settings.model")
    base_url = _text(model, "base_url", "backup.settings.model", limit=500).strip()
    if base_url and not base_url.startswith(("http://", "https://")):
        refuse("{path} starts with http:// or https://", "backup.settings.model.base_url", rule=RULE,
               values={"path": "backup.settings.model.base_url"})
    _, filled = model_settings_restore(tenant=actor.tenant, base_url=base_url,
                                       model=_text(model, "model", "backup.settings.model", limit=200).strip())
    if filled:
        warnings.append("model settings restored (" + ", ".join(filled) + "); a backup never holds the model's "
                        "API key: set it again if the model needs one")
    profile = as_object(raw.get("tenant") or {}, "backup.tenant").get("default_profile")
    if profile in Tenant.Profile.values and profile != actor.tenant.default_profile:
        if fresh:
            tenant_default_profile_set(tenant=actor.tenant, profile=profile)
            warnings.append(f"the tenant's default profile is now {profile!r}, as in the backup")
        else:
            # A tenant in use keeps its own: changing it would change every chat that uses the default.
            warnings.append(f"the backup's default profile {profile!r} was not applied: this tenant was in use "
                            f"already and keeps {actor.tenant.default_profile!r}")


def _characters(tenant: Tenant, raw: Mapping[str, Any], done: Restored,
                person: Callable[[Any, str], User | None]) -> None:
    """By lineage and name: one the tenant has already is used, never doubled (a restore adds)."""
    have = {(c.lineage.key, c.name): c for c in Character.objects.for_tenant(tenant).select_related("lineage")}
    created = 0
    for i, row in enumerate(_rows(raw, "characters")):
        path = f"backup.characters.{i}"
        name = _text(row, "name", path, limit=120).strip()
        lineage = _text(row, "lineage", path, limit=200).strip() or name
        found = have.get((lineage, name))
        if found is None:
            found = character_import(tenant=tenant, name=name, lineage_key=lineage,
                                     created_by=person(row.get("created_by"), "characters"))
            have[(found.lineage.key, found.name)] = found
            created += 1
        done.characters[_int(row, "id", path)] = found
    done.counts["characters_created"] = created


def _attachments(actor: Actor, raw: Mapping[str, Any], done: Restored,
                 person: Callable[[Any, str], User | None], warnings: list[str]) -> None:
    targets: dict[str, Mapping[int, Any]] = {"character": done.characters, "story": done.stories, "novel": done.novels}
    count = 0
    for i, row in enumerate(_rows(raw, "attachments")):
        path = f"backup.attachments.{i}"
        kind = _choice(row, "target", path, ("character", "story", "novel", "tenant"))
        where = {} if kind == "tenant" else {kind: _ref(targets[kind], row.get("target_id"), f"{path}.target_id",
                                                        kind, optional=False)}
        if row.get("own", True):
            book = _ref(done.books, row.get("book"), f"{path}.book", "book", optional=False)
        else:
            # Another tenant's book: attached again when it is still public (by id, P-3). A link token
            # is never in a backup, so an unlisted one is attached again by whoever has its link.
            try:
                book = book_for_attach(actor, book_id=_int(row, "book", path))
                if book.title != row.get("book_title"):  # another database: the id names another book
                    raise NotFound("No such book.", field="book_id")
            except NotFound:
                warnings.append(f"attachment of another tenant's book {row.get('book_title')!r} was not restored: "
                                "it is not public here; attach it again through its link")
                continue
        attachment_restore(tenant=actor.tenant, book=book, position=_int(row, "position", path) or 0,
                           attached_by=person(row.get("attached_by"), "attachments"),
                           created_at=_time(row, "created_at", path), **where)
        count += 1
    done.counts["attachments"] = count


def _chats(tenant: Tenant, raw: Mapping[str, Any], done: Restored,
           person: Callable[[Any, str], User | None]) -> None:
    hashes = _FingerprintMap(tenant, done)
    for i, row in enumerate(_rows(raw, "chats")):
        path = f"backup.chats.{i}"
        members = [_ref(done.characters, m, f"{path}.members", "character", optional=False)
                   for m in _json(row, "members", path, list, [])]
        state = _json(row, "timed_state", path, dict, {})
        done.chats[_int(row, "id", path)] = chat_restore(
            tenant=tenant,
            members=members,
            created_at=_time(row, "created_at", path),
            owner=person(row.get("owner"), "chats"),
            kind=_choice(row, "kind", path, Chat.Kind.values),
            character=_ref(done.characters, row.get("character"), f"{path}.character", "character"),
            story=_ref(done.stories, row.get("story"), f"{path}.story", "story"),
            novel=_ref(done.novels, row.get("novel"), f"{path}.novel", "novel"),
            channel_id=_text(row, "channel_id", path, limit=64),
            parent_channel_id=_text(row, "parent_channel_id", path, limit=64),
            profile=_text(row, "profile", path, limit=16),
            model_id=_text(row, "model_id", path, limit=120),
            turns=_int(row, "turns", path),
            timed_state=timed_state_remap(state, done, hashes),
        )


def timed_state_remap(state: Mapping[str, Any], done: Restored, hashes: _FingerprintMap | None = None) -> dict[str, Any]:
    """A chat's timed state with the restored entries' ids (``retrieval.engine.values.TimedState``)."""
    out = dict(state)
    for name in ("kept", "spent"):
        if isinstance(state.get(name), list):
            out[name] = sorted(str(done.entry_id(x)) for x in state[name])
    st = state.get("sillytavern")
    if isinstance(st, Mapping):
        timers = dict(st)
        for kind in ("sticky", "cooldown"):
            effects = st.get(kind)
            if not isinstance(effects, Mapping):
                continue
            moved: dict[str, Any] = {}
            for key, effect in effects.items():
                world, _, uid = str(key).partition(".")
                new_key = f"{done.book_id(world)}.{done.entry_id(uid)}"
                if isinstance(effect, Mapping) and hashes is not None and isinstance(effect.get("hash"), str):
                    # Timers follow the entry's fingerprint, which includes its ids: recompute it.
                    effect = {**effect, "hash": hashes.new(world, effect["hash"])}
                moved[new_key] = effect
            timers[kind] = moved
        out["sillytavern"] = timers
    return out


class _FingerprintMap:
    """SillyTavern timers name an entry's fingerprint, a digest of the entry with its world (book id)
    and uid (entry id). The restored entry is the same but for those ids: its fingerprint as it was
    (old ids) maps to its fingerprint now (new ids). Computed per book, only for books a timer names."""

    def __init__(self, tenant: Tenant, done: Restored) -> None:
        self.tenant = tenant
        self.done = done
        self._books: dict[str, dict[str, str]] = {}

    def new(self, world: str, fingerprint: str) -> str:
        if world not in self._books:
            self._books[world] = self._book(world)
        return self._books[world].get(fingerprint, fingerprint)

    def _book(self, world: str) -> dict[str, str]:
        book = self.done.books.get(int(world)) if world.isdigit() else None
        if book is None:
            return {}
        back = {new: old for old, new in self.done.entries.items()}
        rows = list(Entry.objects.for_tenant(self.tenant).filter(book=book).order_by("position", "id"))
        imported = book_as_imported(book, entries=rows).entries
        old = book_from_st_json([world_entry(e, index=i, uid=back.get(r.pk, r.pk))
                                 for i, (e, r) in enumerate(zip(imported, rows))], world=world)
        new = book_from_st_json([world_entry(e, index=i, uid=r.pk) for i, (e, r) in enumerate(zip(imported, rows))],
                                world=str(book.pk))
        return {a.fingerprint: b.fingerprint for a, b in zip(old, new)}


def _row_ids(rows: Any, done: Restored, keys: Sequence[str]) -> list[Any]:
    if not isinstance(rows, list):
        return []
    out = []
    for row in rows:
        if isinstance(row, Mapping):
            row = dict(row)
            for key in keys:
                if key in row:
                    row[key] = done.book_id(row[key]) if key == "book" else done.entry_id(row[key])
        out.append(row)
    return out


def _logs_restore(tenant: Tenant, raw: Mapping[str, Any], done: Restored) -> None:
    if raw.get("request_logs") is None:
        return
    rows = []
    for i, row in enumerate(_rows(raw, "request_logs")):
        path = f"backup.request_logs.{i}"
        usage = _json(row, "usage", path, dict, {})
        rows.append({
            "chat": _ref(done.chats, row.get("chat"), f"{path}.chat", "chat", optional=False),
            "injections": _row_ids(row.get("injections"), done, ("entry", "book")),
            "world_index": _row_ids(row.get("world_index"), done, ("entry",)),
            "log": _row_ids(row.get("log"), done, ("entry", "book", "via_entry")),
            # {tenant id: [entry ids]}: this tenant's part is now the restoring tenant's.
            "usage": {(str(tenant.pk) if str(k) == str(done.old_tenant) else k):
                      [done.entry_id(e) for e in v] if isinstance(v, list) else v for k, v in usage.items()},
            "created_at": _time(row, "created_at", path),
            "usage_recorded_at": _time(row, "usage_recorded_at", path),
            "turn": _int(row, "turn", path),
            "profile": _text(row, "profile", path, limit=16),
            "model_id": _text(row, "model_id", path, limit=120),
            "log_detail": _text(row, "log_detail", path, default="compact", limit=8),
            "entries_considered": _int(row, "entries_considered", path, default=None),
            "not_matched": _int(row, "not_matched", path, default=None),
        })
        if rows[-1]["created_at"] is None:
            del rows[-1]["created_at"]
    done.counts["request_logs"] = request_logs_restore(tenant=tenant, rows=rows)


def _lore_writes(tenant: Tenant, raw: Mapping[str, Any], done: Restored) -> None:
    count = 0
    for i, row in enumerate(_rows(raw, "lore_writes")):
        path = f"backup.lore_writes.{i}"
        book = _ref(done.books, row.get("book"), f"{path}.book", "book", optional=False)
        chat = _int(row, "chat", path)
        fields = {name: row.get(name) for name in _WRITE_COLUMNS if name in row}
        fields["kind"] = _choice(row, "kind", path, LoreWrite.Kind.values)
        fields["state"] = _choice(row, "state", path, LoreWrite.State.values)
        fields["text"] = _text(row, "text", path)
        for name in ("reply_id", "model", "title", "content_before", "content_after", "decided_by"):
            fields[name] = _text(row, name, path)
        entry = row.get("entry")
        lore_write_restore(
            tenant=tenant, book=book,
            # An entry gone before the backup (an undone create, a hand delete) names none here: its old id
            # could be a restored entry's in this database, and an undo would then change that one.
            entry_id=done.entries.get(entry) if isinstance(entry, int) else None,
            # A write from a chat deleted before the backup names no chat here (0): its old id could be
            # another chat's in this database, and a reply revert there must not find it.
            chat_id=done.chats[chat].pk if chat in done.chats else 0,
            created_at=_time(row, "created_at", path) or LoreWrite._meta.get_field("created_at").get_default(),
            decided_at=_time(row, "decided_at", path), **fields,
        )
        count += 1
    done.counts["lore_writes"] = count


def _job_ids(value: Any, done: Restored) -> Any:
    """Ids inside a job's input and receipt: books, entries (the accepted draft's) and jobs."""
    if isinstance(value, list):
        return [_job_ids(v, done) for v in value]
    if not isinstance(value, Mapping):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in ("book", "book_id") and isinstance(item, int):
            # A book the backup does not hold (a private one, since deleted) is no target here.
            out[key] = done.book_pks.get(item)
        elif key in ("entry_ids",) and isinstance(item, list):
            out[key] = [done.entry_id(e) for e in item]
        elif key == "job" and isinstance(item, int):
            out[key] = done.jobs.get(item, item)
        else:
            out[key] = _job_ids(item, done)
    return out


def _jobs(tenant: Tenant, raw: Mapping[str, Any], done: Restored,
          person: Callable[[Any, str], User | None]) -> None:
    for i, row in enumerate(_rows(raw, "jobs")):
        path = f"backup.jobs.{i}"
        old = _int(row, "id", path)
        job = job_restore(
            tenant=tenant,
            kind=_choice(row, "kind", path, JobKind.values),
            state=_choice(row, "state", path, [str(s) for s in FINAL_STATES]),
            progress=min(100, _int(row, "progress", path) or 0),
            model=_text(row, "model", path, limit=200),
            input=_job_ids(_json(row, "input", path, dict, {}), done),
            draft=_json(row, "draft", path, list, []),
            warnings=_json(row, "warnings", path, list, []),
            usage=_json(row, "usage", path, dict, {}),
            error=_json(row, "error", path, dict, {}),
            accepted=None,
            created_by=person(row.get("created_by"), "jobs"),
            created_at=_time(row, "created_at", path) or Job._meta.get_field("created_at").get_default(),
            started_at=_time(row, "started_at", path),
            finished_at=_time(row, "finished_at", path),
        )
        done.jobs[old] = job.pk
        accepted = row.get("accepted")
        if accepted is not None:
            Job.objects.for_tenant(tenant).filter(pk=job.pk).update(
                accepted=_job_ids(_json(row, "accepted", path, dict, {}), done))


def entries_restored(tenant: Tenant, rows: Sequence[Mapping[str, Any]], created: Sequence[Entry], path: str,
                     done: Restored) -> None:
    """Map one book's old entry ids to the rows just written (same order) and bring their usage back."""
    usage = []
    for i, (row, entry) in enumerate(zip(rows, created)):
        old = _int(row, "id", f"{path}.{i}")
        done.entries[old] = entry.pk
        usage.append((entry.pk, _int(row, "usage_count", f"{path}.{i}") or 0, _time(row, "last_used_at", f"{path}.{i}")))
    entry_usage_restore(tenant=tenant, usage=usage)




def book_id_of(raw: Mapping[str, Any], index: int) -> int:
    return _int(_rows(raw, "books")[index], "id", f"backup.books.{index}") or 0


def books_count_check(raw: Mapping[str, Any], count: int) -> None:
    """``backup.books`` pairs with the native books one to one: a file edited by hand must keep them so."""
    listed = len(_rows(raw, "books"))
    if listed != count:
        refuse("{path} lists {listed} books; the file holds {count}", "backup.books", rule=RULE,
               values={"path": "backup.books", "listed": listed, "count": count})
