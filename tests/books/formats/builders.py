"""Small hand-made files for tests (no corpus needed)."""
from __future__ import annotations

import base64
import io
import json
import struct
import zipfile
import zlib
from typing import Any

from books.formats.card_png import PNG_SIGNATURE, minimal_png


def st_entry(uid: int, **fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "uid": uid,
        "key": [f"key{uid}"],
        "keysecondary": [],
        "comment": f"Entry {uid}",
        "content": f"Lore number {uid}: the harbour town keeps its doors on the first floor.",
    }
    entry.update(fields)
    return entry


def world(entries: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    return {**top, "entries": {str(e["uid"]): e for e in entries}}


def world_bytes(count: int, **fields: Any) -> bytes:
    return json.dumps(world([st_entry(i, **fields) for i in range(count)])).encode("utf-8")


def card(book: dict[str, Any] | None, *, spec: str = "chara_card_v2") -> dict[str, Any]:
    data: dict[str, Any] = {"name": "Tester", "description": "", "first_mes": "Hi", "extensions": {}}
    if book is not None:
        data["character_book"] = book
    return {"spec": spec, "spec_version": "2.0" if spec.endswith("v2") else "3.0", "data": data}


def card_book(count: int = 2) -> dict[str, Any]:
    return {
        "name": "Card book",
        "extensions": {},
        "entries": [
            {
                "id": i,
                "keys": [f"word{i}"],
                "content": f"Card lore {i}: the lighthouse never goes out at night.",
                "enabled": True,
                "insertion_order": 100,
                "extensions": {},
            }
            for i in range(count)
        ],
    }


def chunk(kind: bytes, body: bytes, *, crc: int | None = None) -> bytes:
    value = zlib.crc32(kind + body) & 0xFFFFFFFF if crc is None else crc
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", value)


def png_with(*chunks: bytes, image: bytes | None = None) -> bytes:
    """``image`` (default: a generated one) with ``chunks`` inserted before IEND."""
    base = image or minimal_png(2, 2)
    assert base.endswith(chunk(b"IEND", b""))
    return base[: -12] + b"".join(chunks) + chunk(b"IEND", b"")


def chara_chunk(doc: Any, keyword: bytes = b"chara") -> bytes:
    return chunk(b"tEXt", keyword + b"\x00" + base64.b64encode(json.dumps(doc).encode("utf-8")))


def charx(members: dict[str, bytes | str], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, body in members.items():
            archive.writestr(zipfile.ZipInfo(name), body, compress_type=compression)
    return buffer.getvalue()


def nested(depth: int) -> str:
    """A world-info file whose JSON nests exactly ``depth`` brackets deep."""
    # {"entries": {"0": {..., "deep": <lists>}}} — the outer three objects count.
    inner = "[" * (depth - 3) + "]" * (depth - 3)
    entry = json.dumps(st_entry(0))[:-1] + ', "deep": ' + inner + "}"
    return '{"entries": {"0": ' + entry + "}}"


__all__ = ["PNG_SIGNATURE"]
