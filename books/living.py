"""The living world (L-1..L-4): the model writes lore into its owner's book, every write recorded.

A write is one :class:`~books.models.LoreWrite`: a new when-relevant entry
(``create``, never canon) or text added at the end of an entry (``append``,
never a rewrite or a delete, L-2). Entries change only through the books
services, so limits, versions and indexing (after commit, ``books.events``)
are the editor's own. Every refusal is a ``DomainError`` naming field and rule;
the cast layer hands it to the model as a tool result.

- L-1: the book is a private world book with the living world on, owned by the
  acting user (the cast layer checks the chat is theirs).
- L-3: 30 recorded writes per book in any rolling 24 hours (held, undone and
  rejected writes count: the budget bounds what the model tries); sizes per
  write; W-12 for titles, lore and aliases.
- L-4: undo newest to oldest per entry, only while the entry is as that write
  left it; a reply's writes revert together or not at all; a book with
  ``living_world_review`` holds writes until the owner accepts or rejects.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_noop

from books import limits
from books.access import access_book, book_can_read
from books.models import Book, Entry, LoreWrite, Profile, Visibility
from books.services import entry_create, entry_delete, entry_update
from lore_platform.errors import (
    Conflict,
    DomainError,
    LimitExceeded,
    NotFound,
    PermissionDenied,
    Term,
    ValidationFailed,
)
from lore_platform.tenancy.actor import Actor

# How an append joins the lore it grows: a paragraph of its own.
APPEND_SEPARATOR = "\n\n"
TOOL_CREATE = "lore_create"
TOOL_APPEND = "lore_append"
TOOL_NAMES = (TOOL_CREATE, TOOL_APPEND)


# --- which books live, and the tools that write them (L-1, L-2) ----------------------------


def book_is_living_for(book: Book, user_id: int | None) -> bool:
    """L-1: a private world book with the living world on, owned by ``user_id``."""
    return (
        user_id is not None
        and book.living_world
        and book.profile == Profile.SMART
        and book.visibility == Visibility.PRIVATE
        and book.owner_id == user_id
    )


# L-1..L-4 are smart-profile rules (SPEC §7). What the tools write is read the smart way: a new
# when-relevant entry is found by its title, an alias or its meaning (W-3, W-4), and an append grows an
# entry the smart turn injects or lists in its world index. The keyword profiles (classic, sillytavern)
# read the same book as keyword entries: only keys (the aliases) trigger it, never the title or the
# meaning, so a new entry without aliases never reaches the model there (measured through the API);
# the server profile reads no character's book at all (S-2). So the tools exist only in smart turns.
LIVING_PROFILES = frozenset({Profile.SMART.value})


def profile_takes_living_world(profile: str) -> bool:
    """Whether a turn under ``profile`` reads what the living world writes (L-1, L-2)."""
    return profile in LIVING_PROFILES


def living_world_profile_reason(profile: str) -> str:
    """Why a chat under ``profile`` has no living-world tools, in the API's words (L-1)."""
    return (f"This chat runs the {profile} profile, which does not read the living world's lore: the model's new "
            "entries are found by name or by meaning only in the smart profile (L-1, L-2), so no lore_create / "
            "lore_append tools are offered here and tool calls are refused. Use the smart profile for this chat "
            "(create it with \"profile\": \"smart\", or send \"profile\": \"smart\" with the context call and the "
            "tool call).")


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional argument as OpenAI's strict mode wants it: required, and null when not given."""
    return {**schema, "type": [schema["type"], "null"]}


