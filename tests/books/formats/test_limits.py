"""Every import limit, just under and just over (I-3). A refusal happens before
anything exists to write: the plan is never returned, and the CLI leaves its
output untouched (see test_cli)."""
from __future__ import annotations

import json

import pytest

from books.formats import current_limits, plan_book, plan_import, read_book
from books.formats.limits import DEFAULT_LIMITS, MIB, limits_with
from books.formats.model import ImportedBook, ImportedEntry
from lore_platform.errors import LimitExceeded, PayloadTooLarge, ValidationFailed
from tests.books.formats.builders import card, card_book, chara_chunk, charx, nested, png_with, world_bytes


def _book(count: int, content: str = "Lore that is long enough for every profile.", **fields: object) -> ImportedBook:
    entries = tuple(
        ImportedEntry(title=f"Entry {i}", content=f"{content} #{i}", keys=(f"k{i}",), position=i, **fields)  # type: ignore[arg-type]
        for i in range(count)
    )
    return ImportedBook(name="Limits", entries=entries, source_format="test")


def test_defaults_match_the_spec_and_are_shown() -> None:
    shown = current_limits().as_dict()
    assert shown["max_json_bytes"] == 2 * MIB  # I-3
    assert shown["max_import_batch"] == 500  # W-12
    assert {"max_png_bytes", "max_charx_bytes", "max_card_json_bytes"} <= set(shown)


def test_card_limits_are_configurable_and_validated() -> None:
    assert limits_with({"max_png_bytes": 123}).max_png_bytes == 123
    with pytest.raises(ValidationFailed):
        limits_with({"max_pngs": 1})
    with pytest.raises(ValidationFailed):
        limits_with({"max_png_bytes": 0})


def test_json_two_megabytes_just_under_and_over() -> None:
    body = world_bytes(3)
    exact = body + b" " * (DEFAULT_LIMITS.max_json_bytes - len(body))
    assert len(exact) == 2 * MIB
    assert len(read_book(exact).entries) == 3
    with pytest.raises(PayloadTooLarge) as over:
        read_book(exact + b" ")
    assert over.value.rule == "I-3" and over.value.details["limit"] == 2 * MIB


def test_import_batch_just_under_and_over() -> None:
    assert len(read_book(world_bytes(500)).entries) == 500
    with pytest.raises(LimitExceeded) as over:
        read_book(world_bytes(501))
    assert over.value.rule == "I-3" and over.value.details == {"limit": 500, "actual": 501, "unit": "entries"}
    # the same for a card and a CHARX
    with pytest.raises(LimitExceeded):
        read_book(json.dumps(card(card_book(501))).encode())
    with pytest.raises(LimitExceeded):
        read_book(charx({"card.json": json.dumps(card(card_book(501)))}))


def test_nesting_depth_just_under_and_over() -> None:
    depth = DEFAULT_LIMITS.max_json_depth
    assert len(read_book(nested(depth).encode()).entries) == 1
    with pytest.raises(ValidationFailed) as over:
        read_book(nested(depth + 1).encode())
    assert over.value.rule == "I-3"


def test_png_card_size_just_under_and_over() -> None:
    data = png_with(chara_chunk(card(card_book(2))))
    assert len(read_book(data, limits=limits_with({"max_png_bytes": len(data)})).entries) == 2
    with pytest.raises(PayloadTooLarge):
        read_book(data, limits=limits_with({"max_png_bytes": len(data) - 1}))


def test_card_json_size_just_under_and_over() -> None:
    doc = json.dumps(card(card_book(2))).encode()
    data = png_with(chara_chunk(card(card_book(2))))
    limits = limits_with({"max_card_json_bytes": len(doc)})
    assert len(read_book(data, limits=limits).entries) == 2
    with pytest.raises(PayloadTooLarge):
        read_book(data, limits=limits_with({"max_card_json_bytes": len(doc) - 1}))
    archive = charx({"card.json": doc})
    assert len(read_book(archive, limits=limits).entries) == 2
    with pytest.raises(PayloadTooLarge):
        read_book(archive, limits=limits_with({"max_card_json_bytes": len(doc) - 1}))


