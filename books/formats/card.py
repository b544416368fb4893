"""Character cards (V1, V2, V3) and Character Book JSON: reader and writer.

A card imports only its embedded book (I-1): ``data.character_book`` of a V2
(``chara_card_v2``) or V3 (``chara_card_v3``) card, ``data`` of a standalone
V3 lorebook (``lorebook_v3``), or a bare Character Book ``{"entries": [...]}``.
A V1 card (TavernAI: ``name``/``description``/``first_mes`` at the root, no
``spec``) has no book; neither has a V2/V3 card without ``character_book``:
reading one yields an empty book flagged ``card_without_book`` — importing it
changes nothing.

Book entries are read the way SillyTavern converts an embedded book into
world info, so the same book read from a world file and from a card compares
equal: ``keys``, ``secondary_keys``, ``comment`` (``name`` when the comment is
empty) → title, ``insertion_order`` → order, ``enabled``, ``constant``,
``selective`` (absent = false, as in the spec), ``priority``, ``id`` → uid,
``position`` (``before_char``/``after_char``, or the numbers some tools
write; absent = after) overridden by ``extensions.position``, and the
SillyTavern settings in the ``extensions`` mirror (snake_case, or the
camelCase some exports mix in; snake_case wins). Non-spec top-level
``probability``/``selectiveLogic``/``case_sensitive`` are read when the
mirror lacks them. Unknown entry fields go to ``extra["card"]``, unknown
``extensions`` keys to ``extra["card_ext"]`` (the spec requires keeping them).

The writer produces a ``chara_card_v2`` card whose ``character_book`` entries
carry the spec fields plus SillyTavern's ``extensions`` mirror.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from books.fields import DEFAULT_PRIORITY
from books.formats.jsonio import (
    as_bool,
    as_object,
    as_opt_bool,
    as_opt_int,
    as_text,
    first_present,
    refuse,
    type_name,
)
from books.formats.model import (
    CARRIER_KEY,
    EXTRA_CARD,
    EXTRA_CARD_EXT,
    EXTRA_ST,
    BookSettings,
    CardShell,
    ImportedBook,
    ImportedEntry,
    plain_json,
)
from books.formats.sillytavern import (
    EXTENSION_NAMES,
    KEY_EXPRESSION_CARRIER,
    MAX_SCAN_DEPTH,
    ST_TO_EXTENSION,
    assign_uids,
    carried_book,
    carrier_for,
    entry_from_st,
    key_expression_carried,
    key_expression_restored,
    resolve_uids,
    st_fields,
)
from lore_platform.errors import Phrase

FORMAT_CARD_V1 = "card-v1-json"
FORMAT_CARD_V2 = "card-v2-json"
FORMAT_CARD_V3 = "card-v3-json"
FORMAT_LOREBOOK_V3 = "lorebook-v3-json"
FORMAT_CHARACTER_BOOK = "character-book-json"

CARD_SPECS = {"chara_card_v2": FORMAT_CARD_V2, "chara_card_v3": FORMAT_CARD_V3}

# Entry fields read by the entry reader, with the aliases other tools use.
KEY_NAMES = ("keys", "key")
SECONDARY_NAMES = ("secondary_keys", "secondaryKeys", "keysecondary")
ORDER_NAMES = ("insertion_order", "insertionOrder", "order")
CONTENT_NAMES = ("content",)
TITLE_NAMES = ("comment", "name", "title")
CONSUMED_ENTRY = {
    *KEY_NAMES,
    *SECONDARY_NAMES,
    *ORDER_NAMES,
    "content",
    "comment",
    "enabled",
    "disable",
    "constant",
    "selective",
    "priority",
    "position",
    "probability",
    "selectiveLogic",
    "case_sensitive",
    "caseSensitive",
    "extensions",
    CARRIER_KEY,
}
BOOK_FIELDS = {"name", "description", "scan_depth", "token_budget", "recursive_scanning", "extensions", "entries"}
V2_DATA_FIELDS = (
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
    "alternate_greetings",
    "tags",
    "creator",
    "character_version",
    "extensions",
)


def entry_from_card(
    raw: Mapping[str, Any],
    *,
    index: int,
    path: str,
    namespace: str = EXTRA_CARD,
    content_names: tuple[str, ...] = CONTENT_NAMES,
    title_names: tuple[str, ...] = TITLE_NAMES,
    extra_consumed: frozenset[str] = frozenset(),
    uid: int | None = None,
    notes: list[str] | None = None,
) -> ImportedEntry:
    """One Character Book entry (or a look-alike dialect) as an entry.

    The entry is translated into SillyTavern's names first and read by the
    world-info reader, exactly as SillyTavern imports an embedded book.
    ``uid`` is the resolved uid (see ``item_uids``); without it the entry's
    numeric ``id`` is used.
    """
    ext_raw = raw.get("extensions")
    ext = ext_raw if isinstance(ext_raw, dict) else {}
    if ext_raw is not None and not isinstance(ext_raw, dict):
        refuse("{path} must be an object, not {type}", f"{path}.extensions",
               values={"path": f"{path}.extensions", "type": type_name(ext_raw)})

    st: dict[str, Any] = {}
    # snake_case first: SillyTavern reads the snake_case mirror.
    for name, value in sorted(ext.items(), key=lambda item: item[0] != _snake(item[0])):
        st_name = EXTENSION_NAMES.get(name)
        if st_name is not None and st_name not in st and value is not None:
            st[st_name] = value

    _, keys = first_present(raw, KEY_NAMES)
    _, secondary = first_present(raw, SECONDARY_NAMES)
    _, order = first_present(raw, ORDER_NAMES)
    content_name, content = first_present(raw, content_names)
    title = ""
    title_from = None
    for name in title_names:
        value = raw.get(name)
        if isinstance(value, str) and value.strip():
            title, title_from = value, name
            break

    st_raw: dict[str, Any] = dict(st)
    st_raw.update(
        {
            "key": keys,
            "keysecondary": secondary,
            "comment": title,
            "content": as_text(content, f"{path}.{content_name or 'content'}"),
            "constant": raw.get("constant"),
            "selective": raw.get("selective"),
            "order": order,
            "priority": raw.get("priority"),
        }
    )
    if raw.get("disable") is not None and raw.get("enabled") is None:
        st_raw["disable"] = raw.get("disable")
    else:
        st_raw["disable"] = not as_bool(raw.get("enabled"), f"{path}.enabled", True)
    position, mapped_from = card_position(st.get("position"), raw.get("position"))
    if mapped_from is not None and notes is not None:
        label = title.strip() or f"#{index}"
        notes.append(Phrase(
            "entry {label}: card position {position} read as {read_as}, as SillyTavern's card import reads it",
            values={"label": repr(label), "position": repr(mapped_from),
                    "read_as": "before_char (0)" if position == 0 else "after_char (1)"}))
    st_raw["position"] = position
    # Non-spec top-level copies (Chub) and V3's top-level ``case_sensitive``
    # count only when the extensions mirror does not name the setting at all.
    in_mirror = {EXTENSION_NAMES[name] for name in ext if name in EXTENSION_NAMES}
    for fallback in ("probability", "selectiveLogic"):
        if fallback not in in_mirror and raw.get(fallback) is not None:
            st_raw[fallback] = raw[fallback]
    if "caseSensitive" not in in_mirror:
        _, top_case = first_present(raw, ("case_sensitive", "caseSensitive"))
        if top_case is not None:
            st_raw["caseSensitive"] = top_case
    if "addMemo" not in in_mirror:
        # What SillyTavern derives when it imports an embedded book.
        st_raw["addMemo"] = bool(title.strip())
    id_field, entry_id = _id_of(raw)
    id_is_uid = entry_id is not None and _int_like(entry_id)
    st_raw["uid"] = uid if uid is not None else (entry_id if id_is_uid else None)

    entry = entry_from_st(
        st_raw, index=index, path=path, default_position=1, default_selective=False, unknown_namespace=None
    )

    consumed = CONSUMED_ENTRY | set(content_names) | set(extra_consumed)
    if id_is_uid and id_field:
        consumed.add(id_field)
    if title_from:
        consumed.add(title_from)  # the title itself; written back as ``comment``
    # Keep other title-ish fields (Chub writes a ``name`` next to the comment),
    # but not empty ones.
    unknown = {k: v for k, v in raw.items() if k not in consumed and not (k in title_names and v in ("", None))}
    unknown_ext = {k: v for k, v in ext.items() if k not in EXTENSION_NAMES and k != CARRIER_KEY}
    extra = dict(entry.extra)
    if unknown:
        extra[namespace] = unknown
    if unknown_ext:
        extra[EXTRA_CARD_EXT] = unknown_ext
    carrier = ext.get(CARRIER_KEY)
    if isinstance(carrier, dict) and isinstance(carrier.get("extra"), dict):
        for ns, value in carrier["extra"].items():
            if ns not in (EXTRA_ST, namespace, EXTRA_CARD_EXT) and isinstance(value, dict):
                extra.setdefault(ns, value)
    restored = key_expression_restored(entry, ext.get(CARRIER_KEY), path=f"{path}.extensions.{CARRIER_KEY}")
    return ImportedEntry(**{**_entry_kwargs(restored), "extra": extra})


def card_position(ext_position: Any, top_position: Any) -> tuple[Any, Any]:
    """(position, the string it was mapped from or ``None``), as SillyTavern's card import:
    ``extensions.position ?? (position === 'before_char' ? 0 : 1)``.

    A number (or a numeric string) is kept. Any other string — ``before_char_defs``
    and the like, which no spec names — becomes 0 only when it is exactly
    ``before_char`` and 1 otherwise, and is reported: SillyTavern would copy a
    string ``extensions.position`` through where it needs an integer.
    """
    for value in (ext_position, top_position):
        if value is None:
            continue
        if isinstance(value, str) and not value.strip().lstrip("-").isdigit():
            mapped = 0 if value == "before_char" else 1
            return mapped, (None if value in ("before_char", "after_char") else value)
        return value, None
    return 1, None


def _entry_kwargs(entry: ImportedEntry) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in entry.__dataclass_fields__}


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def _id_of(raw: Mapping[str, Any]) -> tuple[str | None, Any]:
    """(field, value) of an entry's id: ``id``, else a ``uid`` some tools write."""
    for name in ("id", "uid"):
        if raw.get(name) is not None:
            return name, raw[name]
    return None, None


