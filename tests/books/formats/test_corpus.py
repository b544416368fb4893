"""Every file of the shared corpus imports with MANIFEST.md's entry count, or is
refused with the reason MANIFEST.md predicts (I-1, I-4)."""
from __future__ import annotations

import pytest

from books.formats import map_for_profile, read_book
from books.formats.model import PROFILES
from lore_platform.errors import DomainError, ValidationFailed
from tests.books.formats.corpus import corpus_files, manifest, predicted_refusal
from tests.shared_data import require_shared

FILES = corpus_files() or ["<corpus missing>"]


def _read(relpath: str) -> bytes:
    return (require_shared("corpus") / relpath).read_bytes()


def test_manifest_describes_every_corpus_file() -> None:
    require_shared("corpus")
    assert set(corpus_files()) == set(manifest()), "MANIFEST.md and the corpus folder disagree"


@pytest.mark.parametrize("relpath", FILES)
def test_corpus_file_imports_or_is_refused_as_predicted(relpath: str) -> None:
    data = _read(relpath)
    row = manifest()[relpath]
    if row.entries is None:
        with pytest.raises(ValidationFailed) as refused:
            read_book(data, filename=relpath.rsplit("/", 1)[-1])
        assert predicted_refusal(row) in refused.value.message
        assert refused.value.rule == "I-1"
        return
    book = read_book(data, filename=relpath.rsplit("/", 1)[-1])
    assert len(book.entries) == row.entries
    assert book.name
    for profile in PROFILES:
        try:
            mapped, receipt = map_for_profile(book, profile)
        except DomainError as exc:
            # Only a per-entry limit of a stricter profile may refuse a real file.
            assert profile in ("server", "smart") and exc.rule in ("S-3", "W-12"), exc.as_dict()
            continue
        assert receipt["added"] == len(mapped)
        assert receipt["added"] + receipt["skipped_count"] == row.entries
        assert all(item["reason"] for item in receipt["skipped"])
        assert sum(receipt["unsupported_counts"].values()) == sum(len(u["settings"]) for u in receipt["unsupported"])


def test_a_card_without_a_book_changes_nothing() -> None:
    for relpath in ("card-json/sillytavern_aqua_v1_2022.json", "png-ccv3/user_lingzi_zh_no_book.png",
                    "charx/fixture_tavernkit_test_character.charx", "png-chara/sillytavern_aqua_v1_2023-01.png"):
        book = read_book(_read(relpath))
        assert book.card_without_book and book.entries == ()
        _, receipt = map_for_profile(book, "classic")
        assert receipt["added"] == 0 and receipt["card_without_book"] is True


def test_ccv3_chunk_is_preferred_over_chara() -> None:
    book = read_book(_read("png-ccv3/sillytavern_seraphina_2024-09.png"))
    assert book.source_format == "card-v3-png"
    assert any("ccv3" in note for note in book.notes)


def test_corpus_readings_keep_what_the_manifest_points_out() -> None:
    chub = read_book(_read("st-worldinfo/chub_hybrid_lythora_station.json"))
    assert chub.name == "Lythora Station: Automated Research Outpost"
    assert chub.settings.scan_depth == 9 and chub.settings.token_budget == 1000 and chub.settings.recursive is True
    assert any(e.extra["st"].get("position") == 10 for e in chub.entries if "st" in e.extra)
    assert chub.entries[0].priority == 5 and chub.entries[0].extra["wi"]["name"] == "Lythora Station Overview"

    douluo = read_book(_read("st-worldinfo/user_douluo_fullwidth_comma_key.json"))
    assert any("等级，封号斗罗" in e.keys for e in douluo.entries)  # one key, as written

    fallout = read_book(_read("png-ccv3/user_fallout_western_us.png"))
    positions = {e.extra.get("st", {}).get("position", e.placement) for e in fallout.entries}
    assert 2 in positions  # "2" / extensions.position 2 read as AN top

    fixture = read_book(_read("st-worldinfo/fixture_tavernkit_world_one.json"))
    assert fixture.name == "World One" and fixture.settings.scan_depth == 2 and fixture.settings.recursive is False
    assert fixture.entries[0].extra["st"]["uid"] == 1  # string uid "1"

    kobold = read_book(_read("kobold-aid-worldinfo/kobold_story_half_life_2.json"))
    assert kobold.entries[0].keys == ("Civil Protection", "Metro cop", "CP", "Officer", "Cop")

    eu4 = read_book(_read("st-worldinfo/user_eu4_originalData.json"))
    assert "originalData" in eu4.extra["wi"]

    nai = read_book(_read("novelai/nai_tool_test_v6.lorebook"))
    assert nai.extra["novelai"]["lorebookVersion"] == 6 and nai.entries[1].order == 500


# --- issue 14, point 12: fidelity on real files ------------------------------------------------

import json  # noqa: E402
import re  # noqa: E402

from books.formats import export_book  # noqa: E402


