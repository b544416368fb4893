"""A compact request log (C-15) built from what the turn touched says what the full log says.

The keyword profiles list in a compact log only the entries the turn did something with
(and the disabled / switched-off ones a compact log always shows), counting the simply not
matched instead of building a record for each (issue 18). What a partner app reads must not
change: the compact log filtered from the full one, the same counts, the same injections.
"""
from __future__ import annotations

import random
from typing import Any

import pytest

from retrieval.engine import assemble
from retrieval.engine.regex_budget import is_overrun_warning, regex_budget
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

CEIL4 = tokenizer_by_name("ceil-chars-4")
WORDS = ("amber", "bastion", "cinder", "dagger", "ember", "falcon", "garnet", "harbor", "ivory", "jasper", "kestrel",
         "lantern", "meadow")


def _compact(records: tuple[Any, ...]) -> list[Any]:
    """What a compact log shows, read off a full one (the rule as TurnAnswer applies it)."""
    return [r for r in records if r.outcome != Outcome.NOT_MATCHED or any(map(is_overrun_warning, r.warnings))]


def _word(rng: random.Random) -> str:
    return f"{rng.choice(WORDS)}{rng.randint(1, 30)}"


def _entry(rng: random.Random, book: str, index: int, profile: str) -> Entry:
    keys = tuple(_word(rng) for _ in range(rng.choice((0, 1, 2, 3))))
    content = " ".join(_word(rng) if rng.random() < 0.3 else "lore" for _ in range(12))
    if profile == "classic" and rng.random() < 0.15:
        content = rng.choice(("@@activate_only_after 3", "@@probability 40", "@@activate_only_every 2")) + "\n" + content
    return Entry(
        id=f"{book}-{index}",
        content=content,
        keys=keys,
        secondary_keys=tuple(_word(rng) for _ in range(rng.choice((0, 0, 1)))),
        secondary_logic=rng.choice(("and_any", "and_all", "not_any", "not_all")),
        constant=rng.random() < 0.04,
        enabled=rng.random() > 0.08,
        probability=rng.choice((None, None, None, 50)),
        priority=rng.randint(0, 20),
        order=rng.randint(0, 200),
        channels=("general",) if profile == "server" and rng.random() < 0.1 else (),
    )


def _books(rng: random.Random, profile: str) -> tuple[Book, ...]:
    books = []
    for number in range(3):
        name = f"b{number}"
        settings = BookSettings(scan_depth=rng.choice((2, 4, 8)), token_budget=rng.choice((60, 200, 2000)),
                                recursive=rng.random() < 0.6, active=profile != "server" or number != 2)
        books.append(Book(id=name, name=name, settings=settings,
                          entries=tuple(_entry(rng, name, i, profile) for i in range(60))))
    return tuple(books)


def _turn(books: tuple[Book, ...], chat: tuple[Message, ...], profile: str, *, full: bool) -> Selection:
    request = TurnRequest(profile=profile, books=books, chat=chat, seed="chat-7", log_full=full)  # type: ignore[arg-type]
    with regex_budget():
        return assemble(request, tokenizer=CEIL4)


@pytest.mark.parametrize("profile", ["classic", "server"])
def test_the_compact_log_of_a_touched_only_turn_is_the_full_log_compacted(profile: str) -> None:
    rng = random.Random(18)
    listed_less = explained_unrecursed = 0
    for _ in range(40):
        books = _books(rng, profile)
        chat = tuple(Message(role="user" if n % 2 else "assistant", text=" ".join(_word(rng) for _ in range(8)))
                     for n in range(rng.randint(1, 10)))
        full, compact = _turn(books, chat, profile, full=True), _turn(books, chat, profile, full=False)
        assert full.not_matched_unlisted == 0 and len(full.request_log) == 180
        assert _compact(compact.request_log) == _compact(full.request_log)
        assert len(compact.request_log) + compact.not_matched_unlisted == len(full.request_log)
        not_matched = sum(r.outcome == Outcome.NOT_MATCHED for r in full.request_log)
        assert sum(r.outcome == Outcome.NOT_MATCHED for r in compact.request_log) + compact.not_matched_unlisted == not_matched
        assert compact.injections == full.injections and compact.state == full.state
        listed_less += len(compact.request_log) < len(full.request_log)
        explained_unrecursed += sum("recursive scanning off" in r.detail for r in full.request_log)
    assert listed_less == 40  # the point of it: the simply not matched are never built
    if profile == "classic":  # not matched, explained in the full log only: counted alike in both
        assert explained_unrecursed > 10


def test_a_turn_whose_regex_key_overran_lists_every_entry() -> None:
    """The overrun's warning goes on its entry's record afterwards: that record must be there."""
    evil = Entry(id="evil", keys=("/(a+)+$/",), content="never")
    quiet = tuple(Entry(id=f"q{i}", keys=(f"nothing{i}",)) for i in range(5))
    books = (Book(id="b", name="b", settings=BookSettings(scan_depth=2), entries=(evil, *quiet)),)
    chat = (Message(role="user", text="a" * 5000 + "!"),)
    request = TurnRequest(profile="classic", books=books, chat=chat, log_full=False)
    with regex_budget(key_timeout=0.002, turn_budget=0.01) as budget:
        selection = assemble(request, tokenizer=CEIL4)
    assert budget.overruns
    assert [r.entry for r in selection.request_log] == ["evil", "q0", "q1", "q2", "q3", "q4"]
    assert selection.not_matched_unlisted == 0