def test_charx_limits_just_under_and_over() -> None:
    archive = charx({"card.json": json.dumps(card(card_book(1))), "assets/a.png": b"1", "assets/b.png": b"2"})
    assert read_book(archive, limits=limits_with({"max_charx_bytes": len(archive), "max_charx_members": 3}))
    with pytest.raises(PayloadTooLarge):
        read_book(archive, limits=limits_with({"max_charx_bytes": len(archive) - 1}))
    with pytest.raises(PayloadTooLarge):
        read_book(archive, limits=limits_with({"max_charx_members": 2}))


def test_server_entry_caps_just_under_and_over() -> None:
    # S-14: 250 per persona, 250 shared by server-wide books.
    assert len(plan_book(_book(250), profile="server", scope="persona").entries) == 250
    with pytest.raises(LimitExceeded) as over:
        plan_book(_book(251), profile="server", scope="persona")
    assert over.value.rule == "S-14"
    assert plan_book(_book(50), profile="server", scope="server", existing_count=200).entries
    with pytest.raises(LimitExceeded) as pooled:
        plan_book(_book(51), profile="server", scope="server", existing_count=200)
    assert pooled.value.details["existing"] == 200 and pooled.value.details["adding"] == 51 and pooled.value.details["limit"] == 250


def test_smart_entries_per_book_just_under_and_over() -> None:
    assert plan_book(_book(500), profile="smart", existing_count=1500).entries
    with pytest.raises(LimitExceeded) as over:
        plan_book(_book(500), profile="smart", existing_count=1501)
    assert over.value.rule == "W-12"


@pytest.mark.parametrize("profile", ["classic", "sillytavern"])
def test_classic_entries_per_book_just_under_and_over(profile: str) -> None:
    # Issue 29: 20,000 entries per classic or SillyTavern book; an import over it is refused whole.
    assert plan_book(_book(500), profile=profile, existing_count=19_500).entries
    with pytest.raises(LimitExceeded) as over:
        plan_book(_book(500), profile=profile, existing_count=19_501)
    assert over.value.rule == "C-5" and over.value.details["limit"] == 20_000


@pytest.mark.parametrize(("profile", "limit", "rule"), [("smart", 20000, "W-12")])
def test_content_length_just_under_and_over(profile: str, limit: int, rule: str) -> None:
    fits = ImportedBook(name="b", entries=(ImportedEntry(title="Long", content="x" * limit),))
    assert plan_book(fits, profile=profile).receipt["added"] == 1
    over = ImportedBook(name="b", entries=(ImportedEntry(title="Long", content="x" * (limit + 1)),))
    with pytest.raises(LimitExceeded) as refused:
        plan_book(over, profile=profile)
    assert refused.value.rule == rule and refused.value.details["violations"][0]["details"]["actual"] == limit + 1


def test_server_skips_an_entry_over_4000_characters_and_imports_the_rest() -> None:
    """S-3 on import: the converter cannot use it, so it is skipped with its reason (not a refusal)."""
    book = ImportedBook(
        name="b",
        entries=(
            ImportedEntry(title="Fits", content="x" * 4000),
            ImportedEntry(title="Long", content="x" * 4001),
            ImportedEntry(title="Short", content="ok"),
        ),
    )
    receipt = plan_book(book, profile="server").receipt
    assert receipt["added"] == 2 and receipt["skipped_count"] == 1
    assert receipt["skipped"][0]["index"] == 1 and receipt["skipped"][0]["entry"] == "Long"
    assert "4,001 characters" in receipt["skipped"][0]["reason"] and "S-3" in receipt["skipped"][0]["reason"]


def test_smart_minimum_lore_just_under_and_over() -> None:
    book = ImportedBook(
        name="b",
        entries=(ImportedEntry(title="Short", content="y" * 19), ImportedEntry(title="Enough", content="y" * 20)),
    )
    receipt = plan_book(book, profile="smart").receipt
    assert receipt["added"] == 1
    assert receipt["skipped"] == [{"index": 0, "entry": "Short", "reason": "lore shorter than 20 characters (W-12)"}]


