"""Run every shared SillyTavern conformance case through ``loreweave assemble`` in this process.

``python -m tests.retrieval.st_conformance_run`` prints ``{"cases": N, "failures": {case: [problems]}}``
and exits 1 when any case fails. The suite starts it under several
``PYTHONHASHSEED`` values, so an answer that depends on string hashing or set
order shows up as a failure in one of them.
"""
from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Mapping
from typing import Any

FOLDERS = ("sillytavern", "sillytavern-1.13")
CASE_SUFFIX = ".case.json"


def case_problems(result: Mapping[str, Any], expected: Mapping[str, Any]) -> list[str]:
    """Every way a ``run_case`` result misses SillyTavern's expected file (settings, then each turn's keys)."""
    problems: list[str] = []
    if result.get("effective_settings") != expected["effective_settings"]:
        problems.append(f"effective_settings: got {result.get('effective_settings')!r}")
    got_turns, want_turns = result.get("turns") or [], expected["turns"]
    if len(got_turns) != len(want_turns):
        return [*problems, f"turns: expected {len(want_turns)} results, got {len(got_turns)}"]
    for number, (got, want) in enumerate(zip(got_turns, want_turns, strict=True), start=1):
        for key, wanted in want.items():
            if key not in got:
                problems.append(f"turn {number}: output lacks {key!r}")
            elif got[key] != wanted:
                problems.append(f"turn {number}, {key}: got {got[key]!r}, SillyTavern gave {wanted!r}")
    return problems


def main() -> int:
    from retrieval.adapter.cli import assemble_main
    from tests.shared_data import shared_dir

    root = shared_dir()
    if root is None:
        print(json.dumps({"cases": 0, "failures": {"(shared)": ["shared data not found"]}}))
        return 1
    failures: dict[str, list[str]] = {}
    count = 0
    for folder_name in FOLDERS:
        folder = root / "conformance" / folder_name
        for path in sorted(folder.glob(f"*{CASE_SUFFIX}")):
            name = f"{folder_name}/{path.name[: -len(CASE_SUFFIX)]}"
            count += 1
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = assemble_main([str(path)])
            if code != 0:
                failures[name] = [f"exit {code}: {err.getvalue().strip()}"]
                continue
            expected = json.loads(path.with_name(path.name.replace(CASE_SUFFIX, ".expected.json")).read_text("utf-8"))
            problems = case_problems(json.loads(out.getvalue()), expected)
            if problems:
                failures[name] = problems
    print(json.dumps({"cases": count, "failures": failures}, ensure_ascii=False))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
