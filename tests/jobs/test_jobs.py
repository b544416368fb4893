"""Jobs (A-2, A-3): split with and without a model, progress, cancel, retry without asking twice,
quotas (429), accepting drafts into books as an import, who may see what."""
from __future__ import annotations

from typing import Any

import pytest

from tests.jobs.llm_server import completion, entries_json, error

pytestmark = pytest.mark.django_db

NOTES = """# The Drowned Isles

## Saltmarch
A fishing town on stilts where the tide-priests keep the bells rung every hour.

## The Lamplighters
A guild of lighthouse-keepers who rule the isles from their towers by old charter.

## Tidecaller Mara
The youngest tide-priest of Saltmarch; she claims the sea speaks to her at night.
"""


def split(client: Any, capture: Any, text: str = NOTES, execute: bool = True) -> Any:
    with capture(execute=execute):
        response = client.post("/api/v1/jobs/split", {"text": text}, format="json")
    assert response.status_code == 202, response.json()
    return client.get(f"/api/v1/jobs/{response.json()['id']}").json()


def fetch(client: Any, job_id: int) -> dict[str, Any]:
    return client.get(f"/api/v1/jobs/{job_id}").json()


def lore(title: str, text: str) -> dict[str, Any]:
    return {"title": title, "lore": text, "aliases": [], "canon": False}


# --- split ---------------------------------------------------------------------------------


def test_split_without_a_model_uses_the_deterministic_splitter(tenant_a, no_model, django_capture_on_commit_callbacks):
    body = fetch(tenant_a.member_client, split(tenant_a.member_client, django_capture_on_commit_callbacks)["id"])
    assert body["state"] == "done" and body["model"] == "deterministic" and body["progress"] == 100
    assert [e["title"] for e in body["draft"]] == ["Saltmarch", "The Lamplighters", "Tidecaller Mara"]
    assert body["usage"]["total_tokens"] == 0


def test_split_input_limit_is_40000_characters(tenant_a, no_model, django_capture_on_commit_callbacks):
    text = (NOTES * 200)[:40_000]
    assert split(tenant_a.admin_client, django_capture_on_commit_callbacks, text)["state"] == "done"
    with django_capture_on_commit_callbacks(execute=True):
        refused = tenant_a.admin_client.post("/api/v1/jobs/split", {"text": text + "x"}, format="json")
    assert refused.status_code == 422
    assert refused.json()["error"]["field"] == "text" and refused.json()["error"]["rule"] == "W-12"


def test_notes_with_no_topic_fail_with_a_reason(tenant_a, no_model, django_capture_on_commit_callbacks):
    body = fetch(tenant_a.admin_client, split(tenant_a.admin_client, django_capture_on_commit_callbacks, "Too short.")["id"])
    assert body["state"] == "failed" and body["error"]["code"] == "nothing_found"
    assert "20 characters" in body["error"]["message"]


def test_split_with_a_model_goes_by_chunks_and_merges_duplicates(tenant_a, model, settings,
                                                                django_capture_on_commit_callbacks):
    settings.LOREWEAVE_SPLIT_CHUNK_CHARS = 120  # one section per chunk
    model.script(
        completion(entries_json([lore("Saltmarch", "A fishing town on stilts with bells.")])),
        completion(entries_json([lore("The Lamplighters", "A guild of keepers ruling from towers."),
                                 lore("saltmarch", "Its bells ring every hour.")])),
        completion(entries_json([lore("Tidecaller Mara", "The youngest tide-priest of Saltmarch.")])),
    )
    body = fetch(tenant_a.admin_client, split(tenant_a.admin_client, django_capture_on_commit_callbacks)["id"])
    assert body["state"] == "done" and body["model"] == "test-model"
    assert len(model.requests) == 3
    assert "part 2 of 3" in model.requests[1]["body"]["messages"][-1]["content"]
    assert [e["title"] for e in body["draft"]] == ["Saltmarch", "The Lamplighters", "Tidecaller Mara"]
    assert "every hour" in body["draft"][0]["lore"]
    assert body["usage"]["calls"] == 3 and body["usage"]["total_tokens"] == 450


