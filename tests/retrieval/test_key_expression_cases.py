"""K-1 conformance-style cases (key expressions over multi-turn chats), through ``loreweave assemble``.

The cases live beside this test (``cases/*_k1_*.json``), in the native conformance format, and are
checked by the same checker as the shared native cases: exact injections and outcomes per turn.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from retrieval.adapter.cli import assemble_main
from tests.retrieval.conformance_check import assert_conformance

CASES = sorted((Path(__file__).parent / "cases").glob("*_k1_*.json"))


def test_there_are_cases_for_both_keyword_profiles() -> None:
    assert {path.name.split("_", 1)[0] for path in CASES} == {"classic", "server"}


@pytest.mark.parametrize("path", CASES, ids=[path.stem for path in CASES])
def test_key_expression_case(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = assemble_main([str(path)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result: dict[str, Any] = json.loads(captured.out)
    case = json.loads(path.read_text(encoding="utf-8"))
    assert_conformance(result, case["expected"], name=path.stem)
