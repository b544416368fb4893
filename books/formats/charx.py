"""CHARX (CCv3 zip with ``card.json`` at the root): reader.

Only ``card.json`` is ever inflated, with a hard cap (the card-JSON limit),
however large its header claims to be. Before that the whole archive is
vetted and refused when hostile: more members than the limit, a total
unpacked size past the limit (decompression bomb), encrypted members, two
members with the same name, or any path that could escape an extraction
directory (``..``, absolute paths, drive letters, backslashes, NUL). A
RisuAI ``module.risum`` (binary module) is not read; the receipt says so.
"""
from __future__ import annotations

import io
import zipfile
from dataclasses import replace

from books.formats.card import count_card_entries, is_card, read_card
from books.formats.jsonio import check_size, decode_text, loads_text, refuse, refuse_clipped, too_large
from books.formats.limits import FormatLimits, check_batch
from books.formats.model import ImportedBook
from lore_platform.errors import Phrase, Term

FORMAT_SUFFIX = "charx"
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
# A refusal quoting an exception's text says at most this many characters.
QUOTE_LIMIT = 300


def _unsafe_path(name: str) -> bool:
    if not name or "\x00" in name or "\\" in name or name.startswith("/"):
        return True
    if len(name) > 1 and name[1] == ":":
        return True
    return any(part == ".." for part in name.split("/"))


def _failure(exc: Exception) -> dict[str, str]:
    return {"error": type(exc).__name__, "reason": str(exc)}


def _fits(template: str, values: dict[str, str]) -> bool:
    """Whether ``template`` filled in is at most ``QUOTE_LIMIT`` characters. A longer refusal is cut at
    the limit, losing its closing parenthesis: it is the template without one, its reason clipped."""
    return len(template.format(**values)) <= QUOTE_LIMIT


def read_charx(data: bytes, *, fallback_name: str, limits: FormatLimits) -> ImportedBook:
    check_size(data, limits.max_charx_bytes, Term("the CHARX file"))
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except Exception as exc:  # zipfile raises many types on hostile bytes; all mean "unreadable"
        failure = _failure(exc)
        if _fits("not a readable CHARX zip ({error}: {reason})", failure):
            refuse("not a readable CHARX zip ({error}: {reason})", "file", values=failure)
        refuse_clipped("not a readable CHARX zip ({error}: {reason}", "file", values=failure, clip="reason",
                       limit=QUOTE_LIMIT)
    with archive:
        members = archive.infolist()
        if len(members) > limits.max_charx_members:
            too_large(
                "the CHARX holds {count:,} files; the limit is {limit:,}",
                limits.max_charx_members,
                values={"count": len(members), "limit": limits.max_charx_members},
            )
        names: set[str] = set()
        total = 0
        for info in members:
            member = {"name": repr(info.filename)}
            if _unsafe_path(info.filename):
                refuse("the CHARX contains an unsafe path {name} (path traversal)", "file", values=member)
            if info.filename in names:
                refuse("the CHARX contains {name} twice", "file", values=member)
            names.add(info.filename)
            if info.flag_bits & 0x1:
                refuse("the CHARX member {name} is encrypted", "file", values=member)
            total += info.file_size
        if total > limits.max_charx_uncompressed_bytes:
            too_large(
                "the CHARX unpacks to {total:,} bytes; the limit is {limit:,} (decompression bomb)",
                limits.max_charx_uncompressed_bytes,
                values={"total": total, "limit": limits.max_charx_uncompressed_bytes},
            )
        if "card.json" not in names:
            refuse("the CHARX has no card.json at its root", "file")
        cap = limits.max_card_json_bytes
        try:
            with archive.open("card.json") as handle:
                raw = handle.read(cap + 1)
        except Exception as exc:  # bad CRC, unsupported compression, truncated data …
            failure = _failure(exc)
            if _fits("card.json in the CHARX cannot be read ({error}: {reason})", failure):
                refuse("card.json in the CHARX cannot be read ({error}: {reason})", "file", values=failure)
            refuse_clipped("card.json in the CHARX cannot be read ({error}: {reason}", "file", values=failure,
                           clip="reason", limit=QUOTE_LIMIT)
        if len(raw) > cap:
            too_large("card.json in the CHARX inflates past {cap:,} bytes", cap, values={"cap": cap})
    text = decode_text(raw, "card.json")
    doc = loads_text(text, max_depth=limits.max_json_depth, what="card.json")
    if not is_card(doc):
        refuse("card.json in the CHARX is not a character card", "file")
    check_batch(count_card_entries(doc), limits)
    book = read_card(doc, fallback_name=fallback_name, how=FORMAT_SUFFIX)
    if "module.risum" in names:
        book = replace(book, notes=book.notes + (Phrase("the RisuAI module (module.risum) is not read"),))
    return book
