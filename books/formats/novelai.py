"""NovelAI lorebooks (``.lorebook``, any ``lorebookVersion``) and ``.story`` files.

Entry mapping: ``text`` → content, ``displayName`` → title, ``keys`` (NovelAI
treats ``/…/`` keys as regular expressions; they are kept as written),
``enabled`` (absent = true), ``forceActivation`` → constant,
``contextConfig.budgetPriority`` → order (absent = NovelAI's 400). Everything
else — ``searchRange``, ``keyRelative``, ``nonStoryActivatable``,
``category``, ``loreBiasGroups``, ``advancedConditions``, the rest of
``contextConfig`` — stays in ``extra["novelai"]``; book-level ``settings``,
``categories`` and ``lorebookVersion`` in the book's ``extra["novelai"]``.

A ``.story`` container (``storyContainerVersion``) imports only the lorebook
in ``content.lorebook``; a ``.scenario`` (``scenarioVersion``) the same
lorebook at ``lorebook``. Their story text, prompt and settings are not lore.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from books.formats.jsonio import as_bool, as_int, as_keys, as_object, as_text, refuse, type_name
from books.formats.model import ImportedBook, ImportedEntry
from lore_platform.errors import Phrase

FORMAT = "novelai-lorebook"
FORMAT_STORY = "novelai-story"
FORMAT_SCENARIO = "novelai-scenario"
NAMESPACE = "novelai"
DEFAULT_BUDGET_PRIORITY = 400
CONSUMED = {"text", "displayName", "keys", "enabled", "forceActivation"}
# contextConfig values NovelAI writes for a new entry.
CONTEXT_DEFAULTS: dict[str, Any] = {
    "prefix": "",
    "suffix": "\n",
    "tokenBudget": 1,
    "reservedTokens": 0,
    "trimDirection": "trimBottom",
    "insertionType": "newline",
    "maximumTrimType": "sentence",
    "insertionPosition": -1,
}
ENTRY_DEFAULTS: dict[str, Any] = {
    "searchRange": 1000,
    "keyRelative": False,
    "nonStoryActivatable": False,
    "category": "",
    "loreBiasGroups": [],
    "advancedConditions": [],
}


def is_lorebook(doc: Any) -> bool:
    return isinstance(doc, dict) and "lorebookVersion" in doc


def is_story(doc: Any) -> bool:
    return isinstance(doc, dict) and "storyContainerVersion" in doc


def is_scenario(doc: Any) -> bool:
    return isinstance(doc, dict) and "scenarioVersion" in doc


def count_entries(doc: Mapping[str, Any]) -> int:
    if is_scenario(doc):
        lorebook = doc.get("lorebook")
        if not isinstance(lorebook, dict):
            return 0
        doc = lorebook
    elif is_story(doc):
        content = doc.get("content")
        lorebook = content.get("lorebook") if isinstance(content, dict) else None
        if not isinstance(lorebook, dict):
            return 0
        doc = lorebook
    entries = doc.get("entries")
    return len(entries) if isinstance(entries, list) else 0


def _entry(raw: Mapping[str, Any], *, index: int, path: str) -> ImportedEntry:
    config = raw.get("contextConfig")
    if config is not None and not isinstance(config, dict):
        refuse("{path} must be an object, not {type}", f"{path}.contextConfig",
               values={"path": f"{path}.contextConfig", "type": type_name(config)})
    order = as_int((config or {}).get("budgetPriority"), f"{path}.contextConfig.budgetPriority", DEFAULT_BUDGET_PRIORITY)
    kept = {k: v for k, v in raw.items() if k not in CONSUMED}
    if config is not None:
        rest = {k: v for k, v in config.items() if k != "budgetPriority"}
        kept["contextConfig"] = rest
    return ImportedEntry(
        title=as_text(raw.get("displayName"), f"{path}.displayName"),
        content=as_text(raw.get("text"), f"{path}.text"),
        keys=as_keys(raw.get("keys"), f"{path}.keys"),
        selective=False,
        constant=as_bool(raw.get("forceActivation"), f"{path}.forceActivation", False),
        enabled=as_bool(raw.get("enabled"), f"{path}.enabled", True),
        order=order,
        position=index,
        extra={NAMESPACE: kept} if kept else {},
    )


def read_lorebook(doc: Mapping[str, Any], *, fallback_name: str, path: str = "") -> ImportedBook:
    prefix = f"{path}." if path else ""
    entries = doc.get("entries", [])
    if not isinstance(entries, list):
        refuse("{path} must be a list, not {type}", f"{prefix}entries",
               values={"path": f"{prefix}entries", "type": type_name(entries)})
    out = tuple(
        _entry(as_object(raw, f"{prefix}entries.{i}"), index=i, path=f"{prefix}entries.{i}")
        for i, raw in enumerate(entries)
    )
    book_extra = {k: v for k, v in doc.items() if k != "entries"}
    return ImportedBook(
        name=fallback_name,
        entries=out,
        extra={NAMESPACE: book_extra} if book_extra else {},
        source_format=FORMAT,
    )


def read_story(doc: Mapping[str, Any], *, fallback_name: str) -> ImportedBook:
    content = doc.get("content")
    if not isinstance(content, dict) or not isinstance(content.get("lorebook"), dict):
        refuse("the NovelAI story has no readable lorebook (content.lorebook)", "content.lorebook")
    raw_metadata = doc.get("metadata")
    metadata: Mapping[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
    title = as_text(metadata.get("title"), "metadata.title").strip()
    book = read_lorebook(content["lorebook"], fallback_name=title or fallback_name, path="content.lorebook")
    return ImportedBook(
        name=book.name,
        entries=book.entries,
        extra=book.extra,
        source_format=FORMAT_STORY,
        notes=(Phrase("only the story's lorebook is imported; its text and settings are not lore"),),
    )


def read_scenario(doc: Mapping[str, Any], *, fallback_name: str) -> ImportedBook:
    """A ``.scenario`` (``scenarioVersion``) carries the same lorebook as a story, at ``lorebook``."""
    if not isinstance(doc.get("lorebook"), dict):
        refuse("the NovelAI scenario has no readable lorebook (lorebook)", "lorebook")
    title = as_text(doc.get("title"), "title").strip()
    book = read_lorebook(doc["lorebook"], fallback_name=title or fallback_name, path="lorebook")
    return ImportedBook(
        name=book.name,
        entries=book.entries,
        extra=book.extra,
        source_format=FORMAT_SCENARIO,
        notes=(Phrase("only the scenario's lorebook is imported; its prompt and settings are not lore"),),
    )
