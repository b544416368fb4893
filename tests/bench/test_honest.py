"""The bench helpers that decide what a figure means (bench/honest.py, bench/context_load.py)."""
from __future__ import annotations

import copy

import pytest

from bench.context_load import _server_timing, _step_medians, answer_differences
from bench.honest import engine_memos_clear, ratio, summary_ms
from retrieval.engine.classic import classic_assemble
from retrieval.engine.keyword import book_set_compile
from retrieval.engine.tokenizers import tokenizer_by_name
from retrieval.engine.values import Book, BookSettings, Entry, Message, TurnRequest
from tests.books.factories import make_book, make_entry
from tests.platform.test_context_api import _attach, _character, _chat


def test_summary_is_the_median_not_the_best_sample() -> None:
    figures = summary_ms([1.0, 9.0, 10.0, 11.0, 30.0])
    assert figures["p50_ms"] == 10.0
    assert figures["min_ms"] == 1.0
    assert figures["n"] == 5


def test_ratio_is_median_over_median() -> None:
    assert ratio([100.0, 200.0, 300.0], [1.0, 2.0, 100.0]) == 100.0


def test_memos_emptied_means_the_next_turn_remembers_nothing() -> None:
    book = Book(id="b", name="B", version=1, entries=(Entry(id="e1", title="E", content="Lore.", keys=("amber",)),),
                settings=BookSettings())
    tokenizer = tokenizer_by_name("cl100k_base")
    request = TurnRequest(profile="classic", books=(book,), chat=(Message(role="user", text="an amber stone"),))
    assert classic_assemble(request, tokenizer=tokenizer).injections
    matcher = book_set_compile((book,), profile="classic").matcher
    assert len(matcher._known._items) > 0  # type: ignore[attr-defined]
    assert len(tokenizer._counted._items) > 0  # type: ignore[attr-defined]
    engine_memos_clear()
    assert len(matcher._known._items) == 0  # type: ignore[attr-defined]
    assert len(tokenizer._counted._items) == 0  # type: ignore[attr-defined]


def test_server_timing_header_is_read_step_by_step() -> None:
    steps = _server_timing("app;dur=12.50, gather;dur=1.00, turn;dur=4.00, engine;dur=3.00")
    assert steps == {"app": 12.5, "gather": 1.0, "turn": 4.0, "engine": 3.0}
    medians = _step_medians([steps, {"app": 20.0, "engine": 2.0}, {"app": 10.0, "engine": 5.0}])
    assert medians["engine_p50_ms"] == 3.0
    assert medians["engine_share_of_app_p50"] == 0.24


@pytest.mark.django_db
def test_context_load_finds_an_http_answer_that_differs_from_the_turn_in_process(tenant_a):
    book = make_book(tenant_a, owner="admin", title="Armoury", profile="sillytavern", scan_depth=2)
    make_entry(book, title="Sword", keys=["sword"], content="The sword remembers.", extra={"st": {"sticky": 5}})
    kael = _character(tenant_a, "Kael")
    _attach(tenant_a, "character", kael, book)
    chat = _chat(tenant_a, kind="character", character_id=kael, profile="sillytavern")
    state: dict = {}
    samples = []
    # The second turn no longer reaches the sword (scan depth 2): only the state from turn one keeps it.
    for messages in (["I draw the sword."], ["I draw the sword.", "Steel rings.", "We walk on."]):
        request = {"messages": [{"role": "user", "text": text} for text in messages],
                   "model": {"tokenizer": "ceil-chars-4", "input_window": 8192}}
        answer = tenant_a.admin_client.post(f"/api/v1/chats/{chat}/context", request, format="json").json()
        samples.append({"chat": chat, "request": request, "state": state, "answer": answer})
        state = answer["timed_state"]
    assert samples[1]["answer"]["injections"]
    assert [answer_differences(sample) for sample in samples] == [[], []]

    altered = copy.deepcopy(samples[1])
    altered["answer"]["injections"][0]["content"] += " (changed)"
    assert answer_differences(altered) == ["injections"]
    stale = {**samples[1], "state": {}}  # the turn run from the wrong state answers differently
    assert "injections" in answer_differences(stale)


def test_context_load_run_ends_with_its_last_answer() -> None:
    """The saturated figure is answers / elapsed: a run must end when its last answer arrives, not wait
    out a select timeout with nothing in flight (that second cut every saturated figure by a fifth)."""
    import http.server
    import threading
    import time

    from bench.context_load import Run, _Client, _clients_loop

    class Answer(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers["Content-Length"]))
            body = b'{"timed_state": {}}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        clients = [_Client(port=server.server_address[1], key="k", chat=n, keys=["amber"], requests=3, seed=n,
                           think_ms=0.0, history="rolling") for n in range(2)]
        run = Run()
        started = time.perf_counter()
        _clients_loop(clients, run, None, 0)
        elapsed = time.perf_counter() - started
    finally:
        server.shutdown()
        server.server_close()
    assert run.answered == 6 and not run.errors
    assert elapsed < 0.5
