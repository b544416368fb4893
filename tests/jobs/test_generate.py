"""Generate with AI (A-1) through the API, against a local OpenAI-compatible server (real HTTP)."""
from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.jobs.llm_server import Reply, completion, entries_json, error

pytestmark = pytest.mark.django_db

WORLD = "A drowned archipelago where lighthouse-keepers rule and the tide hides old gods."


def entry(n: int, *, lore: str | None = None, canon: bool = False) -> dict[str, Any]:
    return {"title": f"Isle number {n}", "lore": lore or f"The isle number {n} is ruled by a keeper of the light.",
            "aliases": [f"Isle {n}"], "canon": canon}


def good(count: int = 5) -> str:
    return entries_json([entry(n, canon=n == 1) for n in range(1, count + 1)])


def start(client: Any, capture: Any, **body: Any) -> Any:
    with capture(execute=True):
        response = client.post("/api/v1/jobs/generate", {"description": WORLD, **body}, format="json")
    return response


def job(client: Any, response: Any) -> dict[str, Any]:
    assert response.status_code == 202, response.json()
    got = client.get(f"/api/v1/jobs/{response.json()['id']}")
    assert got.status_code == 200
    return got.json()


def test_a_draft_of_entries_with_usage_and_the_exact_request(tenant_a, model, django_capture_on_commit_callbacks):
    model.script(completion(good(5), prompt_tokens=321, completion_tokens=123))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks, language="es"))
    assert body["state"] == "done" and body["progress"] == 100
    assert [e["title"] for e in body["draft"]] == [f"Isle number {n}" for n in range(1, 6)]
    assert [e["canon"] for e in body["draft"]] == [True, False, False, False, False]
    assert body["usage"] == {"prompt_tokens": 321, "completion_tokens": 123, "total_tokens": 444, "calls": 1}
    sent = model.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == "Bearer sk-test"
    assert sent["body"]["model"] == "test-model"
    assert sent["body"]["response_format"]["type"] == "json_schema"
    assert sent["body"]["response_format"]["json_schema"]["schema"]["required"] == ["entries"]
    assert WORLD in sent["body"]["messages"][-1]["content"] and "'es'" in sent["body"]["messages"][-1]["content"]


def test_no_model_configured_is_said_clearly(tenant_a, no_model, django_capture_on_commit_callbacks):
    response = start(tenant_a.admin_client, django_capture_on_commit_callbacks)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "no_model_configured"
    assert response.json()["error"]["rule"] == "A-3"
    assert tenant_a.admin_client.get("/api/v1/jobs").json()["count"] == 0


def test_the_description_limit_is_4000_characters(tenant_a, model, django_capture_on_commit_callbacks):
    model.script(completion(good()))
    assert start(tenant_a.admin_client, django_capture_on_commit_callbacks, description="x" * 4000).status_code == 202
    refused = start(tenant_a.admin_client, django_capture_on_commit_callbacks, description="x" * 4001)
    assert refused.status_code == 422
    assert refused.json()["error"]["field"] == "description" and refused.json()["error"]["rule"] == "W-12"
    assert len(model.requests) == 1


def test_401_fails_at_once_with_a_reason(tenant_a, model, django_capture_on_commit_callbacks):
    model.script(error(401, "Incorrect API key provided", type_="invalid_request_error", code="invalid_api_key"))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "failed"
    assert body["error"]["code"] == "model_auth_failed" and "API key" in body["error"]["message"]
    assert len(model.requests) == 1  # a refused key is not retried


def test_429_waits_what_retry_after_says(tenant_a, model, django_capture_on_commit_callbacks):
    model.script(error(429, "Rate limit reached", type_="requests", headers={"Retry-After": "1"}), completion(good()))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "done"
    assert len(model.requests) == 2
    assert model.times[1] - model.times[0] >= 0.95  # the backoff alone would be 0.5 s


def test_429_that_never_ends_fails_as_rate_limited(tenant_a, model, settings, django_capture_on_commit_callbacks):
    settings.LOREWEAVE_LLM_MAX_RETRIES = 1
    model.script(error(429, "Rate limit reached", headers={"Retry-After": "0"}))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "failed" and body["error"]["code"] == "model_rate_limited"
    assert len(model.requests) == 2


def test_500_is_retried_then_fails(tenant_a, model, django_capture_on_commit_callbacks):
    model.script(error(500, "internal error"))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "failed" and body["error"]["code"] == "model_server_error"
    assert len(model.requests) == 3  # the first call and two retries


def test_500_then_success_is_done(tenant_a, model, django_capture_on_commit_callbacks):
    model.script(error(503, "overloaded"), completion(good()))
    assert job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))["state"] == "done"


