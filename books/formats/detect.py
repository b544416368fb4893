"""Format detection (by content, never by file extension) and the reader entry point."""
from __future__ import annotations

from pathlib import PurePath
from typing import Any

from books.formats import agnai, card, card_png, charx, generic, kobold, native, novelai, risu, sillytavern
from books.formats.jsonio import loads, refuse, type_name
from books.formats.limits import FormatLimits, check_batch, current_limits
from books.formats.model import ImportedBook
from lore_platform.errors import Term

DEFAULT_BOOK_NAME = "Imported book"
_ST_MARKS = ("key", "keysecondary", "uid", "disable")
_V2_MARKS = ("keys", "secondary_keys", "insertion_order", "enabled")


def name_from_filename(filename: str | None) -> str:
    if not filename:
        return DEFAULT_BOOK_NAME
    stem = PurePath(filename.replace("\\", "/")).name
    for suffix in (".json", ".lorebook", ".story", ".scenario", ".png", ".charx"):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return stem.strip() or DEFAULT_BOOK_NAME


def _st_list(items: list[Any]) -> bool:
    st = sum(1 for e in items if isinstance(e, dict) and any(m in e for m in _ST_MARKS))
    v2 = sum(1 for e in items if isinstance(e, dict) and any(m in e for m in _V2_MARKS))
    return st > 0 and st >= v2


def detect_format(data: bytes) -> str:
    """A coarse family name from the first bytes: ``png``, ``charx`` or ``json``."""
    if data.startswith(card_png.PNG_SIGNATURE):
        return "png"
    if data.startswith(charx.ZIP_MAGIC):
        return "charx"
    return "json"


def read_book(data: bytes, *, filename: str | None = None, limits: FormatLimits | None = None) -> ImportedBook:
    """Read any supported file into an ``ImportedBook``.

    Raises only ``lore_platform.errors.DomainError`` subclasses:
    ``ValidationFailed`` for unreadable or unrecognised input (rule I-1),
    ``PayloadTooLarge`` for files past the size limits (I-3) and
    ``LimitExceeded`` for more entries than one import takes (W-12).
    """
    limits = limits or current_limits()
    fallback = name_from_filename(filename)
    if not isinstance(data, (bytes, bytearray)):
        refuse("the upload must be bytes", "file")
    data = bytes(data)
    if not data.strip():
        refuse("the file is empty", "file")
    family = detect_format(data)
    if family == "png":
        return card_png.read_png(data, fallback_name=fallback, limits=limits)
    if family == "charx":
        return charx.read_charx(data, fallback_name=fallback, limits=limits)
    doc = loads(data, limit_bytes=limits.max_json_bytes, max_depth=limits.max_json_depth)
    return read_document(doc, fallback_name=fallback, filename=filename, limits=limits)


def read_document(
    doc: Any, *, fallback_name: str = DEFAULT_BOOK_NAME, filename: str | None = None, limits: FormatLimits
) -> ImportedBook:
    """Dispatch an already-decoded JSON document to its reader."""
    if isinstance(doc, list):
        check_batch(len(doc), limits)
        return generic.read_list(doc, fallback_name=fallback_name)
    if not isinstance(doc, dict):
        refuse("the JSON is a single {type}, not a lorebook or character card", "file", values={"type": type_name(doc)})
    if native.is_native(doc):
        check_batch(native.count_entries(doc), limits)
        return native.read_native_book(doc, fallback_name=fallback_name)
    if doc.get("spec") == "lorebook_v3":
        check_batch(card.count_card_entries(doc), limits)
        return card.read_lorebook_v3(doc, fallback_name=fallback_name)
    if card.is_card(doc):
        check_batch(card.count_card_entries(doc), limits)
        return card.read_card(doc, fallback_name=fallback_name)
    if novelai.is_scenario(doc):
        check_batch(novelai.count_entries(doc), limits)
        return novelai.read_scenario(doc, fallback_name=fallback_name)
    if novelai.is_story(doc):
        check_batch(novelai.count_entries(doc), limits)
        return novelai.read_story(doc, fallback_name=fallback_name)
    if novelai.is_lorebook(doc):
        check_batch(novelai.count_entries(doc), limits)
        return novelai.read_lorebook(doc, fallback_name=fallback_name)
    if agnai.is_memory_book(doc):
        check_batch(sillytavern.count_entries(doc), limits)
        return agnai.read_memory_book(doc, fallback_name=fallback_name)
    if risu.is_risu(doc):
        check_batch(risu.count_entries(doc), limits)
        return risu.read_risu(doc, fallback_name=fallback_name)
    if kobold.is_story(doc):
        check_batch(kobold.count_entries(doc), limits)
        return kobold.read_story(doc, fallback_name=fallback_name)
    if "entries" in doc:
        entries = doc["entries"]
        check_batch(sillytavern.count_entries(doc), limits)
        if isinstance(entries, dict):
            return sillytavern.read_world_info(doc, fallback_name=fallback_name)
        if isinstance(entries, list):
            if generic.is_nativetavern(doc):
                return generic.read_nativetavern(doc, fallback_name=fallback_name)
            if _st_list(entries):
                return sillytavern.read_world_info(doc, fallback_name=fallback_name)
            return card.read_character_book(
                doc, path="", fallback_name=fallback_name, source_format=card.FORMAT_CHARACTER_BOOK
            )
        refuse("{path} must be an object keyed by uid or a list, not {type}", "entries",
               values={"path": "entries", "type": type_name(entries)})
    found = {"keys": ", ".join(sorted(doc)[:8]) or Term("none")}
    if filename and filename.lower().endswith(".lorebook"):
        refuse(
            "the file is named .lorebook but holds no NovelAI lorebook (no 'lorebookVersion'); not a lorebook or"
            " character card this importer knows: a JSON object with keys {keys}"
            " (expected 'entries', 'spec'/'data', 'lorebookVersion', 'kind': 'memory' or 'type': 'risu')",
            "file",
            values=found,
        )
    refuse(
        "not a lorebook or character card this importer knows: a JSON object with keys {keys}"
        " (expected 'entries', 'spec'/'data', 'lorebookVersion', 'kind': 'memory' or 'type': 'risu')",
        "file",
        values=found,
    )
