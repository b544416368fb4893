"""Hostile input is refused cleanly (point 7 of the import issue): only our
DomainError subclasses, with a message, a field and a rule; never a crash."""
from __future__ import annotations

import json
import time
import zipfile
import zlib

import pytest

from books.formats import read_book
from books.formats.limits import limits_with
from lore_platform.errors import DomainError, LimitExceeded, PayloadTooLarge, ValidationFailed
from tests.books.formats.builders import (
    card,
    card_book,
    chara_chunk,
    charx,
    chunk,
    png_with,
    st_entry,
    world,
)


def refused(data: bytes, kind: type[DomainError] = ValidationFailed, **kwargs: object) -> DomainError:
    with pytest.raises(kind) as info:
        read_book(data, **kwargs)  # type: ignore[arg-type]
    error = info.value
    assert error.message and error.rule, error.as_dict()
    json.dumps(error.as_dict())  # renders as JSON, like the API and CLI do
    return error


# --- JSON ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"{ invalid",
        b'{"entries": {"0": {"content": "x"}',  # truncated
        b'{"entries": {"0": {"content": "x"}}} trailing',
        b"[1, 2,",
        b"null",
        b"42",
        b'"a string"',
        b"   \n\t ",
        b"",
    ],
)
def test_malformed_or_truncated_json_is_refused(data: bytes) -> None:
    error = refused(data)
    assert error.rule == "I-1"


def test_truncated_json_says_so() -> None:
    assert "truncated" in refused(b'{"entries": {"0": {"content": ').message


@pytest.mark.parametrize(
    "doc",
    [
        {"entries": "not entries"},
        {"entries": 12},
        {"entries": {"0": "not an entry"}},
        {"entries": [None]},
        {"entries": {"0": st_entry(0, key={"not": "keys"})}},
        {"entries": {"0": st_entry(0, key=[["nested"]])}},
        {"entries": {"0": st_entry(0, content=["list"])}},
        {"entries": {"0": st_entry(0, comment={"x": 1})}},
        {"entries": {"0": st_entry(0, order="first")}},
        {"entries": {"0": st_entry(0, order=10**12)}},
        {"entries": {"0": st_entry(0, probability=150)}},
        {"entries": {"0": st_entry(0, probability=True)}},
        {"entries": {"0": st_entry(0, disable="maybe")}},
        {"entries": {"0": st_entry(0, role=7)}},
        {"entries": {"0": st_entry(0, selectiveLogic=9)}},
        {"entries": {"0": st_entry(0, scanDepth=-1)}},
        {"entries": {"0": st_entry(0) | {"uid": -3}}},
        {"entries": {"0": st_entry(0) | {"uid": "abc"}}},
        {"scan_depth": "deep", "entries": {}},
        {"spec": "chara_card_v2", "data": "nope"},
        {"spec": "chara_card_v2", "data": {"character_book": {"entries": "x"}}},
        {"spec": "chara_card_v2", "data": {"character_book": {"entries": [{"keys": 5, "content": "x"}]}}},
        {"spec": "chara_card_v2", "data": {"character_book": {"entries": [{"content": "x", "extensions": []}]}}},
        {"lorebookVersion": 4, "entries": {"a": 1}},
        {"lorebookVersion": 4, "entries": [{"text": "x", "contextConfig": []}]},
        {"kind": "memory", "entries": "x"},
        {"type": "risu", "data": [{"content": "x", "activationPercent": "lots"}]},
        {"worldinfo": [{"key": "a", "content": 5.5, "selective": "perhaps"}]},
        {"format": "loreweave-native", "version": 99, "books": []},
        {"format": "loreweave-native", "version": 1, "books": [{"entries": [{"role": "narrator"}]}]},
        [1, 2, 3],
        [{"no": "content"}],
        {"title": {"0": "Name"}, "summary": {"0": "…"}},
    ],
)
def test_wrong_types_are_refused(doc: object) -> None:
    error = refused(json.dumps(doc).encode("utf-8"))
    assert error.rule in ("I-1", "I-3")


def test_invalid_utf8_is_refused() -> None:
    data = b'{"entries": {"0": {"content": "caf\xe9"}}}'
    assert "UTF-8" in refused(data).message


def test_utf8_bom_and_utf16_are_read() -> None:
    text = json.dumps(world([st_entry(0)]))
    assert len(read_book(b"\xef\xbb\xbf" + text.encode("utf-8")).entries) == 1
    assert len(read_book(text.encode("utf-16")).entries) == 1


def test_nan_and_infinity_are_refused() -> None:
    refused(b'{"entries": {"0": {"content": "x", "order": NaN}}}')
    refused(b'{"entries": {"0": {"content": "x", "depth": Infinity}}}')


def test_absurdly_long_numbers_are_refused() -> None:
    refused(b'{"entries": {"0": {"content": "x", "order": ' + b"9" * 5000 + b"}}}")
    refused(b'{"entries": {"0": {"content": "x", "unknown": 1e999}}}')  # would parse as inf


def test_unhashable_values_where_names_are_expected() -> None:
    refused(json.dumps({"spec": {"x": 1}, "data": []}).encode())
    refused(json.dumps({"entries": {"0": st_entry(0, role={"x": 1})}}).encode())


def test_duplicate_uids_are_refused() -> None:
    # as duplicate keys of the entries object …
    error = refused(b'{"entries": {"0": {"uid": 0, "content": "a"}, "0": {"uid": 0, "content": "b"}}}')
    assert "duplicate" in error.message
    # … as two entries claiming the same uid …
    error = refused(json.dumps(world([st_entry(0), st_entry(1)]) | {"entries": {"0": st_entry(3), "1": st_entry(3)}}).encode())
    assert "uid 3" in error.message
    # … in a list, and as card ids.
    refused(json.dumps({"entries": [st_entry(2), st_entry(2)]}).encode())
    book = card_book(2)
    book["entries"][1]["id"] = 0
    assert "id 0" in refused(json.dumps(card(book)).encode()).message


