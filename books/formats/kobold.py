"""KoboldAI saved stories (``worldinfo`` list): reader.

KoboldAI keeps world info in the story file as a list of ``{key, content}``
items (KoboldAI United adds ``keysecondary``, ``comment``, ``selective``,
``constant``, ``folder`` …), with ``key`` one comma-separated string. Only
the world info is imported; the story's prompt, memory, author's note and
actions are not lore. KoboldAI's world-info *export* (``folders`` + an
``entries`` object) is read by the SillyTavern reader.

Keys written for AI Dungeon's EWIJSON scripts (``Name|(|the )title#[t=5]``)
are kept as written; the mapping reports them, since nothing matches them as
intended.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from books.formats.jsonio import as_bool, as_keys, as_object, as_text, refuse, type_name
from books.formats.model import ImportedBook, ImportedEntry
from lore_platform.errors import Phrase

FORMAT = "koboldai-story"
NAMESPACE = "kobold"
CONSUMED = {"key", "keysecondary", "content", "comment", "selective", "constant"}


def is_story(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("worldinfo"), list) and "entries" not in doc


def count_entries(doc: Mapping[str, Any]) -> int:
    return len(doc["worldinfo"]) if isinstance(doc.get("worldinfo"), list) else 0


def read_story(doc: Mapping[str, Any], *, fallback_name: str) -> ImportedBook:
    items = doc.get("worldinfo")
    if not isinstance(items, list):
        refuse("{path} must be a list, not {type}", "worldinfo", values={"path": "worldinfo", "type": type_name(items)})
    entries = []
    for i, raw in enumerate(items):
        path = f"worldinfo.{i}"
        item = as_object(raw, path)
        kept = {k: v for k, v in item.items() if k not in CONSUMED}
        entries.append(
            ImportedEntry(
                title=as_text(item.get("comment"), f"{path}.comment"),
                content=as_text(item.get("content"), f"{path}.content"),
                keys=as_keys(item.get("key"), f"{path}.key"),
                secondary_keys=as_keys(item.get("keysecondary"), f"{path}.keysecondary"),
                selective=as_bool(item.get("selective"), f"{path}.selective", False),
                constant=as_bool(item.get("constant"), f"{path}.constant", False),
                position=i,
                extra={NAMESPACE: kept} if kept else {},
            )
        )
    return ImportedBook(
        name=fallback_name,
        entries=tuple(entries),
        source_format=FORMAT,
        notes=(Phrase("only the story's world info is imported; its prompt, memory and actions are not lore"),),
    )
