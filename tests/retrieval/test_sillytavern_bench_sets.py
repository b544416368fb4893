"""The peer benchmark cases (2,000 entries x 10 keys) activate exactly SillyTavern's set.

The timing lives in ``bench/st_bench.py``; here only correctness at scale, with
a generous time bound so a pathological slowdown fails loudly.
"""
from __future__ import annotations

import json
import time

import pytest

from retrieval.engine.sillytavern import ScanRequest, compile_world_info, scan_world_info
from retrieval.engine.sillytavern.cases import CaseRunner, chat_for_world_info, scan_injections
from tests.shared_data import require_shared

BENCH_CASES = ("st-bench-200-ascii", "st-bench-200", "st-bench-2000-ascii", "st-bench-2000")


@pytest.mark.parametrize("name", BENCH_CASES)
def test_bench_case_activates_sillytaverns_set(name: str) -> None:
    folder = require_shared("bench")
    case = json.loads((folder / f"{name}.case.json").read_text(encoding="utf-8"))
    expected = json.loads((folder / f"{name}.expected.json").read_text(encoding="utf-8"))
    runner = CaseRunner(case)
    world = compile_world_info(
        runner.books(), settings=runner.settings, macros=runner.macros, character=runner.character
    )
    request = ScanRequest(
        chat=chat_for_world_info(case["chat"], include_names=runner.settings.include_names, user_name="User"),
        max_context=case["max_context"],
        scan_injections=scan_injections(case, runner.macros),
        authors_note="",
    )

    started = time.perf_counter()
    result = scan_world_info(world, request)
    elapsed = time.perf_counter() - started

    activated = {entry.uid for entry in result.activated}
    wanted = set(expected["turns"][0]["activated_uids"])
    assert activated == wanted, f"missing {sorted(wanted - activated)}, extra {sorted(activated - wanted)}"
    assert elapsed < 1.0, f"one turn took {elapsed:.3f}s; SillyTavern-sized books should take milliseconds"
