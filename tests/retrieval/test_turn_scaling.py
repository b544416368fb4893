"""A classic turn's work follows the entries it touches, not the book's size (issue 29, point 1).

Work is counted, not timed: :func:`bench.honest.engine_lines` counts the engine's executed
Python lines for one turn, the same on a loaded machine as on a quiet one.
"""
from __future__ import annotations

import random

from bench.honest import engine_lines
from retrieval.engine.classic import classic_assemble
from retrieval.engine.tokenizers import tokenizer_by_name
from retrieval.engine.values import (
    Book,
    BookSettings,
    Entry,
    Message,
    Outcome,
    Selection,
    TurnRequest,
)

_WORDS = ["amber", "river", "stone", "north", "gate", "salt", "tower", "market", "lord", "winter"]


def _turn(book: Book, turn: int, said: str) -> Selection:
    chat = tuple(Message(role="user", text=f"{said} ({number})") for number in range(turn, turn + 4))
    request = TurnRequest(profile="classic", books=(book,), chat=chat, seed="s", turn=turn, log_full=False)
    return classic_assemble(request, tokenizer=tokenizer_by_name("cl100k_base"))


def _rolling_work(book: Book, said: str) -> tuple[Selection, int]:
    """The work of a rolling turn: the chat has been seen before, one message is new."""
    _turn(book, 0, said)
    return engine_lines(lambda: _turn(book, 1, said))


def _flood(entries: int) -> Book:
    """Every entry keyed on "beacon", ~1,500 characters each: the chat's one word activates all of them."""
    rng = random.Random(1)
    return Book(
        id=f"flood-{entries}", name="Flood", version=1,
        entries=tuple(
            Entry(id=f"e{i}", content=f"Lore {i}: " + " ".join(rng.choice(_WORDS) for _ in range(250)),
                  keys=("beacon", f"name{i}"), order=i % 97, priority=i % 13)
            for i in range(entries)
        ),
        settings=BookSettings(scan_depth=4, token_budget=1_000, recursive=False),
    )


def test_a_flood_costs_the_same_per_activated_entry_at_four_times_the_size() -> None:
    # 2,000 entries of 1,500 characters (3 MB of activated lore) used to overflow the tokenizer's
    # shared 2 MB memo and re-tokenise every entry every turn; 500 entries (0.75 MB) did not.
    small_selection, small = _rolling_work(_flood(500), "the beacon is lit")
    big_selection, big = _rolling_work(_flood(2_000), "the beacon is lit")
    assert sum(r.outcome == Outcome.OVER_BUDGET for r in big_selection.request_log) > 1_900  # all activated
    assert len(small_selection.request_log) == 500 and len(big_selection.request_log) == 2_000
    per_entry_small, per_entry_big = small / 500, big / 2_000
    assert per_entry_big <= per_entry_small * 1.03, (per_entry_small, per_entry_big)


def _sparse(entries: int) -> Book:
    """A chain of ten entries named by the chat and each other, and ``entries - 10`` nobody names."""
    rng = random.Random(2)
    chain = [
        Entry(id=f"c{i}", content=f"Chain {i} leads to name{i + 1}. " + " ".join(rng.choice(_WORDS) for _ in range(40)),
              keys=(f"name{i}",), order=i, priority=i)
        for i in range(10)
    ]
    rest = [
        Entry(id=f"r{i}", content=" ".join(rng.choice(_WORDS) for _ in range(40)), keys=(f"other{i}", f"alias{i}"),
              order=i % 50, priority=i % 7)
        for i in range(entries - 10)
    ]
    return Book(id=f"sparse-{entries}", name="Sparse", version=1, entries=tuple(chain + rest),
                settings=BookSettings(scan_depth=4, token_budget=1_000, recursive=True))


def test_entries_nothing_happens_to_cost_nothing_per_turn() -> None:
    small_selection, small = _rolling_work(_sparse(500), "ask about name0")
    big_selection, big = _rolling_work(_sparse(10_000), "ask about name0")
    # The same entries touched (name0 and three recursion passes), the same answer...
    assert [(r.entry, r.outcome) for r in small_selection.request_log] == [
        (r.entry, r.outcome) for r in big_selection.request_log
    ]
    assert big_selection.not_matched_unlisted == small_selection.not_matched_unlisted + 9_500
    # ...for the same work, though the book is twenty times the size.
    assert big <= small * 1.1, (small, big)
