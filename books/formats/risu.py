"""RisuAI lorebook exports (``{"type": "risu", "ver": 1, "data": [...]}``): reader.

Entry mapping: ``comment`` → title, ``content``, ``key``/``secondkey``
(comma-separated strings) → keys/secondary keys, ``insertorder`` → order,
``alwaysActive`` → constant, ``selective``, ``activationPercent`` →
probability. ``mode``, ``useRegex`` (keys are regular expressions),
``extentions`` (sic), ``folder`` and ids stay in ``extra["risu"]``; entries
whose ``mode`` is ``folder`` are folder markers, not lore, and are skipped by
the mapping. ``@@`` decorators stay in the content, as Risu wrote them.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from books.formats.jsonio import as_bool, as_int, as_keys, as_object, as_opt_int, as_text, refuse, type_name
from books.formats.model import ImportedBook, ImportedEntry

FORMAT = "risu-lorebook"
NAMESPACE = "risu"
CONSUMED = {"comment", "content", "key", "secondkey", "insertorder", "alwaysActive", "selective", "activationPercent"}


def is_risu(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("type") == "risu" and "data" in doc


def count_entries(doc: Mapping[str, Any]) -> int:
    data = doc.get("data")
    return len(data) if isinstance(data, list) else 0


def read_risu(doc: Mapping[str, Any], *, fallback_name: str) -> ImportedBook:
    data = doc.get("data")
    if not isinstance(data, list):
        refuse("{path} must be a list of lorebook entries, not {type}", "data",
               values={"path": "data", "type": type_name(data)})
    entries = []
    for i, raw in enumerate(data):
        path = f"data.{i}"
        item = as_object(raw, path)
        kept = {k: v for k, v in item.items() if k not in CONSUMED}
        probability = as_opt_int(item.get("activationPercent"), f"{path}.activationPercent", lo=0, hi=100)
        entries.append(
            ImportedEntry(
                title=as_text(item.get("comment"), f"{path}.comment"),
                content=as_text(item.get("content"), f"{path}.content"),
                keys=as_keys(item.get("key"), f"{path}.key"),
                secondary_keys=as_keys(item.get("secondkey"), f"{path}.secondkey"),
                selective=as_bool(item.get("selective"), f"{path}.selective", False),
                constant=as_bool(item.get("alwaysActive"), f"{path}.alwaysActive", False),
                order=as_int(item.get("insertorder"), f"{path}.insertorder", 100),
                probability=None if probability == 100 else probability,
                position=i,
                extra={NAMESPACE: kept} if kept else {},
            )
        )
    kept_book = {k: v for k, v in doc.items() if k not in ("data", "name", "description")}
    return ImportedBook(
        name=as_text(doc.get("name"), "name").strip() or fallback_name,
        description=as_text(doc.get("description"), "description"),
        entries=tuple(entries),
        extra={NAMESPACE: kept_book} if kept_book else {},
        source_format=FORMAT,
    )
