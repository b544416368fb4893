"""Every product limit on books and entries, in one module.

Each limit carries the rule ID it comes from, so a refusal can name the field,
the number and the rule. Services call these checks *before* writing anything,
on every path: the editor API, bulk actions, the importer (through
``entries_create_bulk``) and, later, the living world. A check raises:

- ``LimitExceeded`` (HTTP 422) when a maximum would be broken (too long, too
  many tags, too many entries, a batch too big);
- ``ValidationFailed`` (HTTP 400) when a value is below its minimum or outside
  its range (a 19-character lore, probability 101).

Both carry ``field``, ``rule`` and ``details = {"limit"|"min"/"max", "actual", "unit"}``.

Where the seeds give numbers only for one profile, the others are unbounded on
purpose: classic and SillyTavern books have no content cap (the request/import
size limits bound them), as in the tools they come from. They do have an entry
cap of 20,000 (issue 29): a turn's cost follows the entries it activates, and
one turn can activate every entry of a book (a key they share, recursion), so
the cap bounds the worst turn and the work after each edit (measured by
``bench/book_size_bench.py`` on two cores: ~15 µs of turn per activated entry,
~0.03 ms of compile and ~0.05 ms of loading from the database per entry).
Entry titles: 2–100 characters in world books (W-12). In the other profiles
the title is the optional display name/comment, which must survive import and
export untouched (C-9), so only the 200-character column bounds it.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from lore_platform.errors import LimitExceeded, Term, ValidationFailed
from retrieval.engine.rules import SERVER, SMART

if TYPE_CHECKING:
    from books.models import Book


# Units a refusal names ("… is 2,100 characters"): product words, said in the reader's language on pages.
CHARACTERS = Term("characters")
ITEMS = Term("items")
ENTRIES = Term("entries")


@dataclass(frozen=True, kw_only=True)
class Limit:
    """A maximum (or a minimum) with the rule that sets it."""

    value: int
    rule: str
    unit: str = CHARACTERS


@dataclass(frozen=True, kw_only=True)
class TextLimit:
    rule: str
    max: int | None
    min: int = 0


@dataclass(frozen=True, kw_only=True)
class ListLimit:
    rule: str
    max_items: int | None
    max_item_length: int | None


@dataclass(frozen=True, kw_only=True)
class RangeLimit:
    rule: str
    low: int
    high: int


# --- numbers from the seeds ---------------------------------------------------

# Book-level limits hold for every profile (SPEC §1); W-12 is where they are numbered.
BOOK_TITLE = TextLimit(rule="W-12", min=1, max=120)
BOOK_DESCRIPTION = TextLimit(rule="W-12", max=2_000)
BOOK_TAGS = ListLimit(rule="W-12", max_items=20, max_item_length=50)
BOOK_SCAN_DEPTH = RangeLimit(rule="C-2", low=0, high=100)
BOOK_TOKEN_BUDGET = RangeLimit(rule="C-3", low=100, high=32_000)
BOOK_LANGUAGE = TextLimit(rule="W-12", max=16)

# World books (W-12).
SMART_ENTRIES_PER_BOOK = Limit(value=2_000, rule="W-12", unit=ENTRIES)
SMART_ENTRY_TITLE = TextLimit(rule="W-12", min=2, max=100)
SMART_ENTRY_CONTENT = TextLimit(rule="W-12", min=20, max=20_000)
SMART_ALIASES = ListLimit(rule="W-12", max_items=50, max_item_length=120)

# Server lorebooks (S-3, S-5, S-14); the engine's rule table holds the numbers it also applies.
SERVER_ENTRY_TITLE = TextLimit(rule="S-3", max=200)
SERVER_ENTRY_CONTENT = TextLimit(rule="S-3", max=SERVER.entry_content_chars)
SERVER_ENTRIES_PER_LINEAGE = Limit(value=SERVER.entries_per_lineage, rule="S-14", unit=ENTRIES)
SERVER_ENTRIES_SERVER_WIDE = Limit(value=SERVER.entries_server_wide, rule="S-14", unit=ENTRIES)
SERVER_SCAN_DEPTH = RangeLimit(rule="S-5", low=1, high=100)

# Classic / SillyTavern: the display name (comment) is optional (C-9).
CLASSIC_ENTRY_TITLE = TextLimit(rule="C-9", max=200)
CLASSIC_SCAN_DEPTH = RangeLimit(rule="C-2", low=0, high=100)
# Entries per classic or SillyTavern book (issue 29; C-5: what one turn matches, as the key limits below).
# At 20,000 entries a turn whose recursion activates 17,500 of them costs ~0.27 s of CPU (0.4 s before
# issue 29's fix), and loading plus compiling the book after an edit ~1.5 s, per process; all grow
# linearly with entries, so the cap is where one book's worst turn stays a fraction of a second.
CLASSIC_ENTRIES_PER_BOOK = Limit(value=20_000, rule="C-5", unit=ENTRIES)

PROBABILITY = RangeLimit(rule="S-6", low=0, high=100)
UNBOUNDED_TEXT = TextLimit(rule="", max=None)
# Keys per entry and characters per key (issue 13): the largest real entry in the shared corpus has
# 228 keys (NovelAI, "A Study in Scarlet") and its longest key 100 characters (a KoboldAI/AID
# alternation); the limits leave about twice and five times that room. Unbounded lists held a worker.
CLASSIC_KEYS = ListLimit(rule="C-5", max_items=500, max_item_length=500)
SERVER_KEYS = ListLimit(rule="S-3", max_items=500, max_item_length=500)

# Operations.
BULK_ACTION = Limit(value=500, rule="W-12", unit=ENTRIES)
IMPORT_BATCH = Limit(value=500, rule="I-3", unit=ENTRIES)
CHANNEL_ID_LENGTH = Limit(value=64, rule="S-11")
# One reorder call names at most this many entries (no rule: it keeps the id list a bounded query).
REORDER_IDS = Limit(value=10_000, rule="", unit=ENTRIES)

# Limits other features enforce; kept here so there is one place to read them.
PUBLISH_MIN_ENTRIES = Limit(value=10, rule="P-1", unit=ENTRIES)
SPLIT_TEXT_INPUT = Limit(value=40_000, rule="W-12")
GENERATE_PROMPT = Limit(value=4_000, rule="W-12")
GENERATE_ENTRIES_MIN = Limit(value=4, rule="W-12", unit=ENTRIES)
GENERATE_ENTRIES_MAX = Limit(value=16, rule="W-12", unit=ENTRIES)
PREVIEW_MESSAGE = Limit(value=2_000, rule="W-12")
IMPORT_JSON_BYTES = Limit(value=2 * 1024 * 1024, rule="I-3", unit=Term("bytes"))
LIVING_WORLD_WRITES_PER_DAY = Limit(value=30, rule="L-3", unit=Term("writes"))
LIVING_WORLD_NEW_ENTRY = Limit(value=4_000, rule="L-3")
LIVING_WORLD_APPEND = Limit(value=2_000, rule="L-3")
LIVING_WORLD_GROWN_ENTRY = Limit(value=20_000, rule="L-3")
# The write budget's window rolls: any 24 hours, not a calendar day.
LIVING_WORLD_WINDOW = timedelta(hours=24)

# W-1: the canon budget, a share of the model's input window with a cap (the engine's rule table;
# ``retrieval.engine.smart.canon_budget`` computes it).
CANON_BUDGET_CAP = Limit(value=SMART.canon_cap_tokens, rule="W-1", unit=Term("tokens"))


@dataclass(frozen=True, kw_only=True)
class ProfileLimits:
    """What one context profile allows on an entry."""

    profile: str
    entry_title: TextLimit
    entry_content: TextLimit
    entry_keys: ListLimit
    entry_scan_depth: RangeLimit


_PROFILE_LIMITS: dict[str, ProfileLimits] = {
    "smart": ProfileLimits(
        profile="smart",
        entry_title=SMART_ENTRY_TITLE,
        entry_content=SMART_ENTRY_CONTENT,
        entry_keys=SMART_ALIASES,
        entry_scan_depth=CLASSIC_SCAN_DEPTH,
    ),
    "server": ProfileLimits(
        profile="server",
        entry_title=SERVER_ENTRY_TITLE,
        entry_content=SERVER_ENTRY_CONTENT,
        entry_keys=SERVER_KEYS,
        entry_scan_depth=SERVER_SCAN_DEPTH,
    ),
    "classic": ProfileLimits(
        profile="classic",
        entry_title=CLASSIC_ENTRY_TITLE,
        entry_content=UNBOUNDED_TEXT,
        entry_keys=CLASSIC_KEYS,
        entry_scan_depth=CLASSIC_SCAN_DEPTH,
    ),
    "sillytavern": ProfileLimits(
        profile="sillytavern",
        entry_title=CLASSIC_ENTRY_TITLE,
        entry_content=UNBOUNDED_TEXT,
        entry_keys=CLASSIC_KEYS,
        entry_scan_depth=CLASSIC_SCAN_DEPTH,
    ),
}


def limits_for(profile: str) -> ProfileLimits:
    try:
        return _PROFILE_LIMITS[profile]
    except KeyError:
        raise ValidationFailed(
            "Unknown profile {profile}.", values={"profile": repr(profile)}, field="profile"
        ) from None


# --- primitive checks -----------------------------------------------------------


def _too_long(field: str, what: str, actual: int, limit: int, rule: str, unit: str) -> LimitExceeded:
    values = {"what": what, "actual": actual, "unit": unit, "limit": limit}
    details = {"limit": limit, "actual": actual, "unit": unit}
    if rule:
        return LimitExceeded(
            "{what} is {actual:,} {unit}; the limit is {limit:,} ({rule}).",
            values={**values, "rule": rule}, field=field, rule=rule, details=details,
        )
    return LimitExceeded("{what} is {actual:,} {unit}; the limit is {limit:,}.", values=values, field=field,
                         details=details)


def _item_too_long(field: str, what: str, index: int, actual: int, limit: int, rule: str) -> LimitExceeded:
    """One item of a list (a tag, a key) is longer than its limit: ``what`` names the list."""
    values = {"what": what, "index": index, "actual": actual, "limit": limit}
    details = {"limit": limit, "actual": actual, "unit": "characters"}
    if rule:
        return LimitExceeded(
            "{what} item {index} is {actual:,} characters; the limit is {limit:,} ({rule}).",
            values={**values, "rule": rule}, field=field, rule=rule, details=details,
        )
    return LimitExceeded("{what} item {index} is {actual:,} characters; the limit is {limit:,}.", values=values,
                         field=field, details=details)


def text_check(value: str, limit: TextLimit, *, field: str, what: str) -> None:
    length = len(value)
    if limit.min and len(value.strip()) < limit.min:
        raise ValidationFailed(
            "{what} is {length:,} characters; it needs at least {minimum:,} ({rule}).",
            values={"what": what, "length": len(value.strip()), "minimum": limit.min, "rule": limit.rule},
            field=field,
            rule=limit.rule,
            code="too_short",
            details={"min": limit.min, "max": limit.max, "actual": len(value.strip()), "unit": "characters"},
        )
    if limit.max is not None and length > limit.max:
        raise _too_long(field, what, length, limit.max, limit.rule, CHARACTERS)


def list_check(values: list[str], limit: ListLimit, *, field: str, what: str) -> None:
    if limit.max_items is not None and len(values) > limit.max_items:
        raise _too_long(field, what, len(values), limit.max_items, limit.rule, ITEMS)
    if limit.max_item_length is not None:
        for index, item in enumerate(values):
            if len(item) > limit.max_item_length:
                raise _item_too_long(f"{field}[{index}]", what, index, len(item), limit.max_item_length, limit.rule)


def range_check(value: int | None, limit: RangeLimit, *, field: str, what: str) -> None:
    if value is None:
        return
    if not limit.low <= value <= limit.high:
        raise ValidationFailed(
            "{what} must be between {low:,} and {high:,}, not {value:,} ({rule}).",
            values={"what": what, "low": limit.low, "high": limit.high, "value": value, "rule": limit.rule},
            field=field,
            rule=limit.rule,
            code="out_of_range",
            details={"min": limit.low, "max": limit.high, "actual": value},
        )


def count_check(count: int, limit: Limit, *, field: str, what: str) -> None:
    if count > limit.value:
        raise _too_long(field, what, count, limit.value, limit.rule, limit.unit)


# --- book and entry fields ------------------------------------------------------


def book_fields_check(fields: Mapping[str, Any], *, field_prefix: str = "") -> None:
    """Check the book fields present in ``fields`` (a create or a partial update)."""
    p = field_prefix
    if "title" in fields:
        text_check(fields["title"], BOOK_TITLE, field=f"{p}title", what=Term("The book title"))
    if "description" in fields:
        text_check(fields["description"], BOOK_DESCRIPTION, field=f"{p}description", what=Term("The description"))
    if "tags" in fields:
        list_check(fields["tags"], BOOK_TAGS, field=f"{p}tags", what=Term("Tags"))
    if "language" in fields:
        text_check(fields["language"], BOOK_LANGUAGE, field=f"{p}language", what=Term("The language code"))
    if "scan_depth" in fields:
        range_check(fields["scan_depth"], BOOK_SCAN_DEPTH, field=f"{p}scan_depth", what=Term("Scan depth"))
    if "token_budget" in fields:
        range_check(fields["token_budget"], BOOK_TOKEN_BUDGET, field=f"{p}token_budget", what=Term("Token budget"))


def entry_fields_check(profile: str, fields: Mapping[str, Any], *, field_prefix: str = "") -> None:
    """Check the entry fields present in ``fields`` against the book's profile."""
    limits = limits_for(profile)
    p = field_prefix
    if "title" in fields:
        text_check(fields["title"], limits.entry_title, field=f"{p}title", what=Term("The entry title"))
    if "content" in fields:
        text_check(fields["content"], limits.entry_content, field=f"{p}content", what=Term("The entry content"))
    if "keys" in fields:
        what = Term("Aliases") if profile == "smart" else Term("Keys")
        list_check(fields["keys"], limits.entry_keys, field=f"{p}keys", what=what)
    if "secondary_keys" in fields and fields["secondary_keys"] is not None:
        list_check(
            fields["secondary_keys"], limits.entry_keys, field=f"{p}secondary_keys", what=Term("Secondary keys")
        )
    if "probability" in fields:
        range_check(fields["probability"], PROBABILITY, field=f"{p}probability", what=Term("Probability"))
    if "scan_depth" in fields:
        range_check(fields["scan_depth"], limits.entry_scan_depth, field=f"{p}scan_depth", what=Term("Scan depth"))
    for name in ("channels", "unresolved_channels"):
        for index, channel in enumerate(fields.get(name) or []):
            if len(channel) > CHANNEL_ID_LENGTH.value:
                raise _too_long(
                    f"{p}{name}[{index}]", Term("A channel"), len(channel), CHANNEL_ID_LENGTH.value, "S-11",
                    CHARACTERS,
                )


