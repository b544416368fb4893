"""Regex keys run under a time budget, so no key can hold a turn (issue 13, point 4).

Python's ``re`` cannot be interrupted: ``/(a+)+$/`` on 5,000 ``a``s and a ``!``
backtracks for minutes. Keys are still compiled (and checked) with ``re``, but
run on the ``regex`` module, which reads the same syntax and takes ``timeout=``.
Each search gets at most :data:`KEY_TIMEOUT`, and all the regex work of one turn
at most :data:`TURN_BUDGET`. A key that overruns is skipped for the rest of the
turn and recorded in the turn's :class:`RegexBudget` with its reason; the caller
puts that in the request log and flags the entry.
"""
from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

import regex as _regex  # type: ignore[import-untyped]  # no stubs; used through one function

from .key_expressions import KeyExpressionError, key_expression_parse
from .values import Book, Selection

# A sane key on a long chat takes well under a millisecond; these only stop runaway backtracking.
KEY_TIMEOUT = 0.05
TURN_BUDGET = 0.25
_MIN_TIMEOUT = 0.001

REGEX_OVERRUN_CODE = "regex_timeout"


class RegexBudget:
    """The regex time left to one turn, and the keys that overran it (key as written -> reason).

    ``clock`` is injectable so the budget's arithmetic is tested without wall time (each search's own
    timeout is still enforced by the ``regex`` module on the real clock).
    """

    def __init__(self, *, key_timeout: float = KEY_TIMEOUT, turn_budget: float = TURN_BUDGET,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.key_timeout = key_timeout
        self.turn_budget = turn_budget
        self.clock = clock
        self.deadline = clock() + turn_budget
        self.overruns: dict[str, str] = {}

    def timeout(self) -> tuple[float, bool]:
        """(seconds the next search may take, whether the turn's budget is what limits it)."""
        left = self.deadline - self.clock()
        if left < self.key_timeout:
            return max(left, _MIN_TIMEOUT), True
        return self.key_timeout, False


_current: ContextVar[RegexBudget | None] = ContextVar("regex_budget", default=None)


@contextmanager
def regex_budget(*, key_timeout: float = KEY_TIMEOUT, turn_budget: float = TURN_BUDGET,
                 clock: Callable[[], float] = time.monotonic) -> Iterator[RegexBudget]:
    """Run one turn's matching under a fresh budget; read ``overruns`` afterwards."""
    budget = RegexBudget(key_timeout=key_timeout, turn_budget=turn_budget, clock=clock)
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


# Under IGNORECASE ``re`` also makes dotless "ı" and dotted "İ" equal to "i" (by their simple
# upper/lower case); ``regex`` folds by simple case folding, which keeps them apart. Mapping them
# to "i"/"I" in pattern and text (one character each, offsets kept) gives ``re``'s answer.
_TURKIC_I = str.maketrans({"\u0131": "i", "\u0130": "I"})


@lru_cache(maxsize=4096)
def _bounded(source: str, flags: int) -> Any:
    # VERSION0 is ``re``'s own dialect; the flag values are the same in both modules.
    if flags & re.IGNORECASE:
        source = source.translate(_TURKIC_I)
    return _regex.compile(source, flags | _regex.VERSION0)


def bounded_search(pattern: re.Pattern[str], text: str, pos: int = 0, *, key: str,
                   anchored: bool = False) -> bool | None:
    """``pattern.search`` (``match`` when ``anchored``) under the budget; ``None`` when it overran.

    A key that already overran in this turn is not run again (``None`` at once).
    Outside any :func:`regex_budget` each search still gets :data:`KEY_TIMEOUT`.
    """
    budget = _current.get()
    if budget is None:
        timeout, spent = KEY_TIMEOUT, False
    else:
        if key in budget.overruns:
            return None
        timeout, spent = budget.timeout()
    compiled = _bounded(pattern.pattern, pattern.flags)
    if pattern.flags & re.IGNORECASE and not text.isascii():
        text = text.translate(_TURKIC_I)
    try:
        found = compiled.match(text, pos, timeout=timeout) if anchored else compiled.search(text, pos, timeout=timeout)
    except TimeoutError:
        if budget is not None:
            budget.overruns[key] = (
                f"the turn's regex budget ({budget.turn_budget * 1000:.0f} ms) was spent" if spent
                else f"took longer than {timeout * 1000:.0f} ms"
            )
        return None
    return found is not None


def turn_overran() -> bool:
    """Whether a regex key overran in the current turn's budget (the caller then flags entries)."""
    budget = _current.get()
    return budget is not None and bool(budget.overruns)


def overrun_warning(key: str, reason: str) -> str:
    """The request-log warning of a skipped key (the editor shows the same reason)."""
    return f"{REGEX_OVERRUN_CODE}: regex key {key!r} {reason}; skipped this turn"


def overrun_entries(books: Sequence[Book], overruns: Mapping[str, str]) -> dict[tuple[str, str], dict[str, str]]:
    """``{(book id, entry id): {key: reason}}``: the entries holding each key that overran."""
    if not overruns:
        return {}
    found: dict[tuple[str, str], dict[str, str]] = {}
    for book in books:
        holders: list[tuple[str, tuple[str, ...]]] = [
            (e.id, e.keys + e.secondary_keys + _expression_atoms(e.key_expression)) for e in book.entries
        ]
        holders += [(str(w.uid), w.keys + w.secondary_keys) for w in book.world_info]
        for entry_id, keys in holders:
            for key in keys:
                reason = overruns.get(key, overruns.get(key.strip()))
                if reason is not None:
                    found.setdefault((book.id, entry_id), {})[key.strip()] = reason
    return found


def _expression_atoms(text: str) -> tuple[str, ...]:
    """A key expression's regex atoms are keys too (K-1); parsed only when a turn overran."""
    if not text.strip():
        return ()
    try:
        return tuple(atom.text for atom in key_expression_parse(text).atoms if atom.regex)
    except KeyExpressionError:
        return ()


def selection_with_overruns(selection: Selection, flagged: Mapping[tuple[str, str], Mapping[str, str]]) -> Selection:
    """The selection with each flagged entry's log record carrying its overrun warnings."""
    if not flagged:
        return selection
    records = []
    for record in selection.request_log:
        keys = flagged.get((record.book, record.entry))
        if keys:
            extra = tuple(overrun_warning(key, reason) for key, reason in sorted(keys.items()))
            record = dataclasses.replace(record, warnings=record.warnings + extra)
        records.append(record)
    warnings = tuple(overrun_warning(key, reason) for keys in flagged.values() for key, reason in keys.items())
    return dataclasses.replace(selection, request_log=tuple(records), warnings=selection.warnings + warnings)


def is_overrun_warning(warning: str) -> bool:
    return warning.startswith(f"{REGEX_OVERRUN_CODE}:")