def _raw_st_entries(doc: dict) -> list[dict]:
    entries = doc.get("entries", {})
    return list(entries.values()) if isinstance(entries, dict) else list(entries)


GROUP_SCORING_FILES = [
    f for f in corpus_files() if f.startswith("st-worldinfo/") and re.search(rb'"useGroupScoring":\s*false', _read(f))
] or ["<corpus missing>"]


@pytest.mark.parametrize("relpath", GROUP_SCORING_FILES)
def test_use_group_scoring_false_survives_read_export_read(relpath: str) -> None:
    """An explicit false is the entry's own choice; null means the global setting."""
    raw = _raw_st_entries(json.loads(_read(relpath)))
    book = read_book(_read(relpath))
    for to in ("sillytavern", "native"):
        again = read_book(export_book(book, to))
        exported = _raw_st_entries(json.loads(export_book(again, "sillytavern")))
        for i, (before, after) in enumerate(zip(raw, exported)):
            assert after["useGroupScoring"] == before.get("useGroupScoring"), (to, i)


CARD_FILES = [f for f in corpus_files() if f.startswith(("card-json/", "png-", "charx/"))] or ["<corpus missing>"]


@pytest.mark.parametrize("relpath", CARD_FILES)
def test_card_positions_become_sillytavern_integers(relpath: str) -> None:
    book = read_book(_read(relpath))
    for entry in _raw_st_entries(json.loads(export_book(book, "sillytavern"))):
        assert isinstance(entry["position"], int) and not isinstance(entry["position"], bool)


@pytest.mark.parametrize("spelling, expected", [("before_char_defs", 1), ("after_char_defs", 1), ("before_char", 0)])
def test_string_card_positions_map_as_sillytavern_reads_them_and_are_flagged(spelling: str, expected: int) -> None:
    """SillyTavern: ``extensions.position ?? (position === 'before_char' ? 0 : 1)``."""
    card = json.loads(_read("card-json/kj_fortune_teller_v3.json"))
    for entry in card["data"]["character_book"]["entries"]:
        entry["extensions"]["position"] = spelling  # a string where an integer belongs
        entry["position"] = spelling
    book = read_book(json.dumps(card).encode())
    exported = _raw_st_entries(json.loads(export_book(book, "sillytavern")))
    assert [e["position"] for e in exported] == [expected] * len(exported)
    flagged = [note for note in book.notes if spelling in note]
    assert len(flagged) == (0 if spelling == "before_char" else len(exported))
    _, receipt = map_for_profile(book, "sillytavern")
    assert all(note in receipt["warnings"] for note in flagged)


def test_a_novelai_scenario_imports_its_lorebook() -> None:
    lorebook = json.loads(_read("novelai/nai_ripple_v4.lorebook"))
    scenario = {"scenarioVersion": 3, "title": "Ripple", "prompt": "Once…", "lorebook": lorebook}
    book = read_book(json.dumps(scenario).encode(), filename="ripple.scenario")
    plain = read_book(_read("novelai/nai_ripple_v4.lorebook"))
    assert book.name == "Ripple" and book.source_format == "novelai-scenario"
    assert len(book.entries) == len(plain.entries) > 0
    for a, b in zip(plain.entries, book.entries):
        assert a == b
    untitled = read_book(json.dumps({**scenario, "title": ""}).encode(), filename="My Story.scenario")
    assert untitled.name == "My Story"


WORLD_FILES = [f for f in corpus_files() if f.startswith("st-worldinfo/")] or ["<corpus missing>"]


def _same_meaning(name: str, before: object, after: object) -> bool:
    """SillyTavern reads these pairs alike; everything else must come back as written."""
    if name == "role" and before is None:
        return after == 0  # null role = system
    if name == "uid" and isinstance(before, str) and before.isdigit():
        return after == int(before)
    if name == "key" and isinstance(before, list):
        return after == [k for k in before if isinstance(k, str) and k.strip()]  # blank keys match nothing
    if name == "comment" and before == "":
        return isinstance(after, str)  # an empty name is taken from a Chub ``name`` field
    return name == "extensions"  # a Chub hybrid's V2 mirror: its settings travel in SillyTavern's own fields


@pytest.mark.parametrize("relpath", WORLD_FILES)
def test_every_sillytavern_field_of_a_real_file_survives_import_and_export(relpath: str) -> None:
    """Field by field, file → import → export → import → export, explicit defaults included (I-6)."""
    raw = _raw_st_entries(json.loads(_read(relpath)))
    book = read_book(_read(relpath))
    first = _raw_st_entries(json.loads(export_book(book, "sillytavern")))
    second = _raw_st_entries(json.loads(export_book(read_book(export_book(book, "sillytavern")), "sillytavern")))
    assert first == second
    for i, (before, after) in enumerate(zip(raw, first)):
        for name, value in before.items():
            if name in after and after[name] != value:
                assert _same_meaning(name, value, after[name]), (i, name, value, after[name])
