"""Import benchmark: a 500-entry SillyTavern world-info file, read + mapped.

    python -m bench.import_bench [--entries 500] [--repeat 7] [--json]

Generates a world-info file with SillyTavern 1.12's full entry field set
(deterministic content, ~900 characters per entry), then times the pure
import path — format detection, JSON decoding with the hostile-input checks,
reading, profile mapping with its receipt and per-entry limit checks
(``read_book`` + ``map_for_profile``) — for every profile, without a
database and without embedding. (The server profile's 250-entry cap, S-14,
would refuse this file in ``plan_import``; the mapping is what is timed.)
Target: ≤ 0.5 s.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from typing import Any

TARGET_SECONDS = 0.5
WORDS = (
    "harbour tide lantern keeper storm salt ember archive guild oath relic river citadel "
    "whisper forest iron crown shadow market bell chart compass vault spire orchard hollow"
).split()


def world_info(entries: int, *, seed: int = 7) -> bytes:
    rng = random.Random(seed)
    out: dict[str, Any] = {}
    for uid in range(entries):
        words = [rng.choice(WORDS) for _ in range(150)]
        name = f"{rng.choice(WORDS).title()} {rng.choice(WORDS).title()} {uid}"
        out[str(uid)] = {
            "uid": uid,
            "key": [name, rng.choice(WORDS), f"/{rng.choice(WORDS)}s?/i"] if uid % 10 == 0 else [name, rng.choice(WORDS)],
            "keysecondary": [rng.choice(WORDS)] if uid % 3 == 0 else [],
            "comment": name,
            "content": f"{name}: " + " ".join(words) + ".",
            "constant": uid % 25 == 0,
            "vectorized": False,
            "selective": True,
            "selectiveLogic": uid % 4,
            "addMemo": True,
            "order": 100 + uid % 50,
            "position": uid % 8,
            "disable": uid % 40 == 0,
            "excludeRecursion": uid % 5 == 0,
            "preventRecursion": False,
            "delayUntilRecursion": False,
            "probability": 100 if uid % 6 else 50,
            "useProbability": True,
            "depth": 4,
            "group": "weather" if uid % 9 == 0 else "",
            "groupOverride": False,
            "groupWeight": 100,
            "scanDepth": None,
            "caseSensitive": None,
            "matchWholeWords": None,
            "useGroupScoring": None,
            "automationId": "",
            "role": uid % 3,
            "sticky": 2 if uid % 11 == 0 else 0,
            "cooldown": 0,
            "delay": 0,
            "displayIndex": uid,
        }
    return json.dumps({"entries": out}, ensure_ascii=False, indent=2).encode("utf-8")


def measure(data: bytes, profile: str, repeat: int) -> list[float]:
    from books.formats import map_for_profile, read_book

    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        book = read_book(data, filename="bench.json")
        _, receipt = map_for_profile(book, profile)
        timings.append(time.perf_counter() - start)
    assert receipt["added"] + receipt["skipped_count"] == receipt["book"]["entries_in_file"]
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.import_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)

    data = world_info(args.entries)
    measure(data, "classic", 1)  # warm imports and caches
    results = {}
    for profile in ("classic", "server", "smart", "sillytavern"):
        timings = measure(data, profile, args.repeat)
        results[profile] = {"median_s": statistics.median(timings), "max_s": max(timings)}
    worst = max(r["max_s"] for r in results.values())
    ok = worst <= TARGET_SECONDS
    if args.json:
        print(
            json.dumps(
                {
                    "entries": args.entries,
                    "file_bytes": len(data),
                    "target_s": TARGET_SECONDS,
                    "profiles": results,
                    "within_target": ok,
                },
                indent=2,
            )
        )
    else:
        print(f"import of a {args.entries}-entry world-info file ({len(data) / 1024:.0f} KiB), read + map + checks,")
        print(f"no database, no embedding; {args.repeat} runs per profile; target ≤ {TARGET_SECONDS:.2f} s")
        for profile, figures in results.items():
            print(f"  {profile:<12} median {figures['median_s'] * 1000:7.1f} ms   max {figures['max_s'] * 1000:7.1f} ms")
        print(f"worst {worst * 1000:.1f} ms: {'within' if ok else 'OVER'} the {TARGET_SECONDS:.2f} s target")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
