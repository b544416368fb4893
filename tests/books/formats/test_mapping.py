"""Profile mapping (I-5), the receipt (I-4) and the duplicate rule (I-2)."""
from __future__ import annotations

import json

import pytest

from books.formats import entry_fingerprint, map_for_profile, read_book
from books.formats.model import ImportedBook, ImportedEntry
from lore_platform.errors import ValidationFailed
from tests.books.formats.builders import st_entry, world


def _read(*entries: dict) -> ImportedBook:
    return read_book(json.dumps(world(list(entries))).encode())


def _unsupported(receipt: dict, index: int) -> list[str]:
    return next((u["settings"] for u in receipt["unsupported"] if u["index"] == index), [])


def test_server_maps_positions_2_to_7_before_persona() -> None:
    book = _read(*(st_entry(p, position=p) for p in range(8)))
    mapped, receipt = map_for_profile(book, "server")
    assert [e.placement for e in mapped] == ["before_persona", "after_persona"] + ["before_persona"] * 6
    assert receipt["unsupported_counts"] == {
        "position:an_bottom": 1,
        "position:an_top": 1,
        "position:at_depth": 1,
        "position:em_bottom": 1,
        "position:em_top": 1,
        "position:outlet": 1,
    }
    assert "world-info position 4 (at_depth) → before persona" in receipt["changes"][2]["changes"]


def test_server_keeps_regex_keys_inert_and_names_them() -> None:
    book = _read(st_entry(0, key=["/dragons?/i", "plain"]))
    mapped, receipt = map_for_profile(book, "server")
    assert mapped[0].keys == ("/dragons?/i", "plain")  # kept as written, literal
    assert "regex_keys" in _unsupported(receipt, 0)
    assert map_for_profile(book, "sillytavern")[1]["unsupported"] == []


def test_smart_reads_keys_as_aliases_and_needs_a_title() -> None:
    book = _read(st_entry(0, comment="", key=["Saltmere", "harbour"]), st_entry(1, comment="", key=[]))
    mapped, receipt = map_for_profile(book, "smart")
    assert receipt["keys_as"] == "aliases"
    assert mapped[0].keys == ("Saltmere", "harbour") and mapped[0].title == "Saltmere"
    assert mapped[1].title.startswith("Lore number 1")
    assert receipt["changes"][0]["changes"][0].startswith("title empty")
    assert map_for_profile(book, "classic")[0][0].title == ""  # classic keeps an empty comment
    assert map_for_profile(book, "classic")[1]["keys_as"] == "triggers"


def test_smart_reports_keyword_machinery_it_does_not_have() -> None:
    book = _read(st_entry(0, keysecondary=["sea"], probability=50, order=300, scanDepth=5, role=2))
    settings = _unsupported(map_for_profile(book, "smart")[1], 0)
    assert {"secondary_keys", "probability", "order", "scan_depth", "role"} <= set(settings)
    assert _unsupported(map_for_profile(book, "classic")[1], 0) == []


def test_groups_recursion_and_timers_are_counted_and_named() -> None:
    book = _read(
        st_entry(0, group="weather", groupWeight=30, excludeRecursion=True, sticky=2, cooldown=1, delay=3),
        st_entry(1, triggers=["continue"], preventRecursion=True, delayUntilRecursion=2, groupWeight=5),
        st_entry(2, characterFilter={"isExclude": True, "names": ["Amy"], "tags": []}, outletName="x"),
    )
    _, receipt = map_for_profile(book, "classic")
    assert set(_unsupported(receipt, 0)) == {"group", "groupWeight", "excludeRecursion", "sticky", "cooldown", "delay"}
    # a weight without a group does nothing, so it is not reported
    assert set(_unsupported(receipt, 1)) == {"triggers", "preventRecursion", "delayUntilRecursion"}
    assert set(_unsupported(receipt, 2)) == {"characterFilter", "outletName"}
    assert receipt["unsupported_counts"]["sticky"] == 1
    # nothing is lost: the settings stay in extra and travel on export
    assert book.entries[0].extra["st"]["sticky"] == 2


def test_decorators_are_preserved_and_unknown_ones_reported() -> None:
    content = "@@probability 50\n@@depth 2\n@@@role assistant\nThe lighthouse burns whale oil."
    book = _read(st_entry(0, content=content))
    mapped, receipt = map_for_profile(book, "classic")
    assert mapped[0].content == content
    assert _unsupported(receipt, 0) == ["decorator:@@depth"]
    assert _unsupported(map_for_profile(book, "server")[1], 0) == ["decorators"]


def test_unusable_and_duplicate_entries_are_skipped_with_a_reason() -> None:
    book = _read(
        st_entry(0),
        st_entry(1, content="   "),
        st_entry(2, comment="ENTRY 0 ", content="lore number 0:  the harbour town keeps its doors on the first floor."),
    )
    mapped, receipt = map_for_profile(book, "classic")
    assert receipt["added"] == 1 and len(mapped) == 1 and mapped[0].position == 0
    assert receipt["skipped"] == [
        {"index": 1, "entry": "Entry 1", "reason": "empty content"},
        {"index": 2, "entry": "ENTRY 0", "reason": "duplicate of entry #0 in this file"},
    ]


def test_append_skips_entries_that_already_exist() -> None:
    book = _read(st_entry(0), st_entry(1))
    existing = {entry_fingerprint("entry 0", "LORE NUMBER 0: the harbour town keeps its doors on the first floor.")}
    mapped, receipt = map_for_profile(book, "classic", existing=existing)
    assert [e.title for e in mapped] == ["Entry 1"]
    assert receipt["skipped"][0]["reason"] == "already in the book (same title and content)"


def test_duplicate_rule() -> None:
    assert entry_fingerprint("Ｓaltmere", "A  town.\n") == entry_fingerprint("saltmere", "a town.")
    assert entry_fingerprint("Saltmere", "A town.") != entry_fingerprint("Saltmere", "A city.")
    assert entry_fingerprint("Saltmere", "A town.") != entry_fingerprint("Harbour", "A town.")


def test_probability_null_is_100_and_zero_stays_zero() -> None:
    book = _read(st_entry(0, probability=None), st_entry(1, probability=0), st_entry(2, probability=100),
                 st_entry(3, probability=40, useProbability=False))
    assert [e.probability for e in book.entries] == [None, 0, None, None]
    assert book.entries[3].extra["st"] == {"useProbability": False, "probability": 40}


def test_unknown_profile_is_refused() -> None:
    with pytest.raises(ValidationFailed):
        map_for_profile(ImportedBook(name="b"), "nonsense")


def test_foreign_settings_are_reported() -> None:
    nai = ImportedEntry(
        content="The library of Alexandria.",
        extra={"novelai": {"keyRelative": True, "contextConfig": {"insertionPosition": 3}}},
    )
    risu = ImportedEntry(content="Risu lore here.", extra={"risu": {"useRegex": True}})
    _, receipt = map_for_profile(ImportedBook(name="b", entries=(nai, risu)), "sillytavern")
    assert receipt["unsupported"][0]["settings"] == ["novelai:keyRelative", "novelai:contextConfig.insertionPosition"]
    assert receipt["unsupported"][1]["settings"] == ["risu:useRegex"]