def living_tools_schema(books: Sequence[Book]) -> tuple[dict[str, Any], ...]:
    """``lore_create`` and ``lore_append`` in the OpenAI function-calling format, for ``books``.

    With several living books each tool takes a ``book`` id, and the
    descriptions say what each book is for (its title and description).

    The definitions pass OpenAI's strict mode as published (``strict: true``):
    every property is required (an optional one is nullable), every object has
    ``additionalProperties: false``, and only the supported keywords appear, so
    lengths are said in the descriptions and enforced when the call is run
    (W-12, L-3: a refusal the model reads). A non-strict model may leave a
    nullable argument out: missing is read as null.
    """
    if not books:
        return ()
    several = len(books) > 1
    purpose = "The world fact must be lasting: a place, person, faction, object, custom or rule that stays true " \
        "after this scene. Never use it for the scene itself, moods, plot events of this playthrough or facts " \
        "about the user."
    book_prop: dict[str, Any] = {}
    where = f' to the world book "{books[0].title}"'
    if several:
        lines = "; ".join(f"{b.pk} = {b.title}" + (f" ({b.description[:200]})" if b.description else "")
                          for b in books)
        where = " to one of the world books"
        book_prop = {"book": {"type": "integer", "enum": [b.pk for b in books],
                              "description": f"Which world book it belongs in: {lines}."}}
    required_book = ["book"] if several else []
    title, lore = limits.SMART_ENTRY_TITLE, limits.SMART_ENTRY_CONTENT
    aliases = limits.SMART_ALIASES
    create = {
        "type": "function",
        "function": {
            "name": TOOL_CREATE,
            "description": (
                f"Add a new lore entry{where} when the story establishes a durable world fact that no entry "
                f"covers yet. {purpose} The entry is only recalled when relevant (never always-on)."
            ),
            "strict": True,
            "parameters": {
                "type": "object",
                "properties": {
                    **book_prop,
                    "title": {"type": "string",
                              "description": f"The topic's name, as someone would ask about it "
                                             f"({title.min}–{title.max} characters)."},
                    "lore": {"type": "string",
                             "description": f"Self-contained lore, written as an encyclopedia line, not as narration "
                                            f"({lore.min}–{limits.LIVING_WORLD_NEW_ENTRY.value:,} characters)."},
                    "aliases": _nullable({
                        "type": "array", "items": {"type": "string"},
                        "description": f"Other names the topic goes by (proper names, not common words; at most "
                                       f"{aliases.max_items}, each at most {aliases.max_item_length} characters), "
                                       "or null when it has none.",
                    }),
                },
                "required": [*required_book, "title", "lore", "aliases"],
                "additionalProperties": False,
            },
        },
    }
    append = {
        "type": "function",
        "function": {
            "name": TOOL_APPEND,
            "description": (
                f"Add a lasting new detail at the end of an existing lore entry{where}. {purpose} Existing text is "
                "never rewritten or deleted: only add what is new."
            ),
            "strict": True,
            "parameters": {
                "type": "object",
                "properties": {
                    **book_prop,
                    "entry": {"type": "integer", "description": "The entry id (from the injected lore or world index)."},
                    "text": {"type": "string",
                             "description": f"The new detail, one or a few sentences (at most "
                                            f"{limits.LIVING_WORLD_APPEND.value:,} characters)."},
                },
                "required": [*required_book, "entry", "text"],
                "additionalProperties": False,
            },
        },
    }
    return (create, append)


# The notice's text is a msgid as well: the pages show it translated (web/locale).
LIVING_WORLD_OFF = gettext_noop("The living world is now off: it works only on private books, and this book is "
                                "%(visibility)s. The model no longer writes into it; turning it back on needs the "
                                "book private again.")


def living_world_off_notice(book: Book, *, translate: Callable[[str], str] = str,
                            visibility: str | None = None) -> dict[str, str]:
    """L-1's notice when a change of visibility turned the living world off (the API and the pages)."""
    text = translate(LIVING_WORLD_OFF) % {"visibility": visibility or book.visibility}
    return {"code": "living_world_off", "rule": "L-1", "message": text}


# --- checks ------------------------------------------------------------------------------


def _living_check(actor: Actor, book: Book) -> None:
    if not book_is_living_for(book, actor.user.pk if actor.user is not None else None):
        raise PermissionDenied(
            "This book does not take lore from the model: the living world is off, or the book is not a private "
            "world book of this chat's owner (L-1).",
            field="book", rule="L-1", code="living_world_off",
        )