def _int_like(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and value.strip().isdigit()


def check_unique_ids(items: list[tuple[str, Any]]) -> None:
    seen: dict[int, str] = {}
    for path, raw in items:
        if not isinstance(raw, dict):
            continue
        value = _id_of(raw)[1]
        if value is None or not _int_like(value):
            continue
        number = as_opt_int(value, f"{path}.id", lo=0)
        if number is None:
            continue
        if number in seen:
            refuse("entry id {id} appears twice ({first} and {second})", f"{path}.id",
                   values={"id": number, "first": seen[number], "second": path}, id=number)
        seen[number] = path


def item_uids(items: list[tuple[str, Any]]) -> list[int]:
    """Unique numeric ids (refused when two entries share one), resolved like the writers do."""
    check_unique_ids(items)
    explicit: list[int | None] = []
    for path, raw in items:
        value = _id_of(raw)[1] if isinstance(raw, dict) else None
        explicit.append(as_opt_int(value, f"{path}.id", lo=0) if value is not None and _int_like(value) else None)
    return resolve_uids(explicit)


def read_character_book(
    book: Mapping[str, Any],
    *,
    path: str,
    fallback_name: str,
    source_format: str,
    namespace: str = EXTRA_CARD,
) -> ImportedBook:
    """A Character Book object (``{name?, entries: [...]}``) as an ``ImportedBook``."""
    raw_entries = book.get("entries")
    if raw_entries is None:
        raw_entries = []
    if isinstance(raw_entries, dict):  # world-info style, keyed by uid
        raw_entries = list(raw_entries.values())
    if not isinstance(raw_entries, list):
        refuse("{path} must be a list, not {type}", f"{path}.entries",
               values={"path": f"{path}.entries", "type": type_name(raw_entries)})
    items = [(f"{path}.entries.{i}" if path else f"entries.{i}", raw) for i, raw in enumerate(raw_entries)]
    uids = item_uids(items)
    notes: list[str] = []
    entries = tuple(
        entry_from_card(as_object(raw, item_path), index=i, path=item_path, namespace=namespace, uid=uid, notes=notes)
        for i, ((item_path, raw), uid) in enumerate(zip(items, uids))
    )
    prefix = f"{path}." if path else ""
    ext = book.get("extensions")
    if ext is not None and not isinstance(ext, dict):
        refuse("{path} must be an object, not {type}", f"{prefix}extensions",
               values={"path": f"{prefix}extensions", "type": type_name(ext)})
    carried_extra, carried_settings = carried_book((ext or {}).get(CARRIER_KEY), exclude=("card_book",))
    extra: dict[str, Any] = dict(carried_extra)
    unknown = {k: v for k, v in book.items() if k not in BOOK_FIELDS}
    unknown_ext = {k: v for k, v in (ext or {}).items() if k != CARRIER_KEY}
    if unknown or unknown_ext:
        extra["card_book"] = {**unknown, **({"extensions": unknown_ext} if unknown_ext else {})}
    settings = BookSettings(
        scan_depth=as_opt_int(book.get("scan_depth"), f"{prefix}scan_depth", lo=0, hi=MAX_SCAN_DEPTH),
        token_budget=as_opt_int(book.get("token_budget"), f"{prefix}token_budget", lo=0),
        recursive=_opt_bool(book.get("recursive_scanning"), f"{prefix}recursive_scanning"),
        case_sensitive=_opt_bool(carried_settings.get("case_sensitive"), "case_sensitive"),
        whole_words=_opt_bool(carried_settings.get("whole_words"), "whole_words"),
    )
    name = as_text(book.get("name"), f"{prefix}name").strip()
    return ImportedBook(
        name=name or fallback_name,
        description=as_text(book.get("description"), f"{prefix}description"),
        settings=settings,
        entries=entries,
        extra=extra,
        source_format=source_format,
        notes=tuple(notes),
    )


def _opt_bool(value: Any, path: str) -> bool | None:
    return as_opt_bool(value, path)


def count_card_entries(doc: Mapping[str, Any]) -> int:
    data = doc.get("data")
    book = data.get("character_book") if isinstance(data, dict) else None
    if doc.get("spec") == "lorebook_v3":
        book = data
    entries = book.get("entries") if isinstance(book, dict) else None
    return len(entries) if isinstance(entries, (list, dict)) else 0


def is_card(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return False
    if _spec(doc) in CARD_SPECS:
        return True
    if isinstance(doc.get("data"), dict) and ("character_book" in doc["data"] or "first_mes" in doc["data"]):
        return True
    return is_v1_card(doc)


def _spec(doc: Mapping[str, Any]) -> str | None:
    spec = doc.get("spec")
    return spec if isinstance(spec, str) else None


def is_v1_card(doc: Mapping[str, Any]) -> bool:
    return "entries" not in doc and "name" in doc and ("first_mes" in doc or "personality" in doc)


def read_card(doc: Mapping[str, Any], *, fallback_name: str, png: bytes | None = None, how: str = "") -> ImportedBook:
    """A parsed card (V1/V2/V3) — only its embedded book is imported (I-1)."""
    spec = _spec(doc)
    data = doc.get("data")
    if spec in CARD_SPECS or isinstance(data, dict):
        data = as_object(data, "data")
        source_format = _container(CARD_SPECS.get(spec or "", FORMAT_CARD_V2), how)
        card_name = as_text(data.get("name"), "data.name").strip()
        shell = CardShell(
            spec=spec if isinstance(spec, str) else "chara_card_v2",
            data={k: v for k, v in data.items() if k != "character_book"},
            png=png,
        )
        book = data.get("character_book")
        if book is not None:
            book = as_object(book, "data.character_book")
            entries = book.get("entries")
            if entries is not None and not isinstance(entries, (list, dict)):
                refuse(
                    "{path} must be a list, not {type}",
                    "data.character_book.entries",
                    values={"path": "data.character_book.entries", "type": type_name(entries)},
                )
            if entries:
                imported = read_character_book(
                    book,
                    path="data.character_book",
                    fallback_name=card_name or fallback_name,
                    source_format=source_format,
                )
                return ImportedBook(**{**_book_kwargs(imported), "card": shell})
        return ImportedBook(
            name=card_name or fallback_name,
            source_format=source_format,
            card=shell,
            card_without_book=True,
            notes=(Phrase("the card has no embedded lorebook: nothing to import (I-1)"),),
        )
    if is_v1_card(doc):
        name = as_text(doc.get("name"), "name").strip()
        return ImportedBook(
            name=name or fallback_name,
            source_format=_container(FORMAT_CARD_V1, how),
            card=CardShell(spec="chara_card_v1", data=dict(doc), png=png),
            card_without_book=True,
            notes=(Phrase("a V1 card carries no lorebook: nothing to import (I-1)"),),
        )
    refuse("the card has no 'spec' and no 'data' object: not a character card", "spec")


def _container(json_format: str, how: str) -> str:
    """``card-v2-json`` → ``card-v2-png`` / ``card-v2-charx`` for embedded cards."""
    return json_format.removesuffix("-json") + f"-{how}" if how else json_format


def read_lorebook_v3(doc: Mapping[str, Any], *, fallback_name: str) -> ImportedBook:
    data = as_object(doc.get("data"), "data")
    return read_character_book(data, path="data", fallback_name=fallback_name, source_format=FORMAT_LOREBOOK_V3)


def _book_kwargs(book: ImportedBook) -> dict[str, Any]:
    return {name: getattr(book, name) for name in book.__dataclass_fields__}


# --- writer -------------------------------------------------------------------------


def card_entry(entry: ImportedEntry, *, index: int, uid: int) -> dict[str, Any]:
    st_view = st_fields(entry, index=index, uid=uid)
    extensions: dict[str, Any] = {
        ext_name: st_view[st_name] for st_name, ext_name in ST_TO_EXTENSION.items() if st_name in st_view
    }
    st = entry.extra_ns(EXTRA_ST)
    if "characterFilter" in st:
        extensions["character_filter"] = plain_json(st["characterFilter"])
    memo = st.get("addMemo", False)
    if not (isinstance(memo, bool) and memo == bool(entry.title.strip())):
        # Written only when it differs from what a reader derives (comment → memo).
        extensions["addMemo"] = plain_json(memo)
    for name, value in entry.extra_ns(EXTRA_CARD_EXT).items():
        extensions.setdefault(name, plain_json(value))
    carrier = carrier_for(entry.extra, own=(EXTRA_ST, EXTRA_CARD, EXTRA_CARD_EXT))
    expression = key_expression_carried(entry)
    if expression:
        # K-1: the card's keys are SillyTavern's nearest equivalent (st_fields); the expression rides along.
        carrier = {**(carrier or {}), KEY_EXPRESSION_CARRIER: expression}
    if carrier:
        extensions[CARRIER_KEY] = carrier
    own = entry.extra_ns(EXTRA_CARD)
    out: dict[str, Any] = {
        # A non-numeric id the source had stays (the uid then is the list's own).
        "id": plain_json(own["id"]) if "id" in own else uid,
        "keys": st_view["key"],
        "secondary_keys": st_view["keysecondary"],
        "comment": entry.title,
        "content": entry.content,
        "constant": entry.constant,
        "selective": st_view["selective"],
        "insertion_order": entry.order,
        "enabled": entry.enabled,
        "position": "after_char" if entry.placement == "after_persona" else "before_char",
    }
    if entry.priority != DEFAULT_PRIORITY:
        out["priority"] = entry.priority
    out["extensions"] = extensions
    for name, value in own.items():
        out.setdefault(name, plain_json(value))
    return out


def character_book(book: ImportedBook) -> dict[str, Any]:
    own = book.extra.get("card_book", {})
    own = own if isinstance(own, Mapping) else {}
    extensions = dict(plain_json(own.get("extensions", {}))) if isinstance(own.get("extensions", {}), Mapping) else {}
    carrier = carrier_for(book.extra, own=("card_book",)) or {}
    loose = {"case_sensitive": book.settings.case_sensitive, "whole_words": book.settings.whole_words}
    loose = {k: v for k, v in loose.items() if v is not None}
    if loose:
        carrier["settings"] = loose
    if carrier:
        extensions[CARRIER_KEY] = carrier
    out: dict[str, Any] = {"name": book.name, "description": book.description}
    if book.settings.scan_depth is not None:
        out["scan_depth"] = book.settings.scan_depth
    if book.settings.token_budget is not None:
        out["token_budget"] = book.settings.token_budget
    if book.settings.recursive is not None:
        out["recursive_scanning"] = book.settings.recursive
    out["extensions"] = extensions
    uids = assign_uids(book.entries)
    out["entries"] = [card_entry(e, index=i, uid=u) for i, (e, u) in enumerate(zip(book.entries, uids))]
    for name, value in own.items():
        if name != "extensions":
            out.setdefault(name, plain_json(value))
    return out


def card_document(book: ImportedBook) -> dict[str, Any]:
    """A ``chara_card_v2`` card around the book: the source card's fields when the
    book came from one, otherwise a minimal character named after the book."""
    data: dict[str, Any] = {
        "name": book.name,
        "description": "",
        "personality": "",
        "scenario": "",
        "first_mes": "",
        "mes_example": "",
        "creator_notes": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": [],
        "tags": [],
        "creator": "",
        "character_version": "",
        "extensions": {},
    }
    if book.card is not None and book.card.spec != "chara_card_v1":
        for name in V2_DATA_FIELDS:
            if name in book.card.data:
                data[name] = plain_json(book.card.data[name])
    elif book.card is not None:
        for name in ("name", "description", "personality", "scenario", "first_mes", "mes_example"):
            if isinstance(book.card.data.get(name), str):
                data[name] = book.card.data[name]
    if not isinstance(data.get("extensions"), dict):
        data["extensions"] = {}
    data["character_book"] = character_book(book)
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}


def write_card_json(book: ImportedBook) -> bytes:
    return json.dumps(card_document(book), ensure_ascii=False, indent=2).encode("utf-8")


__all__ = [
    "FORMAT_CARD_V1",
    "FORMAT_CARD_V2",
    "FORMAT_CARD_V3",
    "FORMAT_CHARACTER_BOOK",
    "FORMAT_LOREBOOK_V3",
    "card_document",
    "count_card_entries",
    "entry_from_card",
    "is_card",
    "read_card",
    "read_character_book",
    "read_lorebook_v3",
    "write_card_json",
]
