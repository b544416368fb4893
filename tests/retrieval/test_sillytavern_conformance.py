"""The ``sillytavern`` profile against SillyTavern's own outputs (shared/conformance/sillytavern).

Every ``*.case.json`` in the shared folder is run through ``run_case`` and each
turn is compared key by key with the ``*.expected.json`` produced by
SillyTavern 1.12.6. Cases are read in place; new case files are picked up
automatically.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from retrieval.engine.sillytavern import run_case
from tests.shared_data import require_shared, shared_dir

CASE_SUFFIX = ".case.json"


def _case_names() -> list[str]:
    root = shared_dir()
    folder = root / "conformance" / "sillytavern" if root else None
    if folder is None or not folder.is_dir():
        return ["(shared conformance cases missing)"]
    return sorted(path.name[: -len(CASE_SUFFIX)] for path in folder.glob(f"*{CASE_SUFFIX}"))


def _load(folder: Path, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    case = json.loads((folder / f"{name}{CASE_SUFFIX}").read_text(encoding="utf-8"))
    expected = json.loads((folder / f"{name}.expected.json").read_text(encoding="utf-8"))
    return case, expected


@pytest.mark.parametrize("name", _case_names())
def test_sillytavern_case(name: str) -> None:
    folder = require_shared("conformance", "sillytavern")
    case, expected = _load(folder, name)

    result = run_case(case)

    assert result["effective_settings"] == expected["effective_settings"]
    assert len(result["turns"]) == len(expected["turns"]), "one result per generation"
    for number, (got, want) in enumerate(zip(result["turns"], expected["turns"], strict=True), start=1):
        for key, wanted in want.items():
            assert key in got, f"turn {number}: output lacks {key!r}"
            assert got[key] == wanted, f"turn {number}, {key}: got {got[key]!r}, SillyTavern gave {wanted!r}"


def test_every_case_has_an_expected_file() -> None:
    folder = require_shared("conformance", "sillytavern")
    cases = sorted(folder.glob(f"*{CASE_SUFFIX}"))
    assert cases, "no SillyTavern conformance cases found"
    for path in cases:
        assert (folder / path.name.replace(CASE_SUFFIX, ".expected.json")).exists(), path.name
