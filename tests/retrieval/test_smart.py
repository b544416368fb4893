"""The smart profile at the boundaries of every W- number (W-1..W-7)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from retrieval.engine.rules import SMART
from retrieval.engine.smart import (
    canon_budget,
    canon_pack,
    index_line,
    smart_assemble,
    trim_to_tokens,
)
from retrieval.engine.tokenizers import tokenizer_by_name
from retrieval.engine.values import (
    Book,
    BookSettings,
    Entry,
    Message,
    Model,
    TurnRequest,
)

TOKENS = tokenizer_by_name("ceil-chars-4")


def text(tokens: int, word: str = "lore") -> str:
    """Exactly ``tokens`` tokens under ceil(chars/4), made of words."""
    body = (f"{word} " * tokens * 4)[: tokens * 4 - 1] + "."
    assert TOKENS.count(body) == tokens
    return body


def canon(id: str, tokens: int, **kw) -> Entry:
    return Entry(id=id, title=f"Canon {id}", content=text(tokens), canon=True, **kw)


def relevant(id: str, tokens: int, title: str | None = None, **kw) -> Entry:
    return Entry(id=id, title=title or f"Topic {id}", content=text(tokens), **kw)


def run(entries: Sequence[Entry], chat: Sequence[tuple[str, str]] = (("user", "Hello there."),), window: int = 2000,
        books: Sequence[Book] | None = None, meaning=None):
    request = TurnRequest(
        profile="smart",
        books=tuple(books) if books else (Book(id="b", name="World", entries=tuple(entries)),),
        chat=tuple(Message(role=role, text=body) for role, body in chat),
        model=Model(tokenizer="ceil-chars-4", input_window=window),
    )
    return smart_assemble(request, tokenizer=TOKENS, meaning=meaning)


def slot(selection, name: str) -> list[str]:
    return [i.entry for i in selection.injections if i.slot == name]


def outcome(selection, entry: str) -> str:
    return next(r.outcome for r in selection.request_log if r.entry == entry)


# W-1 canon budget -------------------------------------------------------------

@pytest.mark.parametrize("window, budget", [(2000, 200), (39_990, 3999), (40_000, 4000), (1_000_000, 4000)])
def test_canon_budget_is_ten_percent_capped_at_4000(window, budget):
    assert canon_budget(window) == budget
    assert canon_budget(window) <= SMART.canon_cap_tokens


def test_canon_pack_keeps_the_first_skips_what_does_not_fit_and_tries_later_ones():
    packing = canon_pack([300, 150, 60, 40, 10], budget=200, tokens=lambda size: size)
    assert [(i.entry, i.fits, i.first, i.used_before) for i in packing.items] == [
        (300, True, True, 0), (150, False, False, 300), (60, False, False, 300), (40, False, False, 300),
        (10, False, False, 300),
    ]
    packing = canon_pack([150, 60, 40, 10], budget=200, tokens=lambda size: size)
    assert [i.fits for i in packing.items] == [True, False, True, True]
    assert (packing.used, packing.total, packing.free) == (200, 260, 0)
    empty = canon_pack([], budget=200, tokens=lambda size: size)
    assert (empty.items, empty.used, empty.free) == ((), 0, 200)


@pytest.mark.parametrize("budget, heavy_at", [(4_000, 3_000), (819, 615), (800, 600), (1, 1), (0, 0)])
def test_canon_is_heavy_from_three_quarters_of_the_budget_rounded_up(budget, heavy_at):
    assert SMART.canon_heavy_percent == 75
    assert SMART.canon_heavy_at(budget) == heavy_at


def test_canon_fits_exactly_at_budget_and_not_one_token_over():
    at = run([canon("c1", 100), canon("c2", 100)])
    assert slot(at, "canon") == ["c1", "c2"]
    over = run([canon("c1", 100), canon("c2", 101)])
    assert slot(over, "canon") == ["c1"]
    assert outcome(over, "c2") == "canon_over_budget"


def test_canon_packs_book_by_book_in_list_order_skipping_what_does_not_fit():
    first = Book(id="b1", name="First", entries=(canon("a", 150), canon("b", 60), canon("c", 40)))
    second = Book(id="b2", name="Second", entries=(canon("d", 10),))
    selection = run([], books=[first, second])
    assert slot(selection, "canon") == ["a", "c", "d"]
    assert outcome(selection, "b") == "canon_over_budget"


def test_first_enabled_canon_is_kept_even_alone_over_budget():
    selection = run([canon("c0", 500, enabled=False), canon("c1", 300), canon("c2", 1)])
    assert slot(selection, "canon") == ["c1"]
    assert outcome(selection, "c0") == "disabled"
    assert outcome(selection, "c2") == "canon_over_budget"


# W-2 whole book ---------------------------------------------------------------

def test_whole_book_travels_when_it_fits_exactly_in_what_canon_left():
    selection = run([canon("c1", 100), relevant("r1", 60), relevant("r2", 40)])
    assert slot(selection, "relevant") == ["r1", "r2"]
    assert all(i.cache_stable for i in selection.injections if i.slot == "relevant")


def test_one_token_more_makes_the_book_big():
    selection = run([canon("c1", 100), relevant("r1", 60), relevant("r2", 41)])
    assert slot(selection, "relevant") == []
    assert slot(selection, "matched")  # matched in list order instead


# W-3 named ---------------------------------------------------------------------

def big_book(named: Sequence[Entry], filler: int = 3) -> list[Entry]:
    return [canon("c1", 10), *named, *[relevant(f"f{i}", 700, title=f"Chronicle {i}") for i in range(filler)]]


def test_named_by_title_or_alias_whole_word_for_latin():
    entries = big_book([relevant("n1", 20, title="Salt Market"), relevant("n2", 20, title="Port", aliases=("Vel",))])
    selection = run(entries, chat=[("user", "Take me to the Salt Market and the Velvet gate.")], window=20_000)
    matched = slot(selection, "matched")
    assert matched[0] == "n1"
    assert "n2" not in matched[:1]
    named = run(entries, chat=[("user", "Vel is where we sail.")], window=20_000)
    assert slot(named, "matched")[0] == "n2"


def test_named_in_cjk_text_as_substring():
    entries = big_book([relevant("n1", 20, title="星見塔")])
    selection = run(entries, chat=[("user", "昨日、古い星見塔の上で星を数えた。")], window=20_000)
    assert slot(selection, "matched")[0] == "n1"


def test_only_the_last_two_character_replies_count():
    entries = big_book([relevant("old", 20, title="Black Lighthouse"), relevant("new", 20, title="Red Bell")], filler=0)
    entries += [relevant(f"f{i}", 700, title=f"Chronicle {i}") for i in range(3)]
    chat = [("assistant", "The Black Lighthouse is far."), ("user", "ok"), ("assistant", "Hm."),
            ("user", "ok"), ("assistant", "Ring the Red Bell."), ("user", "fine")]
    selection = run(entries, chat=chat, window=20_000)
    matched = slot(selection, "matched")
    assert matched[0] == "new"
    record = next(r for r in selection.request_log if r.entry == "old")
    assert "named" not in record.detail


def test_at_most_eight_named_and_four_from_replies():
    titles = [f"Place{i}" for i in range(12)]
    fillers = [relevant(f"f{i}", 5) for i in range(20)]
    named = [relevant(f"n{i}", 5, title=t) for i, t in enumerate(titles)]
    entries = [canon("c1", 10), *fillers, *named, relevant("big", 5000)]
    # The user names six places; the character's replies name six more.
    chat = [("assistant", " ".join(titles[6:12])), ("user", " ".join(titles[:6]))]
    selection = run(entries, chat=chat, window=100_000)
    # Named entries outrank everything: five are injected whole, in the order named.
    assert slot(selection, "matched") == ["n0", "n1", "n2", "n3", "n4"]
    # Eight named in all (six from the user, two more from replies), then plain list order.
    index = [line.entry for line in selection.world_index]
    assert index[:3] == ["n5", "n6", "n7"]
    assert index[3:] == [f"f{i}" for i in range(9)]
    details = {r.entry: r.detail for r in selection.request_log}
    assert details["n8"] == "not named, not matched"


def test_replies_alone_name_at_most_four():
    titles = [f"Place{i}" for i in range(6)]
    entries = [canon("c1", 10), *[relevant(f"f{i}", 5) for i in range(20)],
               *[relevant(f"n{i}", 5, title=t) for i, t in enumerate(titles)], relevant("big", 5000)]
    selection = run(entries, chat=[("assistant", " ".join(titles)), ("user", "Go on.")], window=100_000)
    assert slot(selection, "matched") == ["n0", "n1", "n2", "n3", "f0"]


# W-5 big books -------------------------------------------------------------------

def test_at_most_five_full_entries_within_min_2000_and_canon_leftover():
    entries = [canon("c1", 10), *[relevant(f"r{i}", 300) for i in range(20)]]
    wide = run(entries, window=100_000)  # leftover 3,990: the 2,000 cap applies
    assert len(slot(wide, "matched")) == 5
    assert sum(i.tokens for i in wide.injections if i.slot == "matched") <= 2000
    narrow = run(entries, window=7_000)  # canon budget 700, leftover 690
    assert sum(i.tokens for i in narrow.injections if i.slot == "matched") <= 690
    assert len(slot(narrow, "matched")) == 2


def test_entry_of_800_tokens_is_whole_and_801_is_trimmed():
    exact = run([canon("c1", 10), relevant("w", 800, title="Great Fire"), relevant("x", 5000)],
                chat=[("user", "Tell me of the Great Fire.")], window=100_000)
    injection = next(i for i in exact.injections if i.entry == "w")
    assert injection.tokens == 800 and not injection.content.endswith("…")
    longer = run([canon("c1", 10), relevant("w", 801, title="Great Fire"), relevant("x", 5000)],
                 chat=[("user", "Tell me of the Great Fire.")], window=100_000)
    injection = next(i for i in longer.injections if i.entry == "w")
    assert injection.tokens <= 800 and injection.content.endswith("…")


def test_trim_keeps_a_prefix_cut_at_a_word():
    body = "alpha beta gamma delta epsilon " * 200
    trimmed = trim_to_tokens(body, 50, TOKENS)
    assert TOKENS.count(trimmed) <= 50
    assert body.startswith(trimmed[:-1].rstrip())


def test_world_index_holds_twelve_topics_plus_six_linked():
    linked_titles = [f"Linked{i}" for i in range(8)]
    hub = Entry(id="hub", title="Hub", content="The hub touches " + ", ".join(linked_titles) + ".")
    entries = [canon("c1", 10), hub, *[relevant(f"t{i}", 30) for i in range(20)],
               *[relevant(f"l{i}", 30, title=t) for i, t in enumerate(linked_titles)]]
    selection = run(entries, chat=[("user", "Show me the Hub.")], window=4_000)
    assert slot(selection, "matched")[0] == "hub"
    lines = [line.entry for line in selection.world_index]
    assert len(lines) == 12 + 6
    assert [e for e in lines if e.startswith("l")] == [f"l{i}" for i in range(6)]
    assert all(outcome(selection, e) == "indexed_only" for e in lines)


def test_index_line_is_title_and_first_sentence():
    entry = Entry(id="x", title="Salt Market", content="Traders sell salt by the pinch. Nobody haggles.")
    assert index_line(entry) == "Salt Market — Traders sell salt by the pinch."


# W-4 / W-7 meaning and the fallback ------------------------------------------------

class FakeMeaning:
    """The port's contract only; the real model is tested in test_embeddings/test_indexing."""

    def __init__(self, order: list[str], indexed: bool) -> None:
        self.order, self.indexed, self.calls = order, indexed, 0

    def mostly_indexed(self, book_id: str) -> bool:
        return self.indexed

    def rank(self, *, book_ids, messages, limit):
        self.calls += 1
        assert len(messages) <= 6
        return self.order[:limit]