def test_deeply_nested_json_is_refused_before_parsing() -> None:
    bomb = b'{"entries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    start = time.perf_counter()
    error = refused(bomb)
    assert "nested" in error.message and error.rule == "I-3"
    assert time.perf_counter() - start < 1.0
    refused(b"[" * 50_000)  # unbalanced as well


def test_ten_thousand_entry_book_is_refused_whole() -> None:
    data = json.dumps({"entries": {str(i): {"content": "x"} for i in range(10_000)}}).encode()
    error = refused(data, LimitExceeded)
    assert error.rule == "I-3" and error.details["actual"] == 10_000


def test_not_a_lorebook_despite_its_extension() -> None:
    data = json.dumps({"title": "x", "summary": "y", "content": "z"}).encode()
    error = refused(data, filename="story.lorebook")
    assert ".lorebook" in error.message and "not a lorebook" in error.message


# --- PNG ----------------------------------------------------------------------------------


def _card_png(count: int = 2) -> bytes:
    return png_with(chara_chunk(card(card_book(count))))


def test_png_card_reads() -> None:
    assert len(read_book(_card_png()).entries) == 2


def test_png_with_a_huge_chunk_is_refused() -> None:
    huge = b"\x7f\xff\xff\xff" + b"tEXt" + b"chara\x00AAAA"
    error = refused(png_with(huge))
    assert "claims" in error.message


def test_png_with_a_corrupt_card_chunk_is_refused() -> None:
    body = b"chara\x00" + b"eyJzcGVjIjogImNoYXJhX2NhcmRfdjIifQ=="
    assert "CRC" in refused(png_with(chunk(b"tEXt", body, crc=1234))).message


def test_truncated_png_is_refused() -> None:
    data = _card_png()
    for cut in (8, 20, len(data) // 2, len(data) - 1):
        refused(data[:cut])


def test_png_chunk_that_is_not_base64_json_is_refused() -> None:
    refused(png_with(chunk(b"tEXt", b"chara\x00%%% not base64 %%%")))
    refused(png_with(chunk(b"tEXt", b"chara\x00" + b"bm90IGpzb24=")))  # "not json"


def test_png_without_a_card_chunk_is_refused() -> None:
    assert "not a character card" in refused(png_with(chunk(b"tEXt", b"Title\x00hello"))).message


def test_png_ztxt_decompression_bomb_is_refused() -> None:
    bomb = zlib.compress(b"A" * (40 * 1024 * 1024), 9)
    error = refused(png_with(chunk(b"zTXt", b"chara\x00\x00" + bomb)), PayloadTooLarge)
    assert "bomb" in error.message


def test_png_itxt_and_ztxt_cards_are_read() -> None:
    import base64

    payload = base64.b64encode(json.dumps(card(card_book(1))).encode())
    itxt = chunk(b"iTXt", b"chara\x00\x01\x00\x00\x00" + zlib.compress(payload))
    assert len(read_book(png_with(itxt)).entries) == 1
    ztxt = chunk(b"zTXt", b"chara\x00\x00" + zlib.compress(payload))
    assert len(read_book(png_with(ztxt)).entries) == 1


def test_corrupt_ccv3_falls_back_to_chara() -> None:
    data = png_with(chunk(b"tEXt", b"ccv3\x00!!!"), chara_chunk(card(card_book(3))))
    book = read_book(data)
    assert len(book.entries) == 3 and any("could not be read" in n for n in book.notes)


# --- CHARX --------------------------------------------------------------------------------


def _card_json(count: int = 2) -> str:
    return json.dumps(card(card_book(count), spec="chara_card_v3"))


def test_charx_reads() -> None:
    book = read_book(charx({"card.json": _card_json(), "assets/icon/main.png": b"\x89PNG"}))
    assert len(book.entries) == 2 and book.source_format == "card-v3-charx"


@pytest.mark.parametrize("name", ["../evil.json", "assets/../../evil", "/etc/passwd", "C:/windows/x", "a\\..\\b"])
def test_charx_path_traversal_is_refused(name: str) -> None:
    error = refused(charx({"card.json": _card_json(), name: b"x"}))
    assert "unsafe path" in error.message


def test_charx_decompression_bomb_is_refused() -> None:
    bomb = '{"spec": "chara_card_v3", "data": {"name": "' + " " * (6 * 1024 * 1024) + '"}}'
    error = refused(charx({"card.json": bomb}), PayloadTooLarge)
    assert "card.json" in error.message
    limits = limits_with({"max_charx_uncompressed_bytes": 10_000})
    many = {"card.json": _card_json(), "assets/big.bin": b"\x00" * 20_000}
    assert "bomb" in refused(charx(many), PayloadTooLarge, limits=limits).message


def test_charx_broken_or_incomplete_is_refused() -> None:
    refused(charx({"assets/main.png": b"x"}))  # no card.json
    refused(charx({"card.json": "{ nope"}))
    refused(charx({"card.json": json.dumps({"hello": 1})}))
    data = charx({"card.json": _card_json()})
    refused(data[: len(data) // 2])
    refused(b"PK\x03\x04" + b"\x00" * 40)
    encrypted = bytearray(charx({"card.json": _card_json()}, compression=zipfile.ZIP_STORED))
    encrypted[6] |= 1  # local header flag
    cd = bytes(encrypted).rfind(b"PK\x01\x02")
    encrypted[cd + 8] |= 1  # central directory flag
    assert "encrypted" in refused(bytes(encrypted)).message
