"""Time the ``sillytavern`` profile on the peer benchmark cases, beside SillyTavern's own figures.

Run from the repository root::

    .venv/bin/python -m bench.st_bench [--runs 20] [--warmup 3]

The cases are read in place from the team's shared folder (``../shared/bench``
beside the checkout, or ``$LOREWEAVE_SHARED/bench``). For each case this
prints the time to load and compile the books and, for each kind of turn
(cold, rolling, all_new: see the footnote it prints), the per-turn p50/p95 of
``scan_world_info`` over ``--runs`` timed turns after ``--warmup`` runs, whether
the activated set equalled SillyTavern's on every timed turn, and the ratio to
SillyTavern's median per-turn time as recorded on a machine of this kind
(``shared/bench/README.md``; not measured here).
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

from .honest import KINDS, engine_memos_clear, load_average

REPO_ROOT = Path(__file__).resolve().parents[1]
CASES = ("st-bench-2000", "st-bench-2000-ascii", "st-bench-200", "st-bench-200-ascii")
# SillyTavern's median per-turn time (low, high), seconds, as recorded in shared/bench/README.md on a
# machine of this kind (Node 20): not measured by this run.
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

    def request_for(chat: list[Any]) -> ScanRequest:
        return ScanRequest(
            chat=chat_for_world_info(chat, include_names=runner.settings.include_names, user_name=runner.macros.user),
            max_context=int(case["max_context"]),
            scan_injections=scan_injections(case, runner.macros),
            authors_note=str(case.get("authors_note", "") or ""),
        )

    wanted = set(expected["turns"][0]["activated_uids"])
    chat = list(case["chat"])
    for _ in range(warmup):
        scan_world_info(world, request_for(chat))
    kinds: dict[str, Any] = {}
    wrong: dict[str, list[int]] = {}
    counter = 0
    for kind in KINDS:
        samples, cpu_samples, wrong_turns = [], [], []
        for turn in range(runs):
            counter += 1
            # New texts that say what the case's chat says (a number added), so SillyTavern's recorded set
            # must still come out: rolling renews the newest message, all_new every one; cold replays the
            # case's own chat with the engine's memos emptied.
            if kind == "rolling":
                texts = [*chat[:-1], _renewed(chat[-1], counter)]
            elif kind == "all_new":
                texts = [_renewed(message, counter) for message in chat]
            else:
                texts = chat
                engine_memos_clear()
            request = request_for(texts)
            started, cpu_started = time.perf_counter(), time.process_time()
            result = scan_world_info(world, request)
            samples.append(time.perf_counter() - started)
            cpu_samples.append(time.process_time() - cpu_started)
            activated = {entry.uid for entry in result.activated}
            if activated != wanted:  # checked on every timed turn
                wrong_turns.append(turn)
                missing, extra = sorted(wanted - activated), sorted(activated - wanted)
        kinds[kind] = {"p50": statistics.median(samples), "p95": percentile(samples, 0.95),
                       "cpu_p50": statistics.median(cpu_samples), "activated": len(activated)}
        if wrong_turns:
            wrong[kind] = wrong_turns
    return {
        "name": name,
        "entries": len(world.entries),
        "load": load_seconds,
        "compile": compile_samples[0],  # cold: includes parsing regex keys for the first time
        "compile_warm": statistics.median(compile_samples[1:]),
        "kinds": kinds,
        "matches": not wrong,
        "wrong": wrong,
        "missing": missing if wrong else [],
        "extra": extra if wrong else [],
    }


def _renewed(message: Any, number: int) -> Any:
    suffix = f" {number:06d}"
    if isinstance(message, str):
        return message + suffix
    return {**message, "mes": str(message.get("mes", "")) + suffix}


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

    print(f"sillytavern profile, peer benchmark ({folder}); {args.runs} timed turns per kind after "
          f"{args.warmup} warm-up; load average {load_average()}\n")
    header = (
        f"{'case':<22}{'kind':<9}{'entries':>8}{'compile':>9}{'p50/turn':>10}{'p95/turn':>10}{'cpu p50':>10}"
        f"{'activated':>12}   {'SillyTavern/turn*':<18}{'speed-up at p50*':<16}"
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
        failures += not row["matches"]
        for kind in KINDS:
            figures = row["kinds"][kind]
            verdict = "WRONG" if kind in row["wrong"] else "exact"
            recorded = f"{low:.2f}–{high:.2f} s"
            speed_up = f"{low / figures['p50']:,.0f}–{high / figures['p50']:,.0f}x"
            print(
                f"{name if kind == KINDS[0] else '':<22}{kind:<9}{row['entries']:>8}{row['compile'] * 1e3:>7.0f}ms"
                f"{figures['p50'] * 1e3:>8.2f}ms{figures['p95'] * 1e3:>8.2f}ms{figures['cpu_p50'] * 1e3:>8.2f}ms"
                f"{figures['activated']:>6} {verdict:<5}"
                f"   {recorded:<18}{speed_up:<16}"
            )
        if not row["matches"]:
            print(f"    wrong on turns {row['wrong']}; missing {row['missing'][:20]} extra {row['extra'][:20]}")
    print(
        "\nkinds: cold = the case's chat with the engine's memos emptied; rolling = its newest message new each"
        "\n  turn; all_new = every message new each turn (texts get a number, so SillyTavern's set must hold);"
        "\n  the activated set is checked against SillyTavern's on every timed turn."
        "\ncompile = sort, macros, key index, cold (cached per book version in use)."
        "\nper turn = one scan_world_info call (all passes, groups, budget, placement); p50/p95 are wall"
        "\n  clock, cpu p50 is process CPU time (steadier when other work shares the machine)."
        "\n* SillyTavern: median per turn RECORDED on a machine of this kind (shared/bench/README.md, Node 20),"
        "\n  not measured in this run; speed-up = that recorded figure over this run's p50."
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