# --- batches and capacity ---------------------------------------------------------


def public_floor_check(book: Book, *, remaining: int, field: str = "entries") -> None:
    """P-1 (our reading): a public book cannot drop below the publishing minimum by deletion.

    Refused, not unpublished behind the owner's back: readers and attachments keep the
    book they found; the owner makes it unlisted or private first, then deletes.
    """
    minimum = PUBLISH_MIN_ENTRIES
    if book.visibility != "public" or remaining >= minimum.value:
        return
    raise LimitExceeded(
        "A public book keeps at least {minimum} entries; this would leave {remaining}. "
        "Make the book unlisted or private first, or add entries ({rule}).",
        values={"minimum": minimum.value, "remaining": remaining, "rule": minimum.rule},
        field=field,
        rule=minimum.rule,
        code="too_few_entries",
        details={"min": minimum.value, "actual": remaining, "unit": "entries"},
    )


def bulk_action_check(count: int, *, field: str = "entry_ids") -> None:
    """W-12: a bulk enable/disable/delete touches at most 500 entries."""
    count_check(count, BULK_ACTION, field=field, what=Term("A bulk action"))


def import_batch_check(count: int, *, field: str = "entries") -> None:
    """W-12 / I-3: one batch (import, paste) creates at most 500 entries."""
    count_check(count, IMPORT_BATCH, field=field, what=Term("One batch"))


