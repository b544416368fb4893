"""Agnai memory books (``{"kind": "memory", "entries": [...]}``): reader.

Entry mapping: ``name`` → title, ``entry`` → content, ``keywords`` → keys,
``priority`` → priority, ``weight`` → order (Agnai sorts by weight, higher
first — the role SillyTavern's ``order`` plays), ``enabled``. Other fields
(and the book's ``_id``, ``userId`` …) stay in ``extra["agnai"]``.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from books.fields import DEFAULT_PRIORITY
from books.formats.jsonio import as_bool, as_int, as_keys, as_object, as_text, refuse, type_name
from books.formats.model import ImportedBook, ImportedEntry

FORMAT = "agnai-memory-book"
NAMESPACE = "agnai"
CONSUMED = {"name", "entry", "keywords", "priority", "weight", "enabled"}
BOOK_CONSUMED = {"name", "description", "entries"}


def is_memory_book(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("kind") == "memory" and "entries" in doc


def read_memory_book(doc: Mapping[str, Any], *, fallback_name: str) -> ImportedBook:
    raw_entries = doc.get("entries")
    if not isinstance(raw_entries, list):
        refuse("{path} must be a list, not {type}", "entries",
               values={"path": "entries", "type": type_name(raw_entries)})
    entries = []
    for i, raw in enumerate(raw_entries):
        path = f"entries.{i}"
        item = as_object(raw, path)
        kept = {k: v for k, v in item.items() if k not in CONSUMED}
        entries.append(
            ImportedEntry(
                title=as_text(item.get("name"), f"{path}.name"),
                content=as_text(item.get("entry"), f"{path}.entry"),
                keys=as_keys(item.get("keywords"), f"{path}.keywords"),
                selective=False,
                enabled=as_bool(item.get("enabled"), f"{path}.enabled", True),
                priority=as_int(item.get("priority"), f"{path}.priority", DEFAULT_PRIORITY),
                order=as_int(item.get("weight"), f"{path}.weight", 100),
                position=i,
                extra={NAMESPACE: kept} if kept else {},
            )
        )
    kept_book = {k: v for k, v in doc.items() if k not in BOOK_CONSUMED}
    return ImportedBook(
        name=as_text(doc.get("name"), "name").strip() or fallback_name,
        description=as_text(doc.get("description"), "description"),
        entries=tuple(entries),
        extra={NAMESPACE: kept_book} if kept_book else {},
        source_format=FORMAT,
    )
