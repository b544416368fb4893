"""Fuzzing every reader (hypothesis): whatever the bytes, a reader returns a
book or raises one of our DomainError subclasses — never anything else. A
book a reader returns always maps for every profile and round-trips through
every writer."""
from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from books.formats import EXPORT_FORMATS, export_book, map_for_profile, read_book
from books.formats.model import PROFILES
from lore_platform.errors import DomainError
from tests.books.formats.builders import card, card_book, chara_chunk, charx, png_with, st_entry, world

# LOREWEAVE_FUZZ_EXAMPLES raises the count for a long run; no example database
# is written into the checkout.
FUZZ = settings(
    max_examples=int(os.environ.get("LOREWEAVE_FUZZ_EXAMPLES", "120")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=12)
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
SPECIAL = st.sampled_from(
    ["before_char", "after_char", "1", "0", "true", "false", "", "/re+/i", "a, b", -1, 0, 1, 2, 3, 4, 7, 10, 100, 101,
     1000, 1001, 2**31, [], {}, ["a", ""], ["/x/"], {"isExclude": True, "names": ["a"]}, "@@depth 2\nlore"]
)  # fmt: skip
VALUES = SPECIAL | JSON_VALUES
ENTRY_FIELDS = [
    # SillyTavern world info
    "uid", "key", "keysecondary", "comment", "content", "constant", "selective", "selectiveLogic", "order", "position",
    "disable", "probability", "useProbability", "depth", "group", "groupWeight", "sticky", "role", "scanDepth",
    "caseSensitive", "matchWholeWords", "displayIndex", "characterFilter", "triggers", "delayUntilRecursion",
    # Character Book V2/V3 and look-alikes
    "id", "keys", "secondary_keys", "insertion_order", "insertionOrder", "enabled", "name", "title", "priority",
    "use_regex", "case_sensitive", "extensions", "value", "text", "loreweave",
    # NovelAI, Agnai, RisuAI, KoboldAI, native
    "displayName", "forceActivation", "contextConfig", "entry", "keywords", "weight", "secondkey", "insertorder",
    "alwaysActive", "activationPercent", "mode", "secondary_logic", "placement", "channels", "extra",
]  # fmt: skip
ENTRY = st.dictionaries(st.sampled_from(ENTRY_FIELDS), VALUES, max_size=10) | st.builds(
    lambda extra: {**st_entry(0), **extra}, st.dictionaries(st.sampled_from(ENTRY_FIELDS), VALUES, max_size=4)
)
ENTRIES = (
    st.lists(ENTRY, max_size=4)
    | st.dictionaries(st.sampled_from(["0", "1", "2", "7", "x", "-1", "01"]), ENTRY, max_size=4)
    | JSON_VALUES
)
BOOK_KEYS = ["name", "description", "scan_depth", "scanDepth", "token_budget", "recursive_scanning", "originalData",
             "extensions", "loreweave", "settings", "categories", "folders"]  # fmt: skip
BOOK_EXTRA = st.dictionaries(st.sampled_from(BOOK_KEYS), VALUES, max_size=3)


def _doc(kind: str, entries: Any, extra: dict[str, Any], value: Any) -> Any:
    if kind == "world":
        return {**extra, "entries": entries}
    if kind == "card":
        return {"spec": value if value in ("chara_card_v2", "chara_card_v3") else "chara_card_v2",
                "data": {"name": "x", "character_book": {**extra, "entries": entries}}}  # fmt: skip
    if kind == "card_raw":
        return {"spec": "chara_card_v3", "data": value}
    if kind == "lorebook_v3":
        return {"spec": "lorebook_v3", "data": {**extra, "entries": entries}}
    if kind == "novelai":
        return {"lorebookVersion": value, "entries": entries, **extra}
    if kind == "story":
        return {"storyContainerVersion": 1, "metadata": value, "content": {"lorebook": {"entries": entries}}}
    if kind == "agnai":
        return {"kind": "memory", "entries": entries, **extra}
    if kind == "risu":
        return {"type": "risu", "ver": 1, "data": entries}
    if kind == "kobold":
        return {"worldinfo": entries, "prompt": value}
    if kind == "native":
        return {"format": "loreweave-native", "version": value if value in (1, 2, "1") else 1,
                "books": [{**extra, "entries": entries, "collection": value}]}  # fmt: skip
    if kind == "list":
        return entries if isinstance(entries, list) else [entries]
    return value


DOCUMENTS = st.builds(
    _doc,
    st.sampled_from(["world", "card", "card_raw", "lorebook_v3", "novelai", "story", "agnai", "risu", "kobold",
                     "native", "list", "anything"]),  # fmt: skip
    ENTRIES,
    BOOK_EXTRA,
    VALUES,
)


def exercise(data: bytes) -> None:
    try:
        book = read_book(data, filename="fuzz.json")
    except DomainError:
        return
    for profile in PROFILES:
        try:
            mapped, receipt = map_for_profile(book, profile)
        except DomainError:
            continue
        json.dumps(receipt)
        assert receipt["added"] == len(mapped)
    for to in EXPORT_FORMATS:
        again = read_book(export_book(book, to))
        if book.entries and not to.startswith("card") or again.entries:
            assert again.entries == book.entries, to


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes(data: bytes) -> None:
    exercise(data)


@FUZZ
@given(DOCUMENTS)
def test_structured_documents(doc: Any) -> None:
    exercise(json.dumps(doc).encode("utf-8"))


SEEDS = [
    json.dumps(world([st_entry(0, position=4, group="g", sticky=2), st_entry(1, key="a, b")])).encode(),
    json.dumps(card(card_book(2), spec="chara_card_v3")).encode(),
    png_with(chara_chunk(card(card_book(2)))),
    charx({"card.json": json.dumps(card(card_book(2), spec="chara_card_v3"))}),
    json.dumps({"lorebookVersion": 4, "entries": [{"text": "x", "keys": ["a"], "contextConfig": {}}]}).encode(),
]


@FUZZ
@given(
    st.sampled_from(SEEDS),
    st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), min_size=1, max_size=6),
    st.integers(min_value=0),
)
def test_mutated_files(seed: bytes, flips: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(seed)
    for where, value in flips:
        data[where % len(data)] = value
    exercise(bytes(data))
    exercise(bytes(data[: cut % (len(data) + 1)]))