@dataclass(frozen=True, kw_only=True)
class Capacity:
    """How many entries a book may still take, and which limit says so."""

    limit: Limit
    used: int
    scope: str  # "book" | "lineage" | "server_wide"

    @property
    def remaining(self) -> int:
        return max(0, self.limit.value - self.used)


def entry_capacity(book: Book) -> Capacity | None:
    """The entry-count limit that applies to ``book``, with its current use; None = unlimited.

    World books: a cap per book (W-12). Server books: a cap per persona lineage,
    and a separate one shared by all of the tenant's server-wide books (S-14).
    Classic and SillyTavern books: a cap per book (C-5, issue 29).
    """
    from books.models import Entry, Profile, Scope

    if book.profile == Profile.SMART:
        used = Entry.objects.for_tenant(book.tenant).filter(book=book).count()
        return Capacity(limit=SMART_ENTRIES_PER_BOOK, used=used, scope="book")
    if book.profile in (Profile.CLASSIC, Profile.SILLYTAVERN):
        used = Entry.objects.for_tenant(book.tenant).filter(book=book).count()
        return Capacity(limit=CLASSIC_ENTRIES_PER_BOOK, used=used, scope="book")
    if book.profile == Profile.SERVER:
        if book.scope == Scope.PERSONA:
            # A persona book always has its lineage (books.services gives it one).
            used = Entry.objects.for_tenant(book.tenant).filter(book__lineage_id=book.lineage_id).count()  # type: ignore[misc]
            return Capacity(limit=SERVER_ENTRIES_PER_LINEAGE, used=used, scope="lineage")
        used = (
            Entry.objects.for_tenant(book.tenant)
            .filter(book__profile=Profile.SERVER, book__scope=Scope.SERVER)
            .count()
        )
        return Capacity(limit=SERVER_ENTRIES_SERVER_WIDE, used=used, scope="server_wide")
    return None