def test_a_timeout_fails_with_the_time_waited(tenant_a, model, settings, django_capture_on_commit_callbacks):
    settings.LOREWEAVE_LLM_TIMEOUT = 0.3
    settings.LOREWEAVE_LLM_MAX_RETRIES = 1
    model.script(Reply(body=completion(good()).body, delay=1.0))
    began = time.monotonic()
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "failed" and body["error"]["code"] == "model_timeout"
    assert "0.3 seconds" in body["error"]["message"]
    assert len(model.requests) == 2 and time.monotonic() - began < 5


def test_fenced_json_with_prose_around_it(tenant_a, model, django_capture_on_commit_callbacks):
    model.script(completion(f"Here is your world!\n```json\n{good(4)}\n```\nEnjoy the isles."))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "done" and len(body["draft"]) == 4


def test_a_truncated_answer_keeps_its_whole_entries(tenant_a, model, django_capture_on_commit_callbacks):
    text = good(6)
    cut = text[: text.index("Isle number 6") + 20]  # inside the sixth entry
    model.script(completion(cut, finish_reason="length"))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "done"
    assert [e["title"] for e in body["draft"]] == [f"Isle number {n}" for n in range(1, 6)]
    assert any("cut off" in w for w in body["warnings"])


def test_malformed_json_is_repaired(tenant_a, model, django_capture_on_commit_callbacks):
    broken = good(4).replace('"aliases"', "aliases").replace("}]}", "},]}")  # unquoted key, trailing comma
    model.script(completion(broken))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "done" and len(body["draft"]) == 4


def test_text_that_is_not_json_fails_after_bounded_re_asks(tenant_a, model, django_capture_on_commit_callbacks):
    model.script(completion("I'm sorry, I can only write poems about lighthouses."))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "failed" and body["error"]["code"] == "draft_not_usable"
    assert "not JSON" in body["error"]["message"]
    assert len(model.requests) == 3  # LOREWEAVE_GENERATE_ATTEMPTS
    assert body["usage"]["calls"] == 3


def test_too_few_entries_are_asked_again(tenant_a, model, django_capture_on_commit_callbacks):
    model.script(completion(good(3)), completion(good(4)))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "done" and len(body["draft"]) == 4
    feedback = model.requests[1]["body"]["messages"][-1]["content"]
    assert "3 usable entries" in feedback and "4–16" in feedback
    assert body["usage"]["calls"] == 2


def test_too_many_entries_keep_the_first_sixteen_with_a_warning(tenant_a, model, django_capture_on_commit_callbacks):
    # Issue 33: a draft of 30 entries failed the whole job (after 3 calls) instead of keeping 16.
    model.script(completion(good(30)))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "done" and len(model.requests) == 1
    assert [e["title"] for e in body["draft"]] == [f"Isle number {n}" for n in range(1, 17)]
    assert any("gave 30 entries; the draft keeps 16" in w and "'Isle number 17'" in w for w in body["warnings"])


def test_too_many_entries_keep_the_valid_ones_before_the_flagged(tenant_a, model, django_capture_on_commit_callbacks):
    bad = {"title": "Isle number 0", "lore": "short", "aliases": [], "canon": False}
    model.script(completion(entries_json([bad, *[entry(n, canon=n == 1) for n in range(1, 17)]])))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "done" and len(body["draft"]) == 16
    assert "Isle number 0" not in [e["title"] for e in body["draft"]]
    assert not any(e.get("flags") for e in body["draft"])


def test_sixteen_entries_are_fine(tenant_a, model, django_capture_on_commit_callbacks):
    model.script(completion(good(16)))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "done" and len(body["draft"]) == 16 and len(model.requests) == 1


def test_over_long_lore_is_named_and_asked_again(tenant_a, model, django_capture_on_commit_callbacks):
    first = [entry(1, canon=True), entry(2), entry(3), entry(4, lore="w" * 20_001)]
    model.script(completion(entries_json(first)), completion(entries_json([*first[:3], entry(4, lore="w" * 20_000)])))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "done" and len(body["draft"][3]["lore"]) == 20_000
    assert "20,001" in model.requests[1]["body"]["messages"][-1]["content"]