def test_a_retried_job_does_not_ask_again_for_a_chunk_it_has(tenant_a, model, settings,
                                                             django_capture_on_commit_callbacks):
    settings.LOREWEAVE_SPLIT_CHUNK_CHARS = 120
    settings.LOREWEAVE_LLM_MAX_RETRIES = 0
    model.script(completion(entries_json([lore("Saltmarch", "A fishing town on stilts with bells.")])),
                 error(500, "boom"))
    job = split(tenant_a.admin_client, django_capture_on_commit_callbacks)
    failed = fetch(tenant_a.admin_client, job["id"])
    assert failed["state"] == "failed" and failed["error"]["code"] == "model_server_error"
    assert failed["progress"] == 33
    assert failed["usage"]["calls"] == 2  # the answer for part 1 and the failed call for part 2 (issue 33)

    model.script(completion(entries_json([lore("The Lamplighters", "A guild of keepers ruling from towers.")])),
                 completion(entries_json([lore("Tidecaller Mara", "The youngest tide-priest of Saltmarch.")])))
    with django_capture_on_commit_callbacks(execute=True):
        retried = tenant_a.admin_client.post(f"/api/v1/jobs/{job['id']}/retry")
    assert retried.status_code == 202
    body = fetch(tenant_a.admin_client, job["id"])
    assert body["state"] == "done" and len(body["draft"]) == 3
    assert len(model.requests) == 2  # parts 2 and 3 only
    assert "part 2 of 3" in model.requests[0]["body"]["messages"][-1]["content"]
    assert body["usage"]["calls"] == 4  # every request sent, the failed one included


def test_a_chunk_that_is_not_json_is_asked_once_more_then_the_job_fails(tenant_a, model,
                                                                       django_capture_on_commit_callbacks):
    model.script(completion("Sure! Those are lovely notes."))
    body = fetch(tenant_a.admin_client, split(tenant_a.admin_client, django_capture_on_commit_callbacks)["id"])
    assert body["state"] == "failed" and body["error"]["code"] == "model_not_json"
    assert "not JSON" in body["error"]["message"] and len(model.requests) == 2


def test_a_split_with_invented_lore_is_flagged_and_placeholders_refused(tenant_a, model,
                                                                        django_capture_on_commit_callbacks):
    # Issue 33: a weak model's "done" split had 2 entries not in the notes, "..." as an alias and a topic dropped.
    model.script(completion(entries_json([
        {"title": "Saltmarch", "aliases": ["...", "Saltmarch"], "canon": False,
         "lore": "A fishing town on stilts where the tide-priests keep the bells rung every hour."},
        {"title": "The Dragon Court", "aliases": ["dragons"], "canon": False,
         "lore": "An ancient court of golden dragons sleeps beneath the volcano and trades in secrets."},
        {"title": "Lamplighters", "aliases": ["alias"], "canon": False,
         "lore": "Masters of every storm, they sail crystal ships to the moon each winter solstice."},
    ])))
    body = fetch(tenant_a.admin_client, split(tenant_a.admin_client, django_capture_on_commit_callbacks)["id"])
    assert body["state"] == "done"
    flagged = {e["title"]: bool(e.get("flags")) for e in body["draft"]}
    assert flagged == {"Saltmarch": False, "The Dragon Court": True, "Lamplighters": True}
    assert "it may be invented" in body["draft"][1]["flags"][0]
    aliases = {e["title"]: e["aliases"] for e in body["draft"]}
    assert aliases == {"Saltmarch": ["Saltmarch"], "The Dragon Court": [], "Lamplighters": []}
    warnings = " | ".join(body["warnings"])
    assert "'...'" in warnings and "'dragons'" in warnings
    assert "topic 'Tidecaller Mara' is in no entry" in warnings
    assert [w for w in body["warnings"] if "in no entry" in w] == ["the notes' topic 'Tidecaller Mara' is in no entry"]
    # Accepting the whole draft takes only the grounded entry.
    with django_capture_on_commit_callbacks(execute=True):
        accepted = tenant_a.admin_client.post(f"/api/v1/jobs/{body['id']}/accept", {}, format="json")
    assert accepted.status_code == 201 and accepted.json()["added"] == 1


