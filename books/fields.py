"""The one definition of an entry's fields and their defaults (SPEC.md §1).

Everything that spells an entry reads this tuple or is checked against it:

- ``books.models.Entry``: column defaults (``entry_model_default``) and
  ``ENTRY_LORE_FIELDS``;
- ``books.api.serializers.EntryIn``: help texts (``entry_field_help``);
- ``books.formats.model.ImportedEntry``: dataclass defaults, hence every
  reader's "absent" value and every writer's "leave out when default";
- ``books.exports``: rows → ``ImportedEntry`` field by field;
- ``retrieval.adapter.loading.engine_entry`` and ``retrieval.engine.values.Entry``
  (which may import neither Django nor ``books``) are checked against it by
  ``tests/books/test_fields.py``, as is every column of ``Entry``.

No Django here: the format layer and the tests read it without a database.

Default priority: 10. SillyTavern has no priority (its budget priority is
``order``, default 100, which we keep in ``order``), so an imported
SillyTavern entry takes ours; Chub's hybrid world-info exports write 10 on
nearly every entry, and the classic seed's conformance cases use 10 as the
plain value; the engine's own default is 10. With 10 a book can mark lore as
"drop me first" (1–9) without negative numbers, and a file that says 10 and
one that says nothing import alike and export alike (the writers leave the
default out).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["lore", "tenant", "list", "extra", "state"]

SECONDARY_LOGICS = ("and_any", "and_all", "not_any", "not_all")
ROLES = ("system", "user", "assistant")
PLACEMENTS = ("before_persona", "after_persona")
INDEXING_STATES = ("pending", "indexed", "failed", "disabled")


@dataclass(frozen=True, kw_only=True)
class EntryField:
    """One field of an entry.

    ``type`` is the Python type of a value (``list`` for JSON lists of
    strings, held as tuples in frozen values); ``nullable`` says ``None`` is a
    value (it means "not set: the book or profile default applies").
    ``default`` is immutable (``()`` for lists, ``None`` for "set by the
    platform when written"). ``kind``: ``lore`` = what imports write, copies
    take and every export carries; ``tenant`` = tenant-only settings only the
    native format carries (I-6); ``list`` = the editor list position;
    ``extra`` = imported fields we do not model; ``state`` = written by the
    platform, never by an import. ``rule`` names the SPEC rule(s).
    """

    name: str
    type: type
    default: Any
    kind: Kind
    nullable: bool = False
    choices: tuple[str, ...] = ()
    rule: str = ""
    doc: str = ""


DEFAULT_ORDER = 100
# Why 10: see the module docstring (SillyTavern has none; Chub writes 10; the engine and the conformance cases use 10).
DEFAULT_PRIORITY = 10

ENTRY_FIELDS: tuple[EntryField, ...] = (
    EntryField(name="title", type=str, default="", kind="lore", rule="C-9, W-12",
               doc="Display name (`comment` in SillyTavern): sorts the editor, never sent to the model (C-9); "
                   "world books 2–100 characters (W-12), others ≤200."),
    EntryField(name="content", type=str, default="", kind="lore", rule="W-12, S-3",
               doc="The lore injected; world books 20–20,000 characters (W-12), server books ≤4,000 (S-3)."),
    EntryField(name="keys", type=list, default=(), kind="lore", rule="C-5, W-3",
               doc="Trigger keys; aliases in world books (≤50 of ≤120 characters)."),
    EntryField(name="secondary_keys", type=list, default=(), kind="lore", rule="C-6",
               doc="Optional filter keys, read as `secondary_logic` says when `selective`."),
    EntryField(name="secondary_logic", type=str, default="and_any", kind="lore", choices=SECONDARY_LOGICS, rule="C-6, S-5",
               doc="How secondary keys combine: and_any (OR), and_all (AND), not_any (NOR), not_all (NAND)."),
    EntryField(name="selective", type=bool, default=True, kind="lore", rule="C-6",
               doc="Secondary keys apply only when true (SillyTavern's default)."),
    EntryField(name="key_expression", type=str, default="", kind="lore", rule="K-1",
               doc="Boolean key logic (classic, server): `(dragon AND egg) OR hatchling, NOT statue`. NOT > AND > "
                   "OR > comma; quoted phrases; `/regex/flags` atoms. When set it decides activation instead of "
                   "`keys` + secondary logic; empty = not used."),
    EntryField(name="constant", type=bool, default=False, kind="lore", rule="C-7, W-1",
               doc="Constant (classic/server): skips key matching; canon in world books."),
    EntryField(name="enabled", type=bool, default=True, kind="lore", rule="C-7, W-6",
               doc="Disabled entries stay in the book and never fire."),
    EntryField(name="order", type=int, default=DEFAULT_ORDER, kind="lore", rule="C-11",
               doc=f"Insertion order: placement among the survivors (higher first in classic). Default "
                   f"{DEFAULT_ORDER}, as in SillyTavern."),
    EntryField(name="priority", type=int, default=DEFAULT_PRIORITY, kind="lore", rule="C-10",
               doc=f"Budget priority: higher is kept first, lowest dropped first. Default {DEFAULT_PRIORITY}."),
    EntryField(name="probability", type=int, default=None, kind="lore", nullable=True, rule="S-6",
               doc="0–100 per cent; null = 100 (S-6)."),
    EntryField(name="scan_depth", type=int, default=None, kind="lore", nullable=True, rule="C-2",
               doc="Messages scanned for this entry; null = the book's scan depth."),
    EntryField(name="case_sensitive", type=bool, default=None, kind="lore", nullable=True, rule="C-5",
               doc="null = the book's setting."),
    EntryField(name="whole_words", type=bool, default=None, kind="lore", nullable=True, rule="C-8",
               doc="null = the book's setting."),
    EntryField(name="role", type=str, default="system", kind="lore", choices=ROLES, rule="C-12, C-13",
               doc="Role of the message the entry is injected as."),
    EntryField(name="placement", type=str, default="after_persona", kind="lore", choices=PLACEMENTS, rule="I-5",
               doc="Server profile: before or after the persona."),
    EntryField(name="channels", type=list, default=(), kind="tenant", rule="S-11, S-13",
               doc="Persona books: channel ids; empty = all. Saving resolves a legacy #channel (S-11, S-13)."),
    EntryField(name="unresolved_channels", type=list, default=(), kind="tenant", rule="S-13",
               doc="Legacy `#channel` names no admin has resolved yet (count as all channels)."),
    EntryField(name="position", type=int, default=0, kind="list", rule="W-1",
               doc="Place in the editor's list (0 = top); list order in world books."),
    EntryField(name="extra", type=dict, default=None, kind="extra", rule="I-6",
               doc="Imported fields we do not model, kept for lossless export."),
    EntryField(name="usage_count", type=int, default=0, kind="state", rule="W-11", doc="Uses in chats."),
    EntryField(name="last_used_at", type=object, default=None, kind="state", nullable=True, rule="W-11",
               doc="When a chat last used it."),
    EntryField(name="indexing_state", type=str, default="pending", kind="state", choices=INDEXING_STATES,
               rule="W-7", doc="Smart retrieval indexing state."),
    EntryField(name="content_hash", type=str, default="", kind="state", rule="W-7",
               doc="Hash of the indexed text (title, content, keys)."),
    EntryField(name="regex_overruns", type=dict, default=None, kind="state", rule="C-5",
               doc="Regex keys that overran a turn's time budget: {key: reason} (editor warning)."),
    EntryField(name="created_at", type=object, default=None, kind="state", doc="Set when written."),
    EntryField(name="updated_at", type=object, default=None, kind="state", doc="Set when written."),
)

ENTRY_FIELD: dict[str, EntryField] = {f.name: f for f in ENTRY_FIELDS}
ENTRY_DEFAULTS: dict[str, Any] = {f.name: f.default for f in ENTRY_FIELDS if f.kind != "state"}
# An entry's lore and activation settings: what imports write, copies take and exports read.
ENTRY_LORE_FIELDS: tuple[str, ...] = tuple(f.name for f in ENTRY_FIELDS if f.kind == "lore")
# What a file can carry for an entry (the import model's fields, in this order).
ENTRY_FILE_FIELDS: tuple[str, ...] = tuple(f.name for f in ENTRY_FIELDS if f.kind != "state")


def entry_model_default(name: str) -> Any:
    """The column default of ``name``: a fresh list/dict factory for JSON columns, else the value."""
    item = ENTRY_FIELD[name]
    if item.type is list:
        return list
    if item.type is dict:
        return dict
    return item.default


def entry_field_help(name: str) -> str:
    """The API help text of ``name``: its doc, and its default when one applies."""
    item = ENTRY_FIELD[name]
    if item.default is None or item.type in (list, dict) or f"Default {item.default}" in item.doc:
        return item.doc
    shown = str(item.default).lower() if isinstance(item.default, bool) else repr(item.default)
    return f"{item.doc} Default {shown}." if item.default != "" else item.doc

