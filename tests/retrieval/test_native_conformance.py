"""Every classic_* and server_* native conformance case, through ``loreweave assemble``.

Cases are read in place from the team's shared folder (never copied). Further
profiles add their prefix to ``PROFILE_PREFIXES`` and reuse
``conformance_check``.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from retrieval.adapter.cli import assemble_main
from tests.retrieval.conformance_check import CHECKS, assert_conformance, expected_problems
from tests.shared_data import require_shared, shared_dir

PROFILE_PREFIXES = ("classic_", "server_", "smart_")


def _case_paths() -> list[Path]:
    root = shared_dir()
    folder = root / "conformance" / "native" if root else None
    if folder is None or not folder.is_dir():
        return []
    return sorted(path for path in folder.glob("*.json") if path.name.startswith(PROFILE_PREFIXES))


CASES = _case_paths()


def _run_cli(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = assemble_main([str(path)])
    captured = capsys.readouterr()
    assert code == 0, f"exit {code}: {captured.err}"
    result: dict[str, Any] = json.loads(captured.out)
    return result


@pytest.mark.parametrize("path", CASES or [None], ids=[p.stem for p in CASES] or ["no-cases"])
def test_native_case(path: Path | None, capsys: pytest.CaptureFixture[str]) -> None:
    folder = require_shared("conformance", "native")
    if path is None:
        pytest.fail(f"no {'/'.join(PROFILE_PREFIXES)}* cases found in {folder}")
    case = json.loads(path.read_text(encoding="utf-8"))
    assert_conformance(_run_cli(path, capsys), case["expected"], name=path.stem)


def test_the_case_set_covers_both_profiles() -> None:
    require_shared("conformance", "native")
    names = [path.name for path in CASES]
    assert any(n.startswith("classic_") for n in names) and any(n.startswith("server_") for n in names)


def test_results_have_the_documented_shape(capsys: pytest.CaptureFixture[str]) -> None:
    require_shared("conformance", "native")
    for path in CASES:
        result = _run_cli(path, capsys)
        for turn in result.get("turns", [result]):
            assert {"injections", "world_index", "log", "state"} <= set(turn)
            for injection in turn["injections"]:
                assert {"entry", "book", "slot", "role", "content", "tokens", "label", "cache_stable"} <= set(injection)
            case = json.loads(path.read_text(encoding="utf-8"))
            every_entry = [e["id"] for b in case["books"] for e in b["entries"]]
            assert [row["entry"] for row in turn["log"]] == every_entry, "one log record per entry, in book order"


# --- the checker itself -------------------------------------------------------


def test_checker_knows_every_expected_key_the_readme_documents() -> None:
    readme = require_shared("conformance", "README.md").read_text(encoding="utf-8")
    paragraph = readme.split("`expected` lists only what the case checks:", 1)[1].split("A checker must fail", 1)[0]
    documented = set(re.findall(r"`([a-z_]+)`", paragraph))
    assert documented and documented == set(CHECKS)


def test_checker_knows_every_key_used_by_any_native_case() -> None:
    folder = require_shared("conformance", "native")
    for path in sorted(folder.glob("*.json")):
        expected = json.loads(path.read_text(encoding="utf-8"))["expected"]
        problems = expected_problems({"injections": [], "log": [], "world_index": []}, expected)
        assert not [p for p in problems if "unknown expected key" in p], path.name


def test_checker_fails_on_an_unknown_key() -> None:
    assert expected_problems({"injections": []}, {"injected": [], "sorted_by_magic": True}) == [
        "unknown expected key 'sorted_by_magic': the checker does not know how to verify it"
    ]
    assert "unknown expected key 'extra'" in expected_problems({"turns": []}, {"turns": [], "extra": 1})[0]


RESULT = {
    "injections": [
        {"entry": "a", "slot": "system", "role": "system", "content": "A", "tokens": 5},
        {"entry": "b", "slot": "recent", "role": "user", "content": "B", "tokens": 7},
    ],
    "world_index": [{"entry": "w1", "line": "W1 — idea"}],
    "log": [{"entry": "a", "outcome": "injected"}, {"entry": "c", "outcome": "over_budget"}],
}


@pytest.mark.parametrize(
    ("expected", "passes"),
    [
        ({"injected": ["a", "b"]}, True),
        ({"injected": ["b", "a"]}, False),
        ({"slots": {"system": ["a"], "recent": ["b"]}}, True),
        ({"slots": {"recent": []}}, False),
        ({"includes": ["b"]}, True),
        ({"includes": ["c"]}, False),
        ({"absent": ["c"]}, True),
        ({"absent": ["a"]}, False),
        ({"outcomes": {"c": "over_budget"}}, True),
        ({"outcomes": {"c": "injected"}}, False),
        ({"outcomes": {"zz": "not_matched"}}, False),
        ({"content": {"a": "A"}}, True),
        ({"content": {"a": "B"}}, False),
        ({"content": {"c": "C"}}, False),
        ({"roles": {"b": "user"}}, True),
        ({"roles": {"b": "system"}}, False),
        ({"world_index": ["w1"]}, True),
        ({"world_index": []}, False),
        ({"max_per_slot": {"system": 1}}, True),
        ({"max_per_slot": {"system": 0}}, False),
        ({"max_tokens": {"recent": 7}}, True),
        ({"max_tokens": {"recent": 6}}, False),
        ({"max_world_index": 1}, True),
        ({"max_world_index": 0}, False),
    ],
)
def test_checker_verifies_each_key(expected: dict[str, Any], passes: bool) -> None:
    assert (not expected_problems(RESULT, expected)) is passes


def test_checker_compares_turns_one_by_one() -> None:
    expected = {"turns": [{"injected": ["a", "b"]}, {"injected": []}]}
    assert expected_problems({"turns": [RESULT, {"injections": []}]}, expected) == []
    assert expected_problems({"turns": [RESULT]}, expected) == ["turns: expected 2 results, got 1"]
    assert expected_problems(RESULT, expected) == [
        "turns: the case has several turns but the result has no 'turns' list"
    ]
    problems = expected_problems({"turns": [RESULT, RESULT]}, expected)
    assert len(problems) == 1 and problems[0].startswith("turn 2: injected")
