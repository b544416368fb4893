"""Look-alike entry lists from other apps: reader.

Files that sit in SillyTavern ``worlds/`` folders but were written by other
tools: a bare top-level array of entry objects (``[{key, value}]``,
``[{entry_id, title, content, keys, …}]``), or a NativeTavern world book
(``{name, entries: [{id, worldInfoId, keys, insertionOrder, …}]}``). Each item
is read like a Character Book entry with the other tools' spellings accepted:
content from ``content``/``value``/``text``, title from
``comment``/``name``/``title``, keys from ``keys``/``key`` (a list or a
comma-separated string), order from ``insertion_order``/``insertionOrder``/
``order``, probability from ``activation_chance``. Every other field stays in
``extra["generic"]``. An item with none of the content fields is not an entry,
and the file is refused.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from books.formats.card import entry_from_card, item_uids
from books.formats.jsonio import as_object, as_text, refuse, type_name
from books.formats.model import ImportedBook, ImportedEntry

FORMAT_LIST = "entry-list-json"
FORMAT_NATIVETAVERN = "nativetavern-world-book"
NAMESPACE = "generic"
CONTENT_NAMES = ("content", "value", "text")
NATIVETAVERN_MARKERS = ("worldInfoId", "insertionOrder")


def looks_like_entries(items: list[Any]) -> bool:
    return bool(items) and all(
        isinstance(item, dict) and any(isinstance(item.get(name), str) for name in CONTENT_NAMES) for item in items
    )


def is_nativetavern(doc: Any) -> bool:
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
        return False
    return any(isinstance(e, dict) and any(m in e for m in NATIVETAVERN_MARKERS) for e in doc["entries"])


def _items(items: list[Any], path: str) -> tuple[ImportedEntry, ...]:
    out = []
    uids = item_uids([(f"{path}.{i}" if path else str(i), raw) for i, raw in enumerate(items)])
    for i, raw in enumerate(items):
        item_path = f"{path}.{i}" if path else str(i)
        item = as_object(raw, item_path)
        if not any(name in item for name in CONTENT_NAMES):
            refuse("{path} has no content/value/text: not a lorebook entry", item_path, values={"path": item_path})
        if "activation_chance" in item and "probability" not in item:
            # Read as the probability it is (and written back as one).
            item = {("probability" if k == "activation_chance" else k): v for k, v in item.items()}
        entry = entry_from_card(
            item, index=i, path=item_path, namespace=NAMESPACE, content_names=CONTENT_NAMES, uid=uids[i]
        )
        out.append(entry)
    return tuple(out)


def read_list(items: list[Any], *, fallback_name: str) -> ImportedBook:
    if not looks_like_entries(items):
        refuse("a top-level JSON array of something other than lorebook entries", "file")
    return ImportedBook(name=fallback_name, entries=_items(items, ""), source_format=FORMAT_LIST)


def read_nativetavern(doc: Mapping[str, Any], *, fallback_name: str) -> ImportedBook:
    items = doc.get("entries")
    if not isinstance(items, list):
        refuse("{path} must be a list, not {type}", "entries", values={"path": "entries", "type": type_name(items)})
    kept = {k: v for k, v in doc.items() if k not in ("name", "description", "entries")}
    return ImportedBook(
        name=as_text(doc.get("name"), "name").strip() or fallback_name,
        description=as_text(doc.get("description"), "description"),
        entries=_items(items, "entries"),
        extra={NAMESPACE: kept} if kept else {},
        source_format=FORMAT_NATIVETAVERN,
    )
