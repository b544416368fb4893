"""Character cards in PNG files: reader and writer.

A card PNG carries the card JSON, base64-encoded, in a text chunk: ``ccv3``
(V3) and/or ``chara`` (V1/V2, sometimes V3). ``ccv3`` is preferred when both
are present (CCv3 spec); if it cannot be decoded the ``chara`` chunk is used
and the receipt says so. ``tEXt``, ``zTXt`` and ``iTXt`` (compressed or not)
are read. The PNG structure is checked chunk by chunk: a chunk longer than
the file, a missing ``IEND`` (truncation), a card chunk whose CRC does not
match, or a compressed chunk that inflates past the card-JSON limit
(decompression bomb) refuse the file.

The writer embeds a ``chara_card_v2`` card in a ``chara`` ``tEXt`` chunk. It
reuses the source card's image when there is one (dropping its old
``chara``/``ccv3`` chunks, or a stale ``ccv3`` would win on re-import) and
otherwise generates a small valid PNG itself.
"""
from __future__ import annotations

import base64
import binascii
import json
import struct
import zlib
from dataclasses import replace
from typing import Any

from books.formats.card import card_document, count_card_entries, is_card, read_card
from books.formats.jsonio import check_size, loads_text, refuse, too_large
from books.formats.limits import FormatLimits, check_batch
from books.formats.model import ImportedBook
from lore_platform.errors import DomainError, Phrase, Term

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CARD_KEYWORDS = ("ccv3", "chara")
FORMAT_SUFFIX = "png"
# PNG spec: chunk lengths are at most 2^31 - 1.
MAX_CHUNK = 2**31 - 1
# What a refusal calls the card chunk it read, one per keyword of ``CARD_KEYWORDS``.
CHUNK_NAMES = {"ccv3": Term("the PNG's 'ccv3' chunk"), "chara": Term("the PNG's 'chara' chunk")}


def iter_chunks(data: bytes) -> list[tuple[bytes, int, int]]:
    """(type, start of data, length) of every chunk up to IEND; refuses broken files."""
    if not data.startswith(PNG_SIGNATURE):
        refuse("not a PNG file (bad signature)", "file")
    chunks: list[tuple[bytes, int, int]] = []
    offset = len(PNG_SIGNATURE)
    size = len(data)
    while True:
        if offset + 12 > size:
            refuse("the PNG is truncated (no IEND chunk)", "file")
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        if length > MAX_CHUNK or offset + 12 + length > size:
            refuse(
                "PNG chunk {chunk} claims {length:,} bytes but the file has only {left:,} left",
                "file",
                values={"chunk": repr(kind), "length": length, "left": size - offset - 12},
                chunk=kind.decode("latin-1"),
            )
        if not kind.isalpha():
            refuse("corrupt PNG chunk type {chunk} at byte {offset}", "file",
                   values={"chunk": repr(kind), "offset": offset})
        if not chunks and kind != b"IHDR":
            refuse("corrupt PNG: the first chunk is not IHDR", "file")
        chunks.append((kind, offset + 8, length))
        offset += 12 + length
        if kind == b"IEND":
            return chunks


def _crc_ok(data: bytes, start: int, length: int) -> bool:
    (stored,) = struct.unpack(">I", data[start + length : start + length + 4])
    return bool(zlib.crc32(data[start - 4 : start + length]) & 0xFFFFFFFF == stored)