def test_meaning_ranks_when_indexed_and_list_order_when_not():
    entries = [canon("c1", 10), *[relevant(f"r{i}", 300) for i in range(20)]]
    chat = [("user", f"message {i}") for i in range(9)]
    indexed = FakeMeaning(["r7", "r6", "r5"], indexed=True)
    ranked = run(entries, chat=chat, window=100_000, meaning=indexed)
    assert slot(ranked, "matched")[:3] == ["r7", "r6", "r5"]
    assert indexed.calls == 1
    fallback = run(entries, chat=chat, window=100_000, meaning=FakeMeaning(["r7"], indexed=False))
    assert slot(fallback, "matched") == ["r0", "r1", "r2", "r3", "r4"]
    assert "W-7" in next(r.detail for r in fallback.request_log if r.entry == "r0")


# W-6 disabled ------------------------------------------------------------------------

def test_disabled_entries_reach_no_path():
    hidden = relevant("gone", 20, title="Mirror Hall", enabled=False)
    entries = [canon("c1", 10), hidden, relevant("w", 20, title="Glass Archive"),
               Entry(id="hub", title="Hub", content="Mirror Hall and more."), relevant("x", 3000)]
    selection = run(entries, chat=[("user", "The Mirror Hall, the Glass Archive and the Hub.")], window=20_000)
    assert "gone" not in [i.entry for i in selection.injections]
    assert "gone" not in [line.entry for line in selection.world_index]
    assert outcome(selection, "gone") == "disabled"