def test_a_faithful_split_is_not_flagged(tenant_a, model, django_capture_on_commit_callbacks):
    model.script(completion(entries_json([
        lore("Saltmarch", "A fishing town on stilts where the tide-priests keep the bells rung every hour."),
        lore("The Lamplighters", "A guild of lighthouse-keepers who rule the isles from their towers."),
        lore("Tidecaller Mara", "The youngest tide-priest of Saltmarch. She claims the sea speaks to her at night."),
    ])))
    body = fetch(tenant_a.admin_client, split(tenant_a.admin_client, django_capture_on_commit_callbacks)["id"])
    assert body["state"] == "done" and not any(e.get("flags") for e in body["draft"])
    assert body["warnings"] == []


def test_a_split_entry_over_a_limit_is_kept_flagged_not_dropped(tenant_a, model, django_capture_on_commit_callbacks):
    model.script(completion(entries_json([
        lore("Saltmarch", "A fishing town on stilts where the tide-priests keep the bells rung every hour."),
        lore("The Lamplighters", "A guild."),
    ])))
    body = fetch(tenant_a.admin_client, split(tenant_a.admin_client, django_capture_on_commit_callbacks)["id"])
    assert body["state"] == "done" and [e["title"] for e in body["draft"]] == ["Saltmarch", "The Lamplighters"]
    assert "20" in body["draft"][1]["flags"][0]
    assert any(w.startswith("part 1: flagged entry 2") for w in body["warnings"])


# --- cancel ---------------------------------------------------------------------------------


