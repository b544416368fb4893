"""Loreweave's native lore format: a versioned, full-fidelity JSON document.

Unlike SillyTavern world info (which must not carry tenant-only state, I-6),
the native format keeps everything a tenant's lore is made of, so a backup
restores exactly: every entry field (channels and unresolved ``#channel``
names included), book settings, the collection state (profile, scope,
active toggle, collection channels, visibility, tags, language, living-world
flag, owner) and the lineage keys persona books belong to (S-2).

Schema, version 1 (``NATIVE_SCHEMA`` is the machine-readable JSON Schema)::

    {
      "format": "loreweave-native",
      "version": 1,
      "books": [
        {
          "title": str, "description": str,
          "settings": {"scan_depth": int|null, "token_budget": int|null,
                       "recursive": bool|null, "case_sensitive": bool|null,
                       "whole_words": bool|null},
          "collection": null | {
              "profile": "classic"|"server"|"smart"|"sillytavern",
              "scope": "personal"|"server"|"persona",
              "lineage_key": str|null,     # persona books: the lineage's key
              "owner": str|null,           # the owner's email; null = tenant
              "visibility": "private"|"unlisted"|"public",
              "active": bool, "channels": [str], "tags": [str],
              "language": str, "living_world": bool,
              "living_world_review": bool},
          "extra": {...},                  # book fields from imports we do not model
          "entries": [
            {"title": str, "content": str, "keys": [str], "secondary_keys": [str],
             "secondary_logic": "and_any"|"and_all"|"not_any"|"not_all",
             "selective": bool, "key_expression": str,  # K-1; "" = not used
             "constant": bool, "enabled": bool,
             "order": int, "priority": int, "probability": 0..100|null,
             "scan_depth": int|null, "case_sensitive": bool|null,
             "whole_words": bool|null, "role": "system"|"user"|"assistant",
             "placement": "before_persona"|"after_persona",
             "channels": [str], "unresolved_channels": [str],
             "position": int, "extra": {...}}
          ]
        }
      ],
      "lineages": [{"key": str, "characters": [str]}]
    }

Readers of a newer ``version`` refuse the file rather than guess. Every
entry field is required in files we write; the reader fills defaults for
missing ones so a hand-written native file is easy to make.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from books.fields import ENTRY_DEFAULTS as D
from books.formats.jsonio import (
    as_bool,
    as_int,
    as_keys,
    as_object,
    as_opt_bool,
    as_opt_int,
    as_text,
    refuse,
    refuse_clipped,
    type_name,
)
from books.formats.model import (
    PLACEMENTS,
    PROFILES,
    ROLES,
    SCOPES,
    SECONDARY_LOGICS,
    VISIBILITIES,
    BookSettings,
    CollectionState,
    ImportedBook,
    ImportedEntry,
    entry_as_dict,
    plain_json,
)

FORMAT = "loreweave-native"
NATIVE_FORMAT = FORMAT
NATIVE_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class NativeLineage:
    key: str
    characters: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class NativeBackup:
    books: tuple[ImportedBook, ...]
    lineages: tuple[NativeLineage, ...] = ()


def is_native(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("format") == FORMAT


def count_entries(doc: Mapping[str, Any]) -> int:
    books = doc.get("books")
    if not isinstance(books, list):
        return 0
    return sum(len(b["entries"]) for b in books if isinstance(b, dict) and isinstance(b.get("entries"), list))


# --- writer -------------------------------------------------------------------------


def book_document(book: ImportedBook) -> dict[str, Any]:
    return {
        "title": book.name,
        "description": book.description,
        "settings": book.settings.as_dict(),
        "collection": book.collection.as_dict() if book.collection is not None else None,
        "extra": plain_json(book.extra),
        "entries": [entry_as_dict(entry) for entry in book.entries],
    }


def native_document(books: Sequence[ImportedBook], *, lineages: Sequence[NativeLineage] = ()) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": NATIVE_VERSION,
        "books": [book_document(book) for book in books],
        "lineages": [{"key": lin.key, "characters": list(lin.characters)} for lin in lineages],
    }


def write_native(books: Sequence[ImportedBook], *, lineages: Sequence[NativeLineage] = ()) -> bytes:
    return json.dumps(native_document(books, lineages=lineages), ensure_ascii=False, indent=2).encode("utf-8")


# --- reader -------------------------------------------------------------------------


def _choice(value: Any, path: str, choices: tuple[str, ...], default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str) or value not in choices:
        refuse_clipped("{path} must be one of {choices}, not {value}", path,
                       values={"path": path, "choices": ", ".join(choices), "value": repr(value)}, clip="value")
    return value


def _strings(value: Any, path: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        refuse("{path} must be a list of strings, not {type}", path, values={"path": path, "type": type_name(value)})
    return tuple(as_text(item, f"{path}.{i}") for i, item in enumerate(value))


def _entry(raw: Mapping[str, Any], *, index: int, path: str) -> ImportedEntry:
    extra = raw.get("extra")
    if extra is None:
        extra = {}
    as_object(extra, f"{path}.extra")
    return ImportedEntry(
        title=as_text(raw.get("title"), f"{path}.title"),
        content=as_text(raw.get("content"), f"{path}.content"),
        keys=as_keys(raw.get("keys"), f"{path}.keys"),
        secondary_keys=as_keys(raw.get("secondary_keys"), f"{path}.secondary_keys"),
        secondary_logic=_choice(
            raw.get("secondary_logic"), f"{path}.secondary_logic", SECONDARY_LOGICS, D["secondary_logic"]
        ),
        selective=as_bool(raw.get("selective"), f"{path}.selective", D["selective"]),
        key_expression=as_text(raw.get("key_expression"), f"{path}.key_expression", D["key_expression"]),
        constant=as_bool(raw.get("constant"), f"{path}.constant", D["constant"]),
        enabled=as_bool(raw.get("enabled"), f"{path}.enabled", D["enabled"]),
        order=as_int(raw.get("order"), f"{path}.order", D["order"]),
        priority=as_int(raw.get("priority"), f"{path}.priority", D["priority"]),
        probability=as_opt_int(raw.get("probability"), f"{path}.probability", lo=0, hi=100),
        scan_depth=as_opt_int(raw.get("scan_depth"), f"{path}.scan_depth", lo=0, hi=1000),
        case_sensitive=as_opt_bool(raw.get("case_sensitive"), f"{path}.case_sensitive"),
        whole_words=as_opt_bool(raw.get("whole_words"), f"{path}.whole_words"),
        role=_choice(raw.get("role"), f"{path}.role", ROLES, D["role"]),
        placement=_choice(raw.get("placement"), f"{path}.placement", PLACEMENTS, D["placement"]),
        channels=_strings(raw.get("channels"), f"{path}.channels"),
        unresolved_channels=_strings(raw.get("unresolved_channels"), f"{path}.unresolved_channels"),
        position=as_int(raw.get("position"), f"{path}.position", index),
        extra=extra,
    )


def _collection(raw: Any, path: str) -> CollectionState | None:
    if raw is None:
        return None
    raw = as_object(raw, path)
    owner = raw.get("owner")
    lineage = raw.get("lineage_key")
    return CollectionState(
        profile=_choice(raw.get("profile"), f"{path}.profile", PROFILES, "classic"),
        scope=_choice(raw.get("scope"), f"{path}.scope", SCOPES, "personal"),
        lineage_key=None if lineage is None else as_text(lineage, f"{path}.lineage_key"),
        owner=None if owner is None else as_text(owner, f"{path}.owner"),
        visibility=_choice(raw.get("visibility"), f"{path}.visibility", VISIBILITIES, "private"),
        active=as_bool(raw.get("active"), f"{path}.active", True),
        channels=_strings(raw.get("channels"), f"{path}.channels"),
        tags=_strings(raw.get("tags"), f"{path}.tags"),
        language=as_text(raw.get("language"), f"{path}.language", "en"),
        living_world=as_bool(raw.get("living_world"), f"{path}.living_world", False),
        living_world_review=as_bool(raw.get("living_world_review"), f"{path}.living_world_review", False),
    )


def _settings(raw: Any, path: str) -> BookSettings:
    if raw is None:
        return BookSettings()
    raw = as_object(raw, path)
    return BookSettings(
        scan_depth=as_opt_int(raw.get("scan_depth"), f"{path}.scan_depth", lo=0, hi=1000),
        token_budget=as_opt_int(raw.get("token_budget"), f"{path}.token_budget", lo=0),
        recursive=as_opt_bool(raw.get("recursive"), f"{path}.recursive"),
        case_sensitive=as_opt_bool(raw.get("case_sensitive"), f"{path}.case_sensitive"),
        whole_words=as_opt_bool(raw.get("whole_words"), f"{path}.whole_words"),
    )


def _book(raw: Mapping[str, Any], *, path: str, fallback_name: str) -> ImportedBook:
    entries = raw.get("entries")
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        refuse("{path} must be a list, not {type}", f"{path}.entries",
               values={"path": f"{path}.entries", "type": type_name(entries)})
    extra = raw.get("extra")
    if extra is None:
        extra = {}
    as_object(extra, f"{path}.extra")
    return ImportedBook(
        name=as_text(raw.get("title"), f"{path}.title").strip() or fallback_name,
        description=as_text(raw.get("description"), f"{path}.description"),
        settings=_settings(raw.get("settings"), f"{path}.settings"),
        entries=tuple(
            _entry(as_object(e, f"{path}.entries.{i}"), index=i, path=f"{path}.entries.{i}")
            for i, e in enumerate(entries)
        ),
        extra=extra,
        source_format=FORMAT,
        collection=_collection(raw.get("collection"), f"{path}.collection"),
    )


def read_native(doc: Mapping[str, Any], *, fallback_name: str = "Imported book") -> NativeBackup:
    """A native document (already JSON-decoded) → its books and lineages."""
    if doc.get("format") != FORMAT:
        refuse("not a {format} document", "format", values={"format": FORMAT})
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        refuse("version must be a positive integer", "version")
    if version > NATIVE_VERSION:
        refuse(
            "this is a version {version} native file; this Loreweave reads up to version {supported}",
            "version",
            values={"version": version, "supported": NATIVE_VERSION},
        )
    books = doc.get("books")
    if not isinstance(books, list):
        refuse("{path} must be a list, not {type}", "books", values={"path": "books", "type": type_name(books)})
    lineages_raw = doc.get("lineages") or []
    if not isinstance(lineages_raw, list):
        refuse("{path} must be a list, not {type}", "lineages",
               values={"path": "lineages", "type": type_name(lineages_raw)})
    lineages = []
    for i, raw in enumerate(lineages_raw):
        item = as_object(raw, f"lineages.{i}")
        key = as_text(item.get("key"), f"lineages.{i}.key")
        if not key:
            refuse("{path} must not be empty", f"lineages.{i}.key", values={"path": f"lineages.{i}.key"})
        lineages.append(NativeLineage(key=key, characters=_strings(item.get("characters"), f"lineages.{i}.characters")))
    return NativeBackup(
        books=tuple(
            _book(as_object(b, f"books.{i}"), path=f"books.{i}", fallback_name=fallback_name)
            for i, b in enumerate(books)
        ),
        lineages=tuple(lineages),
    )


def read_native_book(doc: Mapping[str, Any], *, fallback_name: str) -> ImportedBook:
    """The one book of a native document (a multi-book backup is restored, not imported)."""
    backup = read_native(doc, fallback_name=fallback_name)
    if len(backup.books) != 1:
        refuse(
            "this native backup holds {count} books; import takes one book"
            " (restore a whole backup with the backup service)",
            "books",
            values={"count": len(backup.books)},
        )
    return backup.books[0]


_STR_LIST = {"type": "array", "items": {"type": "string"}}
_OPT_BOOL = {"type": ["boolean", "null"]}
_ENTRY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [f.name for f in fields(ImportedEntry)],
    "properties": {
        "title": {"type": "string"},
        "content": {"type": "string"},
        "keys": _STR_LIST,
        "secondary_keys": _STR_LIST,
        "secondary_logic": {"enum": list(SECONDARY_LOGICS)},
        "selective": {"type": "boolean"},
        "key_expression": {"type": "string"},
        "constant": {"type": "boolean"},
        "enabled": {"type": "boolean"},
        "order": {"type": "integer"},
        "priority": {"type": "integer"},
        "probability": {"type": ["integer", "null"], "minimum": 0, "maximum": 100},
        "scan_depth": {"type": ["integer", "null"], "minimum": 0, "maximum": 1000},
        "case_sensitive": _OPT_BOOL,
        "whole_words": _OPT_BOOL,
        "role": {"enum": list(ROLES)},
        "placement": {"enum": list(PLACEMENTS)},
        "channels": _STR_LIST,
        "unresolved_channels": _STR_LIST,
        "position": {"type": "integer"},
        "extra": {"type": "object"},
    },
}
NATIVE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Loreweave native lore backup",
    "type": "object",
    "required": ["format", "version", "books"],
    "properties": {
        "format": {"const": FORMAT},
        "version": {"const": NATIVE_VERSION},
        "books": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["title", "description", "settings", "collection", "extra", "entries"],
                "properties": {
                    "title": {"type": "string"},
                    "description": {"type": "string"},
                    "settings": {
                        "type": "object",
                        "properties": {
                            "scan_depth": {"type": ["integer", "null"]},
                            "token_budget": {"type": ["integer", "null"]},
                            "recursive": _OPT_BOOL,
                            "case_sensitive": _OPT_BOOL,
                            "whole_words": _OPT_BOOL,
                        },
                    },
                    "collection": {
                        "type": ["object", "null"],
                        "properties": {
                            "profile": {"enum": list(PROFILES)},
                            "scope": {"enum": list(SCOPES)},
                            "lineage_key": {"type": ["string", "null"]},
                            "owner": {"type": ["string", "null"]},
                            "visibility": {"enum": list(VISIBILITIES)},
                            "active": {"type": "boolean"},
                            "channels": _STR_LIST,
                            "tags": _STR_LIST,
                            "language": {"type": "string"},
                            "living_world": {"type": "boolean"},
                            "living_world_review": {"type": "boolean"},
                        },
                    },
                    "extra": {"type": "object"},
                    "entries": {"type": "array", "items": _ENTRY_SCHEMA},
                },
            },
        },
        "lineages": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key"],
                "properties": {"key": {"type": "string", "minLength": 1}, "characters": _STR_LIST},
            },
        },
    },
}