def test_switched_off_book_reaches_no_path():
    book = Book(id="b", name="Off", entries=(canon("c1", 10), relevant("r", 10)),
                settings=__import__("retrieval.engine.values", fromlist=["BookSettings"]).BookSettings(active=False))
    selection = run([], books=[book])
    assert selection.injections == ()
    assert {r.outcome for r in selection.request_log} == {"collection_off"}


# C-15 compact log: the simply not matched are counted, not listed ----------------------------

def _big_world(version: int | None = None) -> tuple[Book, ...]:
    entries = [canon("c1", 30), relevant("off", 5, enabled=False)]
    entries += [relevant(f"t{i}", 300, title=f"Place {i}") for i in range(40)]
    world = Book(id="w", name="World", entries=tuple(entries), version=version)
    switched_off = Book(id="s", name="Shelf", entries=(relevant("s1", 5), relevant("s2", 5)),
                        settings=BookSettings(active=False), version=version)
    return (switched_off, world)


def _turn(books: tuple[Book, ...], *, log_full: bool):
    request = TurnRequest(
        profile="smart", books=books, log_full=log_full,
        chat=(Message(role="assistant", text="Place 31 is far."), Message(role="user", text="Go to Place 7.")),
        model=Model(tokenizer="ceil-chars-4", input_window=20_000),
    )
    return smart_assemble(request, tokenizer=TOKENS)