def test_a_usable_draft_with_one_bad_entry_is_kept_with_that_entry_flagged(tenant_a, model,
                                                                           django_capture_on_commit_callbacks):
    # Issue 33: one bad entry cost 3 full calls and was dropped; the draft is usable, so it is kept at once.
    answer = entries_json([entry(1, canon=True), entry(2), entry(3), entry(4),
                           {"title": "Isle number 5", "lore": "short", "aliases": [], "canon": False}])
    model.script(completion(answer))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "done" and len(model.requests) == 1 and body["usage"]["calls"] == 1
    assert [e["title"] for e in body["draft"]] == [f"Isle number {n}" for n in range(1, 6)]
    assert [bool(e.get("flags")) for e in body["draft"]] == [False, False, False, False, True]
    assert "20" in body["draft"][4]["flags"][0] and "entry 5" in body["draft"][4]["flags"][0]
    assert any(w.startswith("flagged: entry 5") for w in body["warnings"])
    # Accepting the whole draft keeps what needs no look; the flagged entry goes in only when sent back fixed.
    with django_capture_on_commit_callbacks(execute=True):
        receipt = tenant_a.admin_client.post(f"/api/v1/jobs/{body['id']}/accept", {}, format="json")
    assert receipt.status_code == 201, receipt.json()
    assert receipt.json()["added"] == 4


def test_a_flagged_first_entry_is_not_made_canon(tenant_a, model, django_capture_on_commit_callbacks):
    bad = {"title": "Isle number 0", "lore": "short", "aliases": [], "canon": False}
    model.script(completion(entries_json([bad, *[entry(n) for n in range(1, 5)]])))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert [e["canon"] for e in body["draft"]] == [False, True, False, False, False]


def test_a_placeholder_alias_is_removed_from_a_generated_draft(tenant_a, model, django_capture_on_commit_callbacks):
    entries = [entry(n, canon=n == 1) for n in range(1, 5)]
    entries[1]["aliases"] = ["...", "Isle 2", "…", "alias", ""]
    model.script(completion(entries_json(entries)))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "done"
    assert body["draft"][1]["aliases"] == ["Isle 2"]
    assert any("placeholder" in w and "'...'" in w for w in body["warnings"])


def test_a_server_without_structured_output_is_asked_without_it(tenant_a, model, django_capture_on_commit_callbacks):
    model.script(error(400, "response_format json_schema is not supported", type_="invalid_request_error"),
                 completion(good()))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "done"
    assert "response_format" in model.requests[0]["body"] and "response_format" not in model.requests[1]["body"]


def test_the_target_books_titles_are_not_repeated(tenant_a, model, django_capture_on_commit_callbacks):
    book = tenant_a.admin_client.post("/api/v1/books", {"title": "Isles", "profile": "smart"}, format="json").json()
    tenant_a.admin_client.post(f"/api/v1/books/{book['id']}/entries",
                               {"title": "Isle number 1", "content": "Already written about the first isle."},
                               format="json")
    model.script(completion(good(5)), completion(entries_json([entry(n) for n in range(2, 7)])))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks, book=book["id"]))
    assert "Isle number 1" in model.requests[0]["body"]["messages"][-1]["content"]
    assert body["state"] == "done"
    assert "Isle number 1" not in [e["title"] for e in body["draft"]]
    assert json.dumps(body["draft"]).count("Isle number 1\"") == 0


def test_an_empty_draft_fails_with_the_count(tenant_a, model, django_capture_on_commit_callbacks):
    model.script(completion(entries_json([])))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "failed" and "0 usable entries" in body["error"]["message"]
    assert len(model.requests) == 3


def test_an_unreachable_server_fails_saying_so(tenant_a, model, settings, django_capture_on_commit_callbacks):
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.LOREWEAVE_LLM_BASE_URL = f"http://127.0.0.1:{port}/v1"
    settings.LOREWEAVE_LLM_MAX_RETRIES = 0
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "failed" and body["error"]["code"] == "model_unreachable"
    assert f"127.0.0.1:{port}" in body["error"]["message"]


def test_an_unknown_model_fails_saying_so(tenant_a, model, django_capture_on_commit_callbacks):
    model.script(error(404, "The model `test-model` does not exist", type_="invalid_request_error",
                       code="model_not_found"))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "failed" and body["error"]["code"] == "model_not_found"
    assert "'test-model'" in body["error"]["message"] and len(model.requests) == 1


@pytest.mark.parametrize("count,marked,kept", [(4, 4, 1), (5, 5, 2), (8, 8, 2), (9, 9, 3), (16, 16, 4), (7, 0, 1)])
def test_a_few_entries_stay_canon_at_most_a_quarter_rounded_up(tenant_a, model, django_capture_on_commit_callbacks,
                                                              count, marked, kept):
    # "a few marked canon" — a model that marks everything canon keeps the first quarter (rounded
    # up), one that marks nothing gets the first entry, and the draft says so.
    model.script(completion(entries_json([entry(n, canon=n <= marked) for n in range(1, count + 1)])))
    body = job(tenant_a.admin_client, start(tenant_a.admin_client, django_capture_on_commit_callbacks))
    assert body["state"] == "done"
    flags = [e["canon"] for e in body["draft"]]
    assert flags == [True] * kept + [False] * (count - kept)
    assert any("canon" in warning for warning in body["warnings"])