def _inflate(payload: bytes, cap: int, chunk: dict[str, str]) -> bytes:
    """``chunk`` names the chunk in a refusal: its ``kind`` (``zTXt``) and ``keyword`` (``'chara'``)."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(payload, cap + 1)
    except zlib.error as exc:
        refuse("PNG {kind} chunk {keyword}: corrupt compressed text ({error})", "file",
               values={**chunk, "error": str(exc)})
    if len(out) > cap or inflater.unconsumed_tail:
        too_large("PNG {kind} chunk {keyword} inflates past {cap:,} bytes (decompression bomb or oversize card)",
                  cap, values={**chunk, "cap": cap})
    return out


def _text_chunks(data: bytes, chunks: list[tuple[bytes, int, int]], limits: FormatLimits) -> dict[str, bytes]:
    """keyword → raw text (bytes) of the first card chunk of each keyword."""
    found: dict[str, bytes] = {}
    for kind, start, length in chunks:
        if kind not in (b"tEXt", b"zTXt", b"iTXt"):
            continue
        body = data[start : start + length]
        keyword, sep, rest = body.partition(b"\x00")
        name = keyword.decode("latin-1").lower()
        if not sep or name not in CARD_KEYWORDS or name in found:
            continue
        chunk = {"kind": kind.decode(), "keyword": repr(name)}
        if not _crc_ok(data, start, length):
            refuse("PNG {kind} chunk {keyword} is corrupt (CRC mismatch)", "file", values=chunk, chunk=name)
        if len(rest) > limits.max_card_json_bytes * 2:
            too_large("PNG {kind} chunk {keyword} is larger than the card limit", limits.max_card_json_bytes,
                      values=chunk)
        if kind == b"tEXt":
            found[name] = rest
        elif kind == b"zTXt":
            if not rest or rest[0] != 0:
                refuse("PNG {kind} chunk {keyword} uses an unknown compression method", "file", values=chunk)
            found[name] = _inflate(rest[1:], limits.max_card_json_bytes * 2, chunk)
        else:  # iTXt: flag, method, language\0, translated keyword\0, text
            if len(rest) < 2:
                refuse("PNG {kind} chunk {keyword} is truncated", "file", values=chunk)
            flag, method = rest[0], rest[1]
            parts = rest[2:].split(b"\x00", 2)
            if len(parts) != 3:
                refuse("PNG {kind} chunk {keyword} is truncated", "file", values=chunk)
            text = parts[2]
            if flag == 1:
                if method != 0:
                    refuse("PNG {kind} chunk {keyword} uses an unknown compression method", "file", values=chunk)
                text = _inflate(text, limits.max_card_json_bytes * 2, chunk)
            found[name] = text
    return found


def _decode_card_text(raw: bytes, limits: FormatLimits, what: str) -> Any:
    stripped = raw.strip()
    if stripped.startswith(b"{"):
        payload = stripped  # a few tools store the JSON itself
    else:
        compact = b"".join(stripped.split())
        compact += b"=" * (-len(compact) % 4)
        try:
            payload = base64.b64decode(compact, validate=True)
        except (binascii.Error, ValueError):
            refuse("{what} is not base64-encoded card JSON", "file", values={"what": what})
    check_size(payload, limits.max_card_json_bytes, what)
    if payload.startswith(b"\xef\xbb\xbf"):
        payload = payload[3:]
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        refuse("{what} is not valid UTF-8 (byte {byte})", "file", values={"what": what, "byte": exc.start})
    return loads_text(text, max_depth=limits.max_json_depth, what=what)


def read_png(data: bytes, *, fallback_name: str, limits: FormatLimits) -> ImportedBook:
    """A card PNG: its embedded book (``ccv3`` preferred over ``chara``)."""
    check_size(data, limits.max_png_bytes, Term("the PNG card"))
    chunks = iter_chunks(data)
    texts = _text_chunks(data, chunks, limits)
    if not texts:
        refuse("the PNG has no 'chara' or 'ccv3' chunk: not a character card", "file")
    notes: list[str] = []
    failure = None
    for keyword in CARD_KEYWORDS:
        if keyword not in texts:
            continue
        what = CHUNK_NAMES[keyword]
        try:
            doc = _decode_card_text(texts[keyword], limits, what)
            if not is_card(doc):
                refuse("{what} does not hold a character card", "file", values={"what": what})
            check_batch(count_card_entries(doc), limits)
            book = read_card(doc, fallback_name=fallback_name, png=data, how=FORMAT_SUFFIX)
        except DomainError as exc:
            if failure is None:
                failure = exc
            if keyword == "ccv3" and "chara" in texts:
                notes.append(Phrase("the 'ccv3' chunk could not be read ({error}); used the 'chara' chunk",
                                    values={"error": exc}))
                continue
            raise failure from None
        if keyword == "ccv3" and "chara" in texts:
            notes.append(Phrase("read the 'ccv3' chunk (preferred over 'chara')"))
        return replace(book, notes=book.notes + tuple(notes))
    refuse("the PNG has no readable card chunk", "file")


# --- writer -------------------------------------------------------------------------


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def minimal_png(width: int = 64, height: int = 64) -> bytes:
    """A small valid RGB PNG (a plain parchment-coloured square)."""
    row = b"\x00" + bytes((0xE8, 0xDC, 0xC0)) * width
    pixels = zlib.compress(row * height, 9)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return PNG_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", pixels) + _chunk(b"IEND", b"")


def embed_card(image: bytes, card: dict[str, Any]) -> bytes:
    """``image`` with its card chunks replaced by one ``chara`` tEXt chunk."""
    chunks = iter_chunks(image)
    out = [PNG_SIGNATURE]
    payload = base64.b64encode(json.dumps(card, ensure_ascii=False).encode("utf-8"))
    for kind, start, length in chunks:
        raw = image[start - 8 : start + length + 4]
        if kind in (b"tEXt", b"zTXt", b"iTXt"):
            keyword = image[start : start + length].partition(b"\x00")[0].decode("latin-1").lower()
            if keyword in CARD_KEYWORDS:
                continue
        if kind == b"IEND":
            out.append(_chunk(b"tEXt", b"chara\x00" + payload))
        out.append(raw)
    return b"".join(out)


def write_card_png(book: ImportedBook, image: bytes | None = None) -> bytes:
    """A Character Card V2 PNG with the book embedded.

    ``image`` (a PNG) wins; else the source card's picture; else a generated one.
    """
    base = image or (book.card.png if book.card is not None else None) or minimal_png()
    return embed_card(base, card_document(book))