def test_smart_aliases_just_under_and_over() -> None:
    lore = "A world book entry long enough."
    ok = ImportedBook(name="b", entries=(ImportedEntry(title="A", content=lore, keys=tuple(f"a{i}" for i in range(50))),))
    assert plan_book(ok, profile="smart").entries
    many = ImportedBook(name="b", entries=(ImportedEntry(title="A", content=lore, keys=tuple(f"a{i}" for i in range(51))),))
    with pytest.raises(LimitExceeded):
        plan_book(many, profile="smart")
    assert plan_book(ImportedBook(name="b", entries=(ImportedEntry(title="A", content=lore, keys=("k" * 120,)),)), profile="smart")
    with pytest.raises(LimitExceeded):
        plan_book(ImportedBook(name="b", entries=(ImportedEntry(title="A", content=lore, keys=("k" * 121,)),)), profile="smart")


def test_book_title_and_description_are_cut_to_w12() -> None:
    book = ImportedBook(name="n" * 121, description="d" * 2001, entries=_book(1).entries)
    plan = plan_book(book, profile="classic")
    assert len(plan.title) == 120 and len(plan.description) == 2000
    assert len(plan.receipt["warnings"]) == 2
    exact = plan_book(ImportedBook(name="n" * 120, description="d" * 2000, entries=_book(1).entries), profile="classic")
    assert exact.title == "n" * 120 and exact.description == "d" * 2000 and exact.receipt["warnings"] == []


def test_a_refused_import_returns_no_plan() -> None:
    result = None
    with pytest.raises(LimitExceeded):
        result = plan_import(world_bytes(300), profile="server")
    assert result is None
    assert plan_import(world_bytes(250), profile="server").receipt["added"] == 250


def test_host_settings_override_the_card_limits(settings: object) -> None:
    settings.LOREWEAVE_IMPORT_LIMITS = {"max_png_bytes": 1234}  # type: ignore[attr-defined]
    assert current_limits().max_png_bytes == 1234
    data = png_with(chara_chunk(card(card_book(40))))
    assert len(data) > 1234
    with pytest.raises(PayloadTooLarge):
        read_book(data)


def test_benchmark_runs_and_reports() -> None:
    from bench.import_bench import main, world_info

    assert len(read_book(world_info(500)).entries) == 500
    assert main(["--entries", "60", "--repeat", "1", "--json"]) == 0


def test_entry_fields_pass_the_services_own_checks() -> None:
    # books.limits: entry scan depth 0–100 in classic, 1–100 in server (C-2, S-5).
    ok = ImportedBook(name="b", entries=(ImportedEntry(title="A", content="lore text here", scan_depth=100),))
    assert plan_book(ok, profile="classic").entries
    deep = ImportedBook(name="b", entries=(ImportedEntry(title="A", content="lore text here", scan_depth=101),))
    with pytest.raises(ValidationFailed) as refused:
        plan_book(deep, profile="classic")
    assert refused.value.rule == "C-2" and refused.value.details["count"] == 1
    zero = ImportedBook(name="b", entries=(ImportedEntry(title="A", content="lore text here", scan_depth=0),))
    assert plan_book(zero, profile="classic").entries
    with pytest.raises(ValidationFailed):
        plan_book(zero, profile="server")
    channel = ImportedBook(name="b", entries=(ImportedEntry(title="A", content="lore text", channels=("c" * 65,)),))
    with pytest.raises(LimitExceeded):
        plan_book(channel, profile="server")


def test_out_of_range_book_settings_fall_back_to_defaults() -> None:
    from books.formats.model import BookSettings

    book = ImportedBook(name="b", settings=BookSettings(scan_depth=100, token_budget=32_001), entries=_book(1).entries)
    plan = plan_book(book, profile="classic")
    assert plan.settings.scan_depth == 100 and plan.settings.token_budget is None
    assert "token_budget 32,001" in plan.receipt["warnings"][0]
