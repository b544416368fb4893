"""Time the ``sillytavern`` profile on the peer benchmark cases, beside SillyTavern's own figures.

Run from the repository root::

    .venv/bin/python -m bench.st_bench [--runs 20] [--warmup 3]

The cases are read in place from the team's shared folder (``../shared/bench``
beside the checkout, or ``$LOREWEAVE_SHARED/bench``). For each case this
prints the time to load and compile the books, the per-turn p50/p95 of
``scan_world_info`` over ``--runs`` timed runs after ``--warmup`` runs, whether
the activated set equals SillyTavern's, and the speed-up over SillyTavern's
median per-turn time on the same case.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from retrieval.engine.sillytavern import ScanRequest, compile_world_info, scan_world_info
from retrieval.engine.sillytavern.cases import CaseRunner, chat_for_world_info, scan_injections

REPO_ROOT = Path(__file__).resolve().parents[1]
CASES = ("st-bench-2000", "st-bench-2000-ascii", "st-bench-200", "st-bench-200-ascii")
# SillyTavern's median per-turn time (low, high), seconds: shared/bench/README.md.
SILLYTAVERN_SECONDS = {
    "st-bench-2000": (26.8, 29.9),
    "st-bench-2000-ascii": (10.3, 10.6),
    "st-bench-200": (0.70, 0.76),
    "st-bench-200-ascii": (0.31, 0.36),
}


def bench_folder() -> Path | None:
    configured = os.environ.get("LOREWEAVE_SHARED")
    root = Path(configured) if configured else REPO_ROOT.parent / "shared"
    folder = root / "bench"
    return folder if folder.is_dir() else None


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def run_one(folder: Path, name: str, *, runs: int, warmup: int) -> dict[str, Any] | None:
    case_path = folder / f"{name}.case.json"
    expected_path = folder / f"{name}.expected.json"
    if not case_path.exists() or not expected_path.exists():
        return None
    case = json.loads(case_path.read_text(encoding="utf-8"))
    expected = json.loads(expected_path.read_text(encoding="utf-8"))

    started = time.perf_counter()
    runner = CaseRunner(case)
    books = runner.books()
    load_seconds = time.perf_counter() - started

    compile_samples = []
    for _ in range(3):
        started = time.perf_counter()
        world = compile_world_info(books, settings=runner.settings, macros=runner.macros, character=runner.character)
        compile_samples.append(time.perf_counter() - started)

    request = ScanRequest(
        chat=chat_for_world_info(case["chat"], include_names=runner.settings.include_names, user_name=runner.macros.user),
        max_context=int(case["max_context"]),
        scan_injections=scan_injections(case, runner.macros),
        authors_note=str(case.get("authors_note", "") or ""),
    )
    for _ in range(warmup):
        result = scan_world_info(world, request)
    samples, cpu_samples = [], []
    for _ in range(runs):
        started, cpu_started = time.perf_counter(), time.process_time()
        result = scan_world_info(world, request)
        samples.append(time.perf_counter() - started)
        cpu_samples.append(time.process_time() - cpu_started)

    activated = {entry.uid for entry in result.activated}
    wanted = set(expected["turns"][0]["activated_uids"])
    return {
        "name": name,
        "entries": len(world.entries),
        "load": load_seconds,
        "compile": compile_samples[0],  # cold: includes parsing regex keys for the first time
        "compile_warm": statistics.median(compile_samples[1:]),
        "p50": statistics.median(samples),
        "p95": percentile(samples, 0.95),
        "cpu_p50": statistics.median(cpu_samples),
        "activated": len(activated),
        "matches": activated == wanted,
        "missing": sorted(wanted - activated),
        "extra": sorted(activated - wanted),
        "st_median_run": expected.get("timing", {}).get("median_ms"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs per case (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    args = parser.parse_args(argv)

    folder = bench_folder()
    if folder is None:
        print(
            "st_bench: shared benchmark cases not found (looked for ../shared/bench beside the checkout "
            "and $LOREWEAVE_SHARED/bench); nothing to run."
        )
        return 0

    print(f"sillytavern profile, peer benchmark ({folder}); {args.runs} timed runs after {args.warmup} warm-up\n")
    header = (
        f"{'case':<22}{'entries':>8}{'load':>8}{'compile':>9}{'p50/turn':>10}{'p95/turn':>10}{'cpu p50':>10}"
        f"{'activated':>12}   {'SillyTavern/turn':<17}{'speed-up at p50':<16}"
    )
    print(header)
    print("-" * len(header))
    failures = 0
    for name in CASES:
        row = run_one(folder, name, runs=args.runs, warmup=args.warmup)
        if row is None:
            print(f"{name:<22}  (case files missing)")
            continue
        low, high = SILLYTAVERN_SECONDS[name]
        verdict = "exact" if row["matches"] else "WRONG"
        failures += not row["matches"]
        sillytavern = f"{low:.2f}–{high:.2f} s"
        speed_up = f"{low / row['p50']:,.0f}–{high / row['p50']:,.0f}x"
        print(
            f"{name:<22}{row['entries']:>8}{row['load'] * 1e3:>6.0f}ms{row['compile'] * 1e3:>7.0f}ms"
            f"{row['p50'] * 1e3:>8.2f}ms{row['p95'] * 1e3:>8.2f}ms{row['cpu_p50'] * 1e3:>8.2f}ms"
            f"{row['activated']:>6} {verdict:<5}"
            f"   {sillytavern:<17}{speed_up:<16}"
        )
        if not row["matches"]:
            print(f"    missing {row['missing'][:20]} extra {row['extra'][:20]}")
    print(
        "\nload = SillyTavern JSON to entries; compile = sort, macros, key index, cold (cached per book version"
        "\n  in use; a warm recompile, with regex keys already parsed, is about half);"
        "\nper turn = one scan_world_info call (all passes, groups, budget, placement); p50/p95 are wall"
        "\n  clock, cpu p50 is process CPU time (steadier when other work shares the machine)."
        "\nSillyTavern figures: median per turn from shared/bench/README.md (Node 20, same machine kind)."
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
