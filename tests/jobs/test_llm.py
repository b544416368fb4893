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
