"""The judged set of bench.library_search names real corpus books, and the bench's scoring is P@5."""
from __future__ import annotations

import json

from bench.library_search import DEFAULT_JUDGED, _score
from tests.shared_data import require_shared


def test_every_judged_book_is_a_corpus_file() -> None:
    corpus = require_shared("corpus")
    judged = json.loads(DEFAULT_JUDGED.read_text(encoding="utf-8"))["queries"]
    assert len([q for q in judged if not q.get("none")]) >= 15
    missing = [p for q in judged for p in q["relevant"] if not (corpus / p).is_file()]
    assert missing == []
    assert all(q["relevant"] == [] for q in judged if q.get("none"))


def test_precision_at_5_counts_relevant_books_among_the_first_five() -> None:
    assert _score([1, 9, 2, 8, 7, 3], {1, 2, 3}) == {"p_at_5": 0.4, "p_at_5_reachable": 2 / 3}
    assert _score([], {1})["p_at_5"] == 0.0
