"""The port's pieces without a database: Retry-After forms and the tolerant JSON reader."""
from __future__ import annotations

import email.utils
import time

import pytest

from jobs.llm import NotJson, _retry_after, parse_json


def test_retry_after_in_seconds_milliseconds_and_as_a_date() -> None:
    assert _retry_after({"retry-after": "7"}) == 7.0
    assert _retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    when = email.utils.formatdate(time.time() + 20, usegmt=True)
    assert 17 <= (_retry_after({"retry-after": when}) or 0) <= 20
    assert _retry_after({}) is None


def test_parse_json_reads_what_models_write() -> None:
    assert parse_json('{"entries": []}') == ({"entries": []}, False)
    assert parse_json('Sure:\n```json\n{"entries": [1]}\n```\nBye') == ({"entries": [1]}, False)
    assert parse_json('{"entries": [1]} and that is all.') == ({"entries": [1]}, False)
    value, cut = parse_json('{"entries": [{"title": "A"}, {"title": "B", "lore": "cut he')
    assert cut and value == {"entries": [{"title": "A"}]}
    with pytest.raises(NotJson):
        parse_json("No JSON at all, sorry.")


def test_a_cancel_during_the_wait_between_tries_sends_nothing_more(llm_server) -> None:
    """Issue 33: the retry loop asks its caller before every try and through every wait; the 3 s the
    server's Retry-After asked for is cut at the first poll, and the request it sent is counted."""
    from jobs.llm import LlmCancelled, LlmConfig, OpenAICompatible
    from tests.jobs.llm_server import error

    llm_server.script(error(503, "busy", headers={"Retry-After": "3"}))
    pressed = {"cancel": False}
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # the injected clock: Cancel is pressed during the first wait
        slept.append(seconds)
        pressed["cancel"] = True

    client = OpenAICompatible(LlmConfig(base_url=llm_server.base_url, model="m", max_retries=5, timeout=2.0),
                              sleep=sleep)
    with pytest.raises(LlmCancelled) as caught:
        client.complete([{"role": "user", "content": "hi"}], cancelled=lambda: pressed["cancel"])
    assert len(llm_server.requests) == 1 and caught.value.usage.calls == 1
    assert sum(slept) == OpenAICompatible.poll  # not the 3 s asked for
    assert llm_server.requests[0]["body"]["max_tokens"] == 4096  # LlmConfig's default limit


def test_a_server_that_refuses_max_tokens_is_asked_again_without_it(llm_server) -> None:
    from jobs.llm import LlmConfig, OpenAICompatible
    from tests.jobs.llm_server import completion, error

    llm_server.script(error(400, "max_tokens must be at most 2048", type_="invalid_request_error"), completion("ok"))
    client = OpenAICompatible(LlmConfig(base_url=llm_server.base_url, model="m", max_tokens=8192))
    answer = client.complete([{"role": "user", "content": "hi"}])
    assert answer.text == "ok" and answer.usage.calls == 2  # the refused request counts too
    assert [("max_tokens" in r["body"]) for r in llm_server.requests] == [True, False]