def living_budget_check(book: Book, *, now: Any = None) -> int:
    """L-3: refuse the 31st write in any rolling 24 hours; returns the writes used in the window."""
    now = now or timezone.now()
    budget = limits.LIVING_WORLD_WRITES_PER_DAY
    recent = LoreWrite.objects.for_tenant(book.tenant).filter(
        book=book, created_at__gt=now - limits.LIVING_WORLD_WINDOW
    )
    used = recent.count()
    if used >= budget.value:
        oldest = recent.order_by("created_at").values_list("created_at", flat=True).first()
        free_at = (oldest or now) + limits.LIVING_WORLD_WINDOW
        raise LimitExceeded(
            "This book took {used} writes in the last 24 hours; the limit is {limit} (L-3). "
            "The next write is possible after {next_write_at}.",
            values={"used": used, "limit": budget.value, "next_write_at": free_at.isoformat(timespec="seconds")},
            field="book", rule=budget.rule, code="write_budget_exhausted",
            details={"limit": budget.value, "actual": used, "unit": budget.unit,
                     "next_write_at": free_at.isoformat(timespec="seconds")},
        )
    return used


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailed("Must be non-empty text.", field=field)
    return value.strip()


def _aliases(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise ValidationFailed("Aliases are a list of texts.", field="aliases")
    return list(dict.fromkeys(a.strip() for a in value if a.strip()))


_ARGUMENT_OF = {"content": "lore", "keys": "aliases"}


def _create_check(book: Book, title: str, lore: str, aliases: list[str]) -> None:
    limits.count_check(len(lore), limits.LIVING_WORLD_NEW_ENTRY, field="lore", what=Term("The new entry's lore"))
    try:
        limits.entry_fields_check(Profile.SMART, {"title": title, "content": lore, "keys": aliases})
    except DomainError as exc:
        # The model wrote tool arguments, not entry columns: name the argument it can fix.
        if exc.field:
            head, _, rest = exc.field.partition("[")
            exc.field = _ARGUMENT_OF.get(head, head) + (f"[{rest}" if rest else "")
        raise
    limits.entry_capacity_check(book, adding=1)


def _grown(entry: Entry, text: str) -> str:
    limits.count_check(len(text), limits.LIVING_WORLD_APPEND, field="text", what=Term("The appended text"))
    grown = entry.content.rstrip() + APPEND_SEPARATOR + text if entry.content.strip() else text
    limits.count_check(len(grown), limits.LIVING_WORLD_GROWN_ENTRY, field="text", what=Term("The grown entry"))
    return grown


def _entry_of(book: Book, entry_id: Any) -> Entry:
    if isinstance(entry_id, bool) or not isinstance(entry_id, int):
        raise ValidationFailed("Name the entry by its id (an integer).", field="entry")
    entry = Entry.objects.for_tenant(book.tenant).filter(book=book, pk=entry_id).first()
    if entry is None:
        raise NotFound("No such entry in this book.", field="entry")
    entry.book = book
    return entry


# --- writes ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class WriteSource:
    """Where a write came from (L-4): the chat, the reply that produced it, the model."""

    chat_id: int
    reply_id: str
    model: str = ""


def _apply(actor: Actor, book: Book, write: LoreWrite) -> None:
    """Make a held or new write real through the editor's services (limits, version, indexing)."""
    title = write.edit_title if write.edit_title is not None else write.title
    aliases = write.edit_aliases if write.edit_aliases is not None else write.aliases
    text = write.edit_text if write.edit_text is not None else write.text
    if write.kind == LoreWrite.Kind.CREATE:
        _create_check(book, title, text, aliases)
        entry = entry_create(actor=actor, book=book, title=title, content=text, keys=aliases, canon=False)
        write.content_before = ""
    else:
        if write.entry_id is None:
            raise Conflict("The entry this write adds to was deleted.", field="entry", rule="L-4")
        entry = _entry_of(book, write.entry_id)
        before = entry.content
        entry = entry_update(actor=actor, entry=entry, content=_grown(entry, text))
        write.content_before = before
    write.entry = entry
    write.content_after = entry.content
    write.state = LoreWrite.State.APPLIED


@transaction.atomic
def lore_write(
    *, actor: Actor, book: Book, source: WriteSource, tool: str, arguments: Mapping[str, Any]
) -> LoreWrite:
    """Run one ``lore_create`` / ``lore_append`` call against ``book``; record it (L-1..L-4).

    Checks everything first (living, budget, sizes, W-12) and writes nothing on a refusal.
    """
    locked = access_book(actor, book.pk, need="edit", for_update=True)
    _living_check(actor, locked)
    living_budget_check(locked)
    write = LoreWrite(tenant=locked.tenant, book=locked, chat_id=source.chat_id, reply_id=source.reply_id[:120],
                      model=(source.model or "")[:120])
    if tool == TOOL_CREATE:
        unknown = set(arguments) - {"book", "title", "lore", "aliases"}
        if unknown:
            name = sorted(unknown)[0]
            raise ValidationFailed("Unknown argument {name}.", values={"name": repr(name)}, field=name)
        write.kind = LoreWrite.Kind.CREATE
        write.title = _text(arguments.get("title"), "title")
        write.text = _text(arguments.get("lore"), "lore")
        write.aliases = _aliases(arguments.get("aliases"))
        _create_check(locked, write.title, write.text, write.aliases)
    elif tool == TOOL_APPEND:
        unknown = set(arguments) - {"book", "entry", "text"}
        if unknown:
            name = sorted(unknown)[0]
            raise ValidationFailed("Unknown argument {name}.", values={"name": repr(name)}, field=name)
        write.kind = LoreWrite.Kind.APPEND
        entry = _entry_of(locked, arguments.get("entry"))
        write.entry = entry
        write.title = entry.title
        write.text = _text(arguments.get("text"), "text")
        _grown(entry, write.text)
    else:
        raise ValidationFailed("Unknown tool {tool}; the living world has {tools}.",
                               values={"tool": repr(tool), "tools": ", ".join(TOOL_NAMES)}, field="tool")
    if locked.living_world_review:
        write.state = LoreWrite.State.HELD
    else:
        _apply(actor, locked, write)
    write.save()
    return write


def _write_get(actor: Actor, book: Book, write_id: int | str) -> LoreWrite:
    try:
        pk = int(write_id)
    except (TypeError, ValueError):
        raise NotFound("No such AI update.", field="write") from None
    write = LoreWrite.objects.for_tenant(actor.tenant).select_for_update().filter(book=book, pk=pk).first()
    if write is None:
        raise NotFound("No such AI update.", field="write")
    return write


# A write's state as a refusal names it (pages say it in their language).
_STATE_SAID: dict[str, str] = {
    LoreWrite.State.APPLIED: Term("applied"),
    LoreWrite.State.HELD: Term("held"),
    LoreWrite.State.REJECTED: Term("rejected"),
    LoreWrite.State.UNDONE: Term("undone"),
}


def _state_said(write: LoreWrite) -> str:
    return _STATE_SAID.get(write.state, str(write.state))


# What an undo found edited since the AI update, in its fixed order: each combination is a msgid
# (the refusal names it as a Term, and pages translate it).
EDITED_PARTS = (gettext_noop("lore"), gettext_noop("title"), gettext_noop("aliases"), gettext_noop("lore, title"),
                gettext_noop("lore, aliases"), gettext_noop("title, aliases"), gettext_noop("lore, title, aliases"))


def _changes_since(write: LoreWrite, entry: Entry) -> list[str]:
    """What differs between the entry now and as ``write`` left it."""
    changed = []
    if entry.content != write.content_after:
        changed.append("lore")
    if write.kind == LoreWrite.Kind.CREATE:
        title = write.edit_title if write.edit_title is not None else write.title
        aliases = write.edit_aliases if write.edit_aliases is not None else write.aliases
        if entry.title != title:
            changed.append("title")
        if list(entry.keys) != list(aliases):
            changed.append("aliases")
    return changed


def _undo(actor: Actor, book: Book, write: LoreWrite, *, reason: str) -> None:
    if write.state != LoreWrite.State.APPLIED:
        raise Conflict("This AI update is {state}, not applied: there is nothing to undo.",
                       values={"state": _state_said(write)}, field="write", rule="L-4", code="not_applied")
    later = Q(created_at__gt=write.created_at) | Q(created_at=write.created_at, pk__gt=write.pk)
    newer_ids = list(
        LoreWrite.objects.for_tenant(book.tenant)
        .filter(later, book=book, entry_id=write.entry_id, state=LoreWrite.State.APPLIED)  # type: ignore[misc]
        .order_by("-created_at", "-id").values_list("pk", flat=True)
    )
    if newer_ids:
        raise Conflict(
            "A newer AI update (#{newer}) changed this entry after this one; undo goes newest to oldest, "
            "so undo that one first (L-4).",
            values={"newer": newer_ids[0]},
            field="write", rule="L-4", code="undo_order", details={"newer": newer_ids},
        )
    entry = Entry.objects.for_tenant(book.tenant).filter(book=book, pk=write.entry_id).first()  # type: ignore[misc]
    if entry is None:
        pass  # deleted by hand since: nothing of this write is left, so it is undone as it stands
    elif changed := _changes_since(write, entry):
        raise Conflict(
            "The entry \"{title}\" changed since this AI update ({changed} edited); undoing it "
            "would lose that change, so it stays. Edit the entry by hand instead (L-4).",
            values={"title": entry.title, "changed": Term(", ".join(changed))},  # one of EDITED_PARTS
            field="write", rule="L-4", code="undo_conflict", details={"changed": changed, "entry": entry.pk},
        )
    elif write.kind == LoreWrite.Kind.CREATE:
        entry.book = book
        entry_delete(actor=actor, entry=entry)
    else:
        entry.book = book
        entry_update(actor=actor, entry=entry, content=write.content_before)
    write.state = LoreWrite.State.UNDONE
    write.decided_at = timezone.now()
    write.decided_by = reason
    write.save(update_fields=["state", "decided_at", "decided_by"])


def _book_for_write(actor: Actor, book: Book) -> Book:
    return access_book(actor, book.pk, need="edit", for_update=True)


@transaction.atomic
def lore_write_undo(*, actor: Actor, book: Book, write_id: int | str) -> LoreWrite:
    """Undo one applied write (L-4): newest first per entry, only while the entry is unchanged."""
    locked = _book_for_write(actor, book)
    write = _write_get(actor, locked, write_id)
    _undo(actor, locked, write, reason="undo")
    return write


@transaction.atomic
def reply_writes_revert(*, actor: Actor, chat_id: int, reply_id: str) -> list[LoreWrite]:
    """A reply was regenerated or deleted: revert every write it made, all or nothing (L-4).

    Applied writes are undone newest first; held ones are rejected. A conflict
    (an entry edited since) refuses the whole revert and changes nothing.
    """
    writes = list(
        LoreWrite.objects.for_tenant(actor.tenant)
        .filter(chat_id=chat_id, reply_id=reply_id, state__in=[LoreWrite.State.APPLIED, LoreWrite.State.HELD])
        .order_by("-created_at", "-id")
    )
    books: dict[int, Book] = {}
    for book_id in sorted({w.book_id for w in writes}):  # a stable lock order across books
        books[book_id] = access_book(actor, book_id, need="edit", for_update=True)
    now = timezone.now()
    for write in writes:
        book = books[write.book_id]
        if write.state == LoreWrite.State.APPLIED:
            _undo(actor, book, write, reason="reply_reverted")
        else:
            write.state = LoreWrite.State.REJECTED
            write.decided_at = now
            write.decided_by = "reply_reverted"
            write.save(update_fields=["state", "decided_at", "decided_by"])
    return writes


def _edits_clean(write: LoreWrite, edits: Mapping[str, Any]) -> dict[str, Any]:
    allowed = {"title", "lore", "aliases"} if write.kind == LoreWrite.Kind.CREATE else {"text"}
    unknown = set(edits) - allowed
    if unknown:
        name = sorted(unknown)[0]
        raise ValidationFailed("A {kind} write cannot edit {name}; it has {allowed}.",
                               values={"kind": write.kind, "name": repr(name), "allowed": ", ".join(sorted(allowed))},
                               field=name)
    cleaned: dict[str, Any] = {}
    if "title" in edits:
        cleaned["edit_title"] = _text(edits["title"], "title")
    if "lore" in edits:
        cleaned["edit_text"] = _text(edits["lore"], "lore")
    if "text" in edits:
        cleaned["edit_text"] = _text(edits["text"], "text")
    if "aliases" in edits:
        cleaned["edit_aliases"] = _aliases(edits["aliases"])
    return cleaned


@transaction.atomic
def lore_write_edit(*, actor: Actor, book: Book, write_id: int | str, edits: Mapping[str, Any]) -> LoreWrite:
    """Keep the owner's edits to a held write; they apply when it is accepted."""
    locked = _book_for_write(actor, book)
    write = _write_get(actor, locked, write_id)
    if write.state != LoreWrite.State.HELD:
        raise Conflict("This AI update is {state}; only held ones are edited before accepting.",
                       values={"state": _state_said(write)}, field="write", rule="L-4", code="not_held")
    cleaned = _edits_clean(write, edits)
    for name, value in cleaned.items():
        setattr(write, name, value)
    if cleaned:
        write.save(update_fields=list(cleaned))
    return write


def lore_write_accept(
    *, actor: Actor, book: Book, write_id: int | str, edits: Mapping[str, Any] | None = None
) -> LoreWrite:
    """Apply a held write, with the owner's edits (L-4).

    Edits are saved first, in their own transaction: a refused accept (a limit,
    an entry deleted since) keeps them for the next try.
    """
    if edits:
        lore_write_edit(actor=actor, book=book, write_id=write_id, edits=edits)
    with transaction.atomic():
        locked = _book_for_write(actor, book)
        write = _write_get(actor, locked, write_id)
        if write.state != LoreWrite.State.HELD:
            raise Conflict("This AI update is {state}; only held ones are accepted.",
                           values={"state": _state_said(write)}, field="write", rule="L-4", code="not_held")
        _apply(actor, locked, write)
        write.decided_at = timezone.now()
        write.decided_by = "accepted"
        write.save()
    return write


@transaction.atomic
def lore_write_reject(*, actor: Actor, book: Book, write_id: int | str) -> LoreWrite:
    locked = _book_for_write(actor, book)
    write = _write_get(actor, locked, write_id)
    if write.state != LoreWrite.State.HELD:
        raise Conflict("This AI update is {state}; only held ones are rejected.",
                       values={"state": _state_said(write)}, field="write", rule="L-4", code="not_held")
    write.state = LoreWrite.State.REJECTED
    write.decided_at = timezone.now()
    write.decided_by = "rejected"
    write.save(update_fields=["state", "decided_at", "decided_by"])
    return write


def lore_writes_list(*, actor: Actor, book: Book, state: str | None = None) -> Any:
    """The book's AI updates, newest first (L-4): its owner sees them, with a read key too."""
    if not book_can_read(actor, book):
        raise NotFound("No such book.", field="book")
    if book.owner_id is None or actor.user is None or book.owner_id != actor.user.pk:
        raise PermissionDenied("Only the book's owner sees its AI updates (L-4).", rule="L-4")
    rows = LoreWrite.objects.for_tenant(actor.tenant).filter(book=book).order_by("-created_at", "-id")
    if state:
        if state not in LoreWrite.State.values:
            raise ValidationFailed("state is one of {states}.", values={"states": ", ".join(LoreWrite.State.values)},
                                   field="state")
        rows = rows.filter(state=state)
    return rows
