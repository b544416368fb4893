"""Format-neutral values every reader produces and every writer consumes.

Readers turn bytes into an :class:`ImportedBook`; writers turn an
``ImportedBook`` back into bytes. Nothing here touches the database: the
import service maps these values onto ``books.models.Book``/``Entry`` rows
(field names are the same), and the export service builds them from rows.

``extra`` — the lossless part
-----------------------------
Every source field we do not model survives in ``extra``, grouped by the
namespace it came from so a writer knows what it may restore:

``st``
    SillyTavern World Info settings without a column of their own, under
    SillyTavern's camelCase names (``group``, ``sticky``, ``depth``,
    ``position`` for 2–7, ``uid`` …). Only values that differ from
    SillyTavern's defaults are kept, which makes read → write → read a fixed
    point. Both the world-info reader and the card reader (from the entry's
    ``extensions`` mirror) fill it, so the same book read from either file
    compares equal.
``wi``
    Unknown fields of a world-info entry (or top level), verbatim.
``card`` / ``card_ext``
    Unknown fields of a card book entry / of its ``extensions`` object.
``novelai``, ``agnai``, ``risu``, ``kobold``, ``generic``
    Fields of those formats that have no equivalent, verbatim.

Writers put ``st`` into the target format's own fields, restore their own
namespace verbatim, and carry every other namespace in a ``loreweave`` key
(inside ``extensions`` for cards, which the card specs require apps to keep),
so a book survives any chain of conversions.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

from books.fields import ENTRY_DEFAULTS as D, PLACEMENTS, ROLES, SECONDARY_LOGICS  # noqa: F401 - re-exported for the formats
from lore_platform.errors import Term, ValidationFailed
from lore_platform.text import text_problem, text_repair

PROFILES = ("classic", "server", "smart", "sillytavern")
SCOPES = ("personal", "server", "persona")
VISIBILITIES = ("private", "unlisted", "public")

# Namespaces of ``extra`` that writers map onto their own fields.
EXTRA_ST = "st"
EXTRA_WI = "wi"
EXTRA_CARD = "card"
EXTRA_CARD_EXT = "card_ext"
# Key under which writers carry namespaces their format has no place for.
CARRIER_KEY = "loreweave"


@dataclass(frozen=True, kw_only=True)
class ImportedEntry:
    """One entry, with the field names and defaults of ``books.fields.ENTRY_FIELDS``.

    ``position`` is the entry's place in the book's list (0-based, file
    order). ``probability`` ``None`` means 100 % (S-6). ``extra`` holds the
    source fields we do not model (see the module docstring); treat it as
    read-only.
    """

    title: str = D["title"]
    content: str = D["content"]
    keys: tuple[str, ...] = D["keys"]
    secondary_keys: tuple[str, ...] = D["secondary_keys"]
    secondary_logic: str = D["secondary_logic"]
    selective: bool = D["selective"]
    key_expression: str = D["key_expression"]
    constant: bool = D["constant"]
    enabled: bool = D["enabled"]
    order: int = D["order"]
    priority: int = D["priority"]
    probability: int | None = D["probability"]
    scan_depth: int | None = D["scan_depth"]
    case_sensitive: bool | None = D["case_sensitive"]
    whole_words: bool | None = D["whole_words"]
    role: str = D["role"]
    placement: str = D["placement"]
    channels: tuple[str, ...] = D["channels"]
    unresolved_channels: tuple[str, ...] = D["unresolved_channels"]
    position: int = D["position"]
    extra: Mapping[str, Any] = field(default_factory=dict)

    def extra_ns(self, namespace: str) -> Mapping[str, Any]:
        value = self.extra.get(namespace)
        return value if isinstance(value, Mapping) else {}

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (tuples become lists)."""
        return entry_as_dict(self)


@dataclass(frozen=True, kw_only=True)
class BookSettings:
    """Book scan settings; ``None`` = the file does not say (target default)."""

    scan_depth: int | None = None
    token_budget: int | None = None
    recursive: bool | None = None
    case_sensitive: bool | None = None
    whole_words: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, kw_only=True)
