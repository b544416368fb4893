"""The ``sillytavern`` profile against SillyTavern's own outputs, through ``loreweave assemble``.

Two shared folders: ``conformance/sillytavern`` (made by SillyTavern 1.12.6,
re-run unchanged on 1.18.0) and ``conformance/sillytavern-1.13`` (made by
SillyTavern 1.18.0: generation-type triggers, ignoreBudget, outlets, extra
match sources, character filters, the persona book). Every ``*.case.json`` is
run through the CLI's ``assemble`` command, as a user would, and each turn is
compared key by key with the ``*.expected.json`` (``outlets`` included). Cases
are read in place; new case files are picked up automatically.

The same cases also run in fresh processes under several ``PYTHONHASHSEED``
values: a turn must not depend on set order or string hashing.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from retrieval.adapter.cli import assemble_main
from tests.retrieval.st_conformance_run import FOLDERS, case_problems
from tests.shared_data import REPO_ROOT, require_shared, shared_dir

CASE_SUFFIX = ".case.json"


def _case_ids() -> list[tuple[str, str]]:
    root = shared_dir()
    ids: list[tuple[str, str]] = []
    for folder_name in FOLDERS:
        folder = root / "conformance" / folder_name if root else None
        if folder is None or not folder.is_dir():
            ids.append((folder_name, "(shared conformance cases missing)"))
            continue
        ids.extend((folder_name, path.name[: -len(CASE_SUFFIX)]) for path in sorted(folder.glob(f"*{CASE_SUFFIX}")))
    return ids


def _through_cli(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = assemble_main([str(path)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result: dict[str, Any] = json.loads(captured.out)
    return result


@pytest.mark.parametrize(("folder_name", "name"), _case_ids())
def test_sillytavern_case_through_the_cli(folder_name: str, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    folder = require_shared("conformance", folder_name)
    expected = json.loads((folder / f"{name}.expected.json").read_text(encoding="utf-8"))

    result = _through_cli(folder / f"{name}{CASE_SUFFIX}", capsys)

    problems = case_problems(result, expected)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("folder_name", FOLDERS)
def test_every_case_has_an_expected_file(folder_name: str) -> None:
    folder = require_shared("conformance", folder_name)
    cases = sorted(folder.glob(f"*{CASE_SUFFIX}"))
    assert cases, "no SillyTavern conformance cases found"
    for path in cases:
        assert (folder / path.name.replace(CASE_SUFFIX, ".expected.json")).exists(), path.name


@pytest.mark.parametrize("hash_seed", ["0", "1", "4242"])
def test_cases_give_the_same_answer_under_every_hash_seed(hash_seed: str) -> None:
    """Issue 31: case 134 once activated [0] in some processes and [1] in others."""
    root = require_shared("conformance")
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "LOREWEAVE_SHARED": str(root.parent)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.retrieval.st_conformance_run"],
        check=False, capture_output=True, text=True, encoding="utf-8", cwd=REPO_ROOT, env=env, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["cases"] >= 100 and report["failures"] == {}, report["failures"]