@pytest.mark.parametrize("version", [None, 3])
def test_compact_log_is_the_full_log_without_the_simply_not_matched_and_counts_them(version):
    books = _big_world(version)
    full = _turn(books, log_full=True)
    compact = _turn(books, log_full=False)
    assert compact.injections == full.injections and compact.world_index == full.world_index
    explained = tuple(r for r in full.request_log if r.outcome != "not_matched")
    # Same records in the same (book, list) order; switched-off, disabled, canon, named and indexed kept.
    assert compact.request_log == explained
    assert {r.outcome for r in compact.request_log} == {"collection_off", "disabled", "injected", "indexed_only"}
    assert full.not_matched_unlisted == 0
    assert compact.not_matched_unlisted == len(full.request_log) - len(explained) > 0
    assert len(compact.request_log) + compact.not_matched_unlisted == 2 + 42


def test_a_new_book_version_is_planned_again():
    first = _turn(_big_world(1), log_full=False)
    world = _big_world(1)[1]
    renamed = Book(id="w", name="World", version=2, entries=tuple(
        replace(e, title="Harbour 7") if e.id == "t7" else e for e in world.entries))
    second = _turn((_big_world(1)[0], renamed), log_full=False)
    assert "t7" in slot(first, "matched") and "t7" not in slot(second, "matched")