def test_a_cancelled_job_never_calls_the_model(tenant_a, model, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as queued:
        job = tenant_a.admin_client.post("/api/v1/jobs/split", {"text": NOTES}, format="json").json()
    assert job["state"] == "queued"
    cancelled = tenant_a.admin_client.post(f"/api/v1/jobs/{job['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    for callback in queued:
        callback()  # the worker picks it up late
    assert fetch(tenant_a.admin_client, job["id"])["state"] == "cancelled"
    assert model.requests == []
    again = tenant_a.admin_client.post(f"/api/v1/jobs/{job['id']}/cancel")
    assert again.status_code == 409


def test_a_job_cancelled_while_running_stops_before_its_next_call(tenant_a, model, settings, monkeypatch,
                                                                  django_capture_on_commit_callbacks):
    from jobs import llm
    from jobs.models import Job

    settings.LOREWEAVE_SPLIT_CHUNK_CHARS = 120
    model.script(completion(entries_json([lore("Saltmarch", "A fishing town on stilts with bells.")])))
    real = llm.OpenAICompatible.complete

    def complete_then_cancel(self: Any, *args: Any, **kwargs: Any) -> Any:
        answer = real(self, *args, **kwargs)
        Job.objects.for_tenant(tenant_a.tenant).update(state="cancelled")  # someone pressed Cancel meanwhile
        return answer

    monkeypatch.setattr(llm.OpenAICompatible, "complete", complete_then_cancel)
    body = fetch(tenant_a.admin_client, split(tenant_a.admin_client, django_capture_on_commit_callbacks)["id"])
    assert body["state"] == "cancelled" and len(model.requests) == 1


# --- quotas -----------------------------------------------------------------------------------


def test_concurrent_jobs_are_limited_per_tenant(tenant_a, tenant_b, no_model, settings,
                                                django_capture_on_commit_callbacks):
    settings.LOREWEAVE_JOBS_CONCURRENT = 2
    for _ in range(2):
        split(tenant_a.admin_client, django_capture_on_commit_callbacks, execute=False)
    with django_capture_on_commit_callbacks(execute=False):
        refused = tenant_a.member_client.post("/api/v1/jobs/split", {"text": NOTES}, format="json")
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "too_many_jobs"
    assert refused.json()["error"]["details"] == {"limit": 2, "actual": 2, "unit": "jobs at once", "retry_after": 30}
    assert refused["Retry-After"] == "30"
    assert split(tenant_b.admin_client, django_capture_on_commit_callbacks)["state"] == "done"  # other tenants unaffected


def test_jobs_per_day_are_limited_per_tenant(tenant_a, no_model, settings, django_capture_on_commit_callbacks):
    from datetime import timedelta

    from django.utils import timezone

    from jobs.models import Job

    settings.LOREWEAVE_JOBS_PER_DAY = 3
    for _ in range(3):
        split(tenant_a.admin_client, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        refused = tenant_a.admin_client.post("/api/v1/jobs/split", {"text": NOTES}, format="json")
    assert refused.status_code == 429 and refused.json()["error"]["details"]["unit"] == "jobs per 24 hours"
    oldest = Job.objects.for_tenant(tenant_a.tenant).order_by("created_at").first()
    Job.objects.for_tenant(tenant_a.tenant).filter(pk=oldest.pk).update(created_at=timezone.now() - timedelta(hours=24))
    assert split(tenant_a.admin_client, django_capture_on_commit_callbacks)["state"] == "done"


# --- accept ------------------------------------------------------------------------------------


def test_accept_all_into_a_new_book_answers_a_receipt(tenant_a, no_model, django_capture_on_commit_callbacks):
    job = split(tenant_a.member_client, django_capture_on_commit_callbacks)
    accepted = tenant_a.member_client.post(f"/api/v1/jobs/{job['id']}/accept", {"title": "Drowned Isles"}, format="json")
    assert accepted.status_code == 201, accepted.json()
    receipt = accepted.json()
    assert receipt["added"] == 3 and receipt["book"]["title"] == "Drowned Isles" and receipt["book"]["profile"] == "smart"
    entries = tenant_a.member_client.get(f"/api/v1/books/{receipt['book']['id']}/entries").json()
    titles = [e["title"] for e in (entries["results"] if isinstance(entries, dict) else entries)]
    assert titles == ["Saltmarch", "The Lamplighters", "Tidecaller Mara"]
    assert fetch(tenant_a.member_client, job["id"])["accepted"]["added"] == 3


def test_accept_some_edited_entries_into_an_existing_book(tenant_a, no_model, django_capture_on_commit_callbacks):
    book = tenant_a.admin_client.post("/api/v1/books", {"title": "Isles", "profile": "smart"}, format="json").json()
    made = tenant_a.admin_client.post(f"/api/v1/books/{book['id']}/entries",
                                      {"title": "Saltmarch", "content": "A fishing town on stilts where the "
                                       "tide-priests keep the bells rung every hour."}, format="json")
    assert made.status_code == 201, made.json()
    job = split(tenant_a.admin_client, django_capture_on_commit_callbacks)
    draft = fetch(tenant_a.admin_client, job["id"])["draft"]
    kept = [draft[0], {**draft[2], "title": "Mara the Tidecaller", "canon": True}]  # the guild unticked, Mara edited
    receipt = tenant_a.admin_client.post(f"/api/v1/jobs/{job['id']}/accept",
                                         {"book": book["id"], "mode": "append", "entries": kept}, format="json").json()
    assert receipt["added"] == 1 and len(receipt["skipped"]) == 1  # Saltmarch already exists
    replaced = tenant_a.admin_client.post(f"/api/v1/jobs/{job['id']}/accept",
                                          {"book": book["id"], "mode": "replace"}, format="json").json()
    assert replaced["replaced"] == 2 and replaced["added"] == 3


def test_accept_is_all_or_nothing_at_the_w12_limits(tenant_a, no_model, django_capture_on_commit_callbacks):
    job = split(tenant_a.admin_client, django_capture_on_commit_callbacks)
    draft = fetch(tenant_a.admin_client, job["id"])["draft"]
    books_before = tenant_a.admin_client.get("/api/v1/books").json()["count"]
    too_long = [draft[0], {**draft[1], "lore": "w" * 20_001}]
    refused = tenant_a.admin_client.post(f"/api/v1/jobs/{job['id']}/accept", {"entries": too_long}, format="json")
    assert refused.status_code == 400 and refused.json()["error"]["field"] == "entries[1]"
    assert refused.json()["error"]["rule"] == "W-12"
    assert tenant_a.admin_client.get("/api/v1/books").json()["count"] == books_before
    at_limit = [draft[0], {**draft[1], "lore": "w" * 20_000}]
    assert tenant_a.admin_client.post(f"/api/v1/jobs/{job['id']}/accept", {"entries": at_limit},
                                      format="json").status_code == 201


def test_accept_needs_a_done_job(tenant_a, no_model, django_capture_on_commit_callbacks):
    job = split(tenant_a.admin_client, django_capture_on_commit_callbacks, execute=False)
    refused = tenant_a.admin_client.post(f"/api/v1/jobs/{job['id']}/accept", {}, format="json")
    assert refused.status_code == 409


# --- who may do what -----------------------------------------------------------------------------


def test_jobs_are_kept_per_tenant_and_per_person(tenant_a, tenant_b, no_model, django_capture_on_commit_callbacks):
    job = split(tenant_a.admin_client, django_capture_on_commit_callbacks)
    assert tenant_b.admin_client.get(f"/api/v1/jobs/{job['id']}").status_code == 404
    assert tenant_b.admin_client.post(f"/api/v1/jobs/{job['id']}/accept", {}, format="json").status_code == 404
    assert tenant_a.member_client.get(f"/api/v1/jobs/{job['id']}").status_code == 404  # the admin's own job
    assert tenant_a.admin_client.get("/api/v1/jobs").json()["count"] == 1
    assert tenant_b.admin_client.get("/api/v1/jobs").json()["count"] == 0


def test_a_read_key_starts_nothing(tenant_a, no_model, django_capture_on_commit_callbacks, anon_client):
    with django_capture_on_commit_callbacks(execute=True):
        assert tenant_a.read_client.post("/api/v1/jobs/split", {"text": NOTES}, format="json").status_code == 403
        assert anon_client.post("/api/v1/jobs/split", {"text": NOTES}, format="json").status_code == 401
    assert tenant_a.admin_client.get("/api/v1/jobs").json()["count"] == 0


def test_a_tenant_admin_points_the_tenant_at_its_own_model(tenant_a, tenant_b, llm_server, no_model,
                                                          django_capture_on_commit_callbacks):
    assert tenant_a.member_client.get("/api/v1/jobs/model").status_code == 403
    put = tenant_a.admin_client.put("/api/v1/jobs/model", {"base_url": llm_server.base_url, "model": "tenant-model",
                                                           "api_key": "sk-tenant"}, format="json")
    assert put.status_code == 200
    assert put.json() == {"configured": True, "base_url": llm_server.base_url, "model": "tenant-model",
                          "api_key_set": True, "overridden": ["api_key", "base_url", "model"],
                          "endpoint": "", "endpoints": [], "tenant_endpoints": True}
    llm_server.script(completion(entries_json([lore(f"Isle {n}", f"The isle {n} has a lighthouse.") for n in range(4)])))
    with django_capture_on_commit_callbacks(execute=True):
        job = tenant_a.admin_client.post("/api/v1/jobs/generate", {"description": "Isles"}, format="json").json()
    assert fetch(tenant_a.admin_client, job["id"])["state"] == "done"
    assert llm_server.requests[0]["body"]["model"] == "tenant-model"
    assert llm_server.requests[0]["headers"]["authorization"] == "Bearer sk-tenant"
    with django_capture_on_commit_callbacks(execute=True):
        other = tenant_b.admin_client.post("/api/v1/jobs/generate", {"description": "Isles"}, format="json")
    assert other.status_code == 409  # tenant B has no model