def entry_capacity_check(book: Book, *, adding: int, field: str = "entries") -> None:
    """Refuse adding ``adding`` entries to ``book`` if that breaks its entry cap."""
    from books.models import Profile

    capacity = entry_capacity(book)
    if capacity is None or adding <= 0:
        return
    total = capacity.used + adding
    if total <= capacity.limit.value:
        return
    rule = capacity.limit.rule
    values = {"total": total, "limit": capacity.limit.value, "rule": rule}
    details = {
        "limit": capacity.limit.value,
        "actual": total,
        "existing": capacity.used,
        "adding": adding,
        "scope": capacity.scope,
        "unit": "entries",
    }
    if capacity.scope == "lineage":
        raise LimitExceeded(
            "This persona would hold {total:,} entries; a persona holds at most {limit:,} ({rule}).",
            values=values, field=field, rule=rule, details=details,
        )
    if capacity.scope == "server_wide":
        raise LimitExceeded(
            "The server-wide books would hold {total:,} entries together; they share a limit of {limit:,} ({rule}).",
            values=values, field=field, rule=rule, details=details,
        )
    if book.profile != Profile.SMART:
        raise LimitExceeded(
            "This book would hold {total:,} entries; a classic or SillyTavern book holds at most {limit:,} "
            "({rule}).",
            values=values, field=field, rule=rule, details=details,
        )
    raise LimitExceeded(
        "This world book would hold {total:,} entries; a book holds at most {limit:,} ({rule}).",
        values=values, field=field, rule=rule, details=details,
    )

# The trash: a deleted book is kept this long, restorable, then purged (issue 28).
TRASH_KEEP_DAYS = 30