class CollectionState:
    """Tenant-only state of a book; only the native format carries it (I-6)."""

    profile: str = "classic"
    scope: str = "personal"
    lineage_key: str | None = None
    owner: str | None = None
    visibility: str = "private"
    active: bool = True
    channels: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    language: str = "en"
    living_world: bool = False
    living_world_review: bool = False

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True, kw_only=True)
class CardShell:
    """The character card a book was embedded in.

    Not imported (a card imports only its book, I-1); kept so ``convert`` can
    rebuild the same card around the book. ``data`` is the card's ``data``
    object without ``character_book``; ``png`` the original image file.
    """

    spec: str
    data: Mapping[str, Any]
    png: bytes | None = None


@dataclass(frozen=True, kw_only=True)
class ImportedBook:
    """A book read from a file, before any profile mapping.

    ``source_format`` names the detected format (see ``books.formats.FORMATS``).
    ``card`` is set when the book came out of a character card, and
    ``card_without_book`` when that card had no (or an empty) book: such an
    import changes nothing (I-1). ``notes`` are reader remarks for the receipt.
    """

    name: str
    description: str = ""
    settings: BookSettings = field(default_factory=BookSettings)
    entries: tuple[ImportedEntry, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    source_format: str = "unknown"
    collection: CollectionState | None = None
    card: CardShell | None = None
    card_without_book: bool = False
    notes: tuple[str, ...] = ()

    def with_entries(self, entries: tuple[ImportedEntry, ...]) -> ImportedBook:
        return replace(self, entries=entries)


ENTRY_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ImportedEntry))
# Everything a profile engine may read; ``extra`` aside.
MODELLED_ENTRY_FIELDS: tuple[str, ...] = tuple(name for name in ENTRY_FIELDS if name != "extra")


def entry_as_dict(entry: ImportedEntry) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ENTRY_FIELDS:
        value = getattr(entry, name)
        if isinstance(value, tuple):
            value = list(value)
        elif name == "extra":
            value = plain_json(value)
        out[name] = value
    return out


def plain_json(value: Any) -> Any:
    """Deep copy of a JSON-like value as plain dicts/lists (for json.dumps)."""
    if isinstance(value, Mapping):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_json(v) for v in value]
    return value


def text_check(value: Any, path: str) -> None:
    """Refuse text no database column can hold, naming where it sits in the file (the API's check, I-1)."""
    bad = text_problem(value, path, dotted_indexes=True)
    if bad is not None:
        what = Term("a NUL character") if bad.nul else Term("an unpaired UTF-16 surrogate")
        raise ValidationFailed("{where} contains {what}, which is not text (I-1)",
                               values={"where": bad.path, "what": what}, field=bad.path, rule="I-1",
                               details={"character": bad.character, "position": bad.position,
                                        **({"key": bad.key} if bad.key is not None else {})})


def book_text_check(book: ImportedBook) -> None:
    """Every string of ``book`` is text that can be stored and written (no NUL, no lone surrogate)."""
    text_check(book.name, "name")
    text_check(book.description, "description")
    text_check(book.extra, "extra")
    if book.collection is not None:
        text_check(book.collection.as_dict(), "collection")
    for index, entry in enumerate(book.entries):
        for item in fields(entry):
            text_check(getattr(entry, item.name), f"entries.{index}.{item.name}")


def book_text_repaired(book: ImportedBook) -> tuple[ImportedBook, int]:
    """``book`` with every string cleaned (U+FFFD for a lone surrogate, NUL dropped) and how many fields changed.

    For rows stored before the text check (issue 26): a file written from them
    is then valid UTF-8 that re-imports, instead of failing the whole export.
    """
    changed = 0

    def repaired(value: Any) -> Any:
        nonlocal changed
        if is_dataclass(value) and not isinstance(value, type):
            changes = {}
            for item in fields(value):
                old = getattr(value, item.name)
                new = repaired(old)
                if new is not old:
                    changes[item.name] = new
            return replace(value, **changes) if changes else value
        if isinstance(value, tuple) and any(is_dataclass(inner) for inner in value):
            items = tuple(repaired(inner) for inner in value)
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        new = text_repair(value)
        if new is not value:
            changed += 1
        return new

    return repaired(book), changed
