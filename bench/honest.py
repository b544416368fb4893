"""What every engine bench shares, so that their figures mean the same thing.

Three kinds of turn, timed separately (the memos that make a live chat cheap
must not flatter the other two):

* ``cold``: the engine's per-text memos (folded texts, keys found per text,
  token counts) emptied before each timed turn: a restarted worker, or a chat
  the process has not seen; compiled books stay cached (compiling is timed apart);
* ``rolling``: a live chat, the window moving on by one new message each turn;
* ``all_new``: every message of the window new each turn (the worst warm case).

Targets are judged on medians; a best round is not reported.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

KINDS = ("cold", "rolling", "all_new")


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of ``values`` (any order)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(fraction * (len(ordered) - 1)))))]


def summary_ms(values_ms: Sequence[float]) -> dict[str, float | int]:
    """n, p50 (the median), p95, min and max of samples already in milliseconds."""
    if not values_ms:
        return {"n": 0}
    return {
        "n": len(values_ms),
        "p50_ms": round(statistics.median(values_ms), 3),
        "p95_ms": round(percentile(values_ms, 0.95), 3),
        "min_ms": round(min(values_ms), 3),
        "max_ms": round(max(values_ms), 3),
    }


def ratio(slow_ms: Sequence[float], fast_ms: Sequence[float]) -> float | None:
    """Median over median: how many times slower the baseline is, on the same turns."""
    if not slow_ms or not fast_ms:
        return None
    fast = statistics.median(fast_ms)
    return round(statistics.median(slow_ms) / fast, 1) if fast > 0 else None


def load_average() -> float | None:
    try:
        with open("/proc/loadavg") as loadavg:
            return float(loadavg.read().split()[0])
    except (OSError, ValueError):
        return None


def engine_memos_clear() -> None:
    """Empty the keyword engine's per-text memos (not its compiled books).

    Reaches into module state on purpose: the bench must see a turn with
    nothing remembered, and the engine offers no public switch for that.
    """
    from retrieval.engine import keyword, matching, tokenizers

    for cache in (matching._FOLDS, matching._FOLDS_WIDTH):
        _text_cache_clear(cache)
    for compiled in list(keyword._compiled._items.values()):
        known = getattr(compiled.matcher, "_known", None)
        if known is not None:
            _text_cache_clear(known)
        compiled.token_counts.clear()
    with tokenizers._instances_lock:
        instances = list(tokenizers._instances.values())
    for tokenizer in instances:
        counted = getattr(tokenizer, "_counted", None)
        if counted is not None:
            _text_cache_clear(counted)


def matcher_memo_clear(matcher: object) -> None:
    """Empty one matcher's keys-per-text memo (a matcher held outside the compile cache)."""
    known = getattr(matcher, "_known", None)
    if known is not None:
        _text_cache_clear(known)


def _text_cache_clear(cache: object) -> None:
    cache._items.clear()  # type: ignore[attr-defined]
    cache._chars = 0  # type: ignore[attr-defined]


def engine_lines(run: Callable[[], T]) -> tuple[T, int]:
    """``run()``'s result and the number of Python lines the engine executed for it.

    A deterministic measure of a turn's work (the same on a loaded machine as on a quiet one):
    every line of ``retrieval/engine`` executed, comprehensions and helpers included. Work done
    inside C calls (a sort, the automaton) counts once per call, which is why per-entry loops in
    Python are what this sees. Tracing slows the run some tenfold: use it on one turn, not to time.
    """
    import sys
    from pathlib import Path

    import retrieval.engine

    prefix = str(Path(retrieval.engine.__file__).resolve().parent)
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(prefix) else None

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        result = run()
    finally:
        sys.settrace(previous)
    return result, count
