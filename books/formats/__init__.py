"""Import and export of lore files — pure, no database.

Readers turn bytes into an :class:`ImportedBook` (format detected by content);
:func:`map_for_profile` maps it for a profile and writes the receipt;
:func:`plan_import` does both and checks every limit; writers turn a book back
into SillyTavern world info, a Character Card V2 (JSON or PNG) or the native
format. See each module's docstring for its format.

Modules: ``sillytavern`` (world info), ``card`` (V1/V2/V3 card JSON, Character
Book JSON), ``card_png``, ``charx``, ``novelai``, ``agnai``, ``risu``,
``kobold``, ``generic`` (look-alike entry lists), ``native``, ``detect``
(the reader entry point), ``mapping`` (profiles, receipt, plan), ``limits``,
``cli`` (``loreweave inspect`` / ``convert``).
"""
from __future__ import annotations

from books.formats.card import write_card_json
from books.formats.card_png import minimal_png, write_card_png
from books.formats.detect import read_book
from books.formats.limits import DEFAULT_LIMITS, FormatLimits, current_limits
from books.formats.mapping import (
    ImportPlan,
    entry_fingerprint,
    map_for_profile,
    normalise_text,
    plan_book,
    plan_import,
)
from books.formats.model import BookSettings, CardShell, CollectionState, ImportedBook, ImportedEntry
from books.formats.native import NATIVE_SCHEMA, NativeBackup, NativeLineage, read_native, write_native
from books.formats.sillytavern import write_world_info

EXPORT_FORMATS = ("sillytavern", "card-v2", "card-v2-png", "native")


def export_book(book: ImportedBook, to: str, *, image: bytes | None = None) -> bytes:
    """``book`` written as ``to`` (one of ``EXPORT_FORMATS``)."""
    if to == "sillytavern":
        return write_world_info(book)
    if to == "card-v2":
        return write_card_json(book)
    if to == "card-v2-png":
        return write_card_png(book, image=image)
    if to == "native":
        return write_native([book])
    from lore_platform.errors import ValidationFailed

    raise ValidationFailed(
        "unknown export format {to}; expected one of {formats}",
        values={"to": repr(to), "formats": ", ".join(EXPORT_FORMATS)},
        field="to",
        rule="I-6",
    )


__all__ = [
    "DEFAULT_LIMITS",
    "EXPORT_FORMATS",
    "NATIVE_SCHEMA",
    "BookSettings",
    "CardShell",
    "CollectionState",
    "FormatLimits",
    "ImportPlan",
    "ImportedBook",
    "ImportedEntry",
    "NativeBackup",
    "NativeLineage",
    "current_limits",
    "entry_fingerprint",
    "export_book",
    "map_for_profile",
    "minimal_png",
    "normalise_text",
    "plan_book",
    "plan_import",
    "read_book",
    "read_native",
    "write_card_json",
    "write_card_png",
    "write_native",
    "write_world_info",
]
