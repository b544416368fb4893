"""Background work you can trust (issue 33, points 1-3): a job is never lost or stuck (a dead worker's
job is taken over or failed, a job whose message never left is sent again), AI jobs have their own
queue, retry asks the model again and counts, cancel stops the call and its retries, every call counts."""
from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import kombu.pools
import pytest
from django.db import connections
from django.utils import timezone

from jobs.models import Job, JobState
from tests.jobs.llm_server import Reply, completion, entries_json, error

pytestmark = pytest.mark.django_db

NOTES = """# The Drowned Isles

## Saltmarch
A fishing town on stilts where the tide-priests keep the bells rung every hour.

## The Lamplighters
A guild of lighthouse-keepers who rule the isles from their towers by old charter.

## Tidecaller Mara
The youngest tide-priest of Saltmarch; she claims the sea speaks to her at night.
"""


def jobs_sweep(**kwargs: Any) -> dict[str, int]:
    from jobs.services import jobs_sweep as sweep

    return sweep(**kwargs)


def lore(title: str, text: str) -> dict[str, Any]:
    return {"title": title, "lore": text, "aliases": [], "canon": False}


PARTS = [lore("Saltmarch", "A fishing town on stilts with bells."),
         lore("The Lamplighters", "A guild of keepers ruling from towers."),
         lore("Tidecaller Mara", "The youngest tide-priest of Saltmarch.")]


def fetch(client: Any, job_id: int) -> dict[str, Any]:
    return client.get(f"/api/v1/jobs/{job_id}").json()


def start_split(client: Any, capture: Any, *, execute: bool = True) -> dict[str, Any]:
    with capture(execute=execute):
        response = client.post("/api/v1/jobs/split", {"text": NOTES}, format="json")
    assert response.status_code == 202, response.json()
    return fetch(client, response.json()["id"])


def good_entries(n: int) -> str:
    return entries_json([lore(f"Isle number {i}", f"Isle number {i} has a lighthouse and a harbour.")
                         for i in range(1, n + 1)])


# --- 1. never lost, never stuck ------------------------------------------------------------------


def _worker_died(job_id: int, *, tenant: Any, chunks: dict[str, Any] | None = None, runs: int = 1,
                 lease_left: float = -1.0) -> None:
    """The row a worker leaves when it is killed mid-job: running, its lease no longer renewed."""
    Job.objects.for_tenant(tenant).filter(pk=job_id).update(
        state=JobState.RUNNING, started_at=timezone.now() - timedelta(seconds=60), lease_token="dead-worker",
        lease_until=timezone.now() + timedelta(seconds=lease_left), runs=runs, progress=33, chunks=chunks or {},
    )


def test_a_killed_workers_job_is_taken_over_within_its_lease_and_reuses_its_answers(
        tenant_a, model, settings, django_capture_on_commit_callbacks):
    settings.LOREWEAVE_SPLIT_CHUNK_CHARS = 120  # one section per chunk: 3 model calls
    settings.LOREWEAVE_JOBS_CONCURRENT = 1
    job = start_split(tenant_a.admin_client, django_capture_on_commit_callbacks, execute=False)
    first = completion(entries_json([PARTS[0]]))
    usage = {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150, "calls": 1}
    stored = {"chunk-0": {"text": first.body["choices"][0]["message"]["content"], "finish_reason": "stop",
                          "usage": usage},
              # part 2's answer was a refusal: the next worker asks for it afresh, never replays it
              "chunk-1": {"text": "I cannot help with that.", "finish_reason": "stop", "usage": usage}}
    _worker_died(job["id"], tenant=tenant_a.tenant, chunks=stored, lease_left=20)
    # The lease still runs: the worker may be alive and working, so the sweep leaves it; it holds the slot.
    assert jobs_sweep() == {"requeued": 0, "taken_over": 0, "failed": 0}
    refused = tenant_a.admin_client.post("/api/v1/jobs/split", {"text": NOTES}, format="json")
    assert refused.status_code == 429

    # The worker stopped renewing: one sweep past the lease (beat runs it every 15 s) takes the job over.
    model.script(completion(entries_json([PARTS[1]])), completion(entries_json([PARTS[2]])))
    with django_capture_on_commit_callbacks(execute=True):
        assert jobs_sweep(now=timezone.now() + timedelta(seconds=21))["taken_over"] == 1
    body = fetch(tenant_a.admin_client, job["id"])
    assert body["state"] == "done" and [e["title"] for e in body["draft"]] == [p["title"] for p in PARTS]
    assert len(model.requests) == 2  # parts 2 and 3: the dead worker's answer for part 1 is reused
    assert "part 2 of 3" in model.requests[0]["body"]["messages"][-1]["content"]  # asked afresh
    assert Job.objects.for_tenant(tenant_a.tenant).get(pk=job["id"]).runs == 2
    start_split(tenant_a.admin_client, django_capture_on_commit_callbacks, execute=False)  # the slot is free


def test_a_job_whose_workers_keep_dying_fails_with_the_reason_and_frees_its_slot(
        tenant_a, no_model, settings, django_capture_on_commit_callbacks):
    settings.LOREWEAVE_JOBS_CONCURRENT = 1
    settings.LOREWEAVE_JOB_MAX_RUNS = 3
    job = start_split(tenant_a.admin_client, django_capture_on_commit_callbacks, execute=False)
    _worker_died(job["id"], tenant=tenant_a.tenant, runs=3)
    assert jobs_sweep()["failed"] == 1
    body = fetch(tenant_a.admin_client, job["id"])
    assert body["state"] == "failed" and body["error"]["code"] == "worker_lost"
    assert "stopped before it finished (3 time(s))" in body["error"]["message"]
    assert start_split(tenant_a.admin_client, django_capture_on_commit_callbacks)["state"] == "done"


def test_a_message_delivered_twice_runs_the_job_once(tenant_a, model, django_capture_on_commit_callbacks):
    """A redelivered message (acks_late after a lost connection, the sweep's re-send) finds the job
    running under another worker's live lease and leaves it alone."""
    from jobs.services import job_execute

    job = start_split(tenant_a.admin_client, django_capture_on_commit_callbacks, execute=False)
    _worker_died(job["id"], tenant=tenant_a.tenant, lease_left=20)
    assert job_execute(tenant=tenant_a.tenant, job_id=job["id"]) == JobState.RUNNING
    assert model.requests == []


@pytest.fixture
def broker_down(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A Redis broker that is not running, with the settings of a Redis broker (one try, short timeout)."""
    from config.celery import app
    from lore_platform import tasks as lw_tasks

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    def fresh_pool() -> None:  # a connection pool for the broker URL in force, not a closed one
        kombu.pools.reset()
        app._pool = None
        app.amqp._producer_pool = None

    monkeypatch.setattr(lw_tasks, "_broker_down_until", 0.0)
    saved = (app.conf.broker_url, app.conf.broker_transport_options)
    app.conf.task_always_eager = False
    app.conf.broker_url = f"redis://127.0.0.1:{port}/0"
    app.conf.broker_transport_options = {"socket_connect_timeout": 0.1, "max_retries": 0}
    fresh_pool()
    try:
        yield
    finally:
        app.conf.task_always_eager = True
        app.conf.broker_url, app.conf.broker_transport_options = saved
        fresh_pool()


def test_starting_a_job_with_the_broker_down_answers_202_at_once_and_the_sweep_sends_it_later(
        tenant_a, no_model, broker_down, django_capture_on_commit_callbacks):
    from config.celery import app
    from lore_platform import tasks as lw_tasks

    lw_tasks.task_publish("jobs.jobs_sweep")  # the process's first publish loads kombu's Redis transport
    lw_tasks._broker_down_until = 0.0  # (the fixture's monkeypatch restores it)
    tenant_a.admin_client.get("/api/v1/jobs")  # and the process's first request loads the API
    started = time.perf_counter()
    job = start_split(tenant_a.admin_client, django_capture_on_commit_callbacks)  # its publish fails
    assert time.perf_counter() - started < 1.0  # was a 500 after ~7 s
    assert job["state"] == "queued"
    assert fetch(tenant_a.admin_client, job["id"])["state"] == "queued"  # the row is the record

    app.conf.task_always_eager = True  # the broker is back (tasks run in-process here)
    assert jobs_sweep()["requeued"] == 0  # sent a moment ago: its message may still be on its way
    with django_capture_on_commit_callbacks(execute=True):
        assert jobs_sweep(now=timezone.now() + timedelta(seconds=61))["requeued"] == 1
    assert fetch(tenant_a.admin_client, job["id"])["state"] == "done"


def test_the_sweeps_run_often_and_jobs_have_their_own_queue(settings):
    from config.celery import app

    schedule = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert schedule["jobs.jobs_sweep"] <= 15  # with a 30 s lease: a dead worker's job moves within a minute
    assert schedule["retrieval.index_pending_sweep"] <= 30
    assert settings.LOREWEAVE_JOB_LEASE_SECONDS + schedule["jobs.jobs_sweep"] <= 60
    route = app.amqp.router.route
    assert route({}, "jobs.job_run")["queue"].name == "loreweave.jobs"
    for task in ("retrieval.index_entries", "books.entries_changed", "retrieval.index_pending_sweep",
                 "jobs.jobs_sweep", "cast.request_usage_sweep"):
        assert route({}, task)["queue"].name == "loreweave", task
    # make run: one worker per queue, so a job in flight never holds up indexing; beat runs the sweeps.
    run = (Path(settings.BASE_DIR) / "scripts" / "run.sh").read_text()
    workers = [line for line in run.replace("\\\n", " ").splitlines() if "celery -A config worker" in line]
    assert sorted(line.split(" -Q ")[1].split()[0] for line in workers) == ["loreweave", "loreweave.jobs"]
    assert any(" -B " in line for line in workers)


# --- 3. retry and cancel mean what they say ---------------------------------------------------------


def test_retry_asks_the_model_again_instead_of_replaying_a_refusal(tenant_a, model,
                                                                  django_capture_on_commit_callbacks):
    model.script(completion("I'm sorry, I can't help with that."))
    job = start_split(tenant_a.admin_client, django_capture_on_commit_callbacks)
    failed = fetch(tenant_a.admin_client, job["id"])
    assert failed["state"] == "failed" and failed["error"]["code"] == "model_not_json" and len(model.requests) == 2

    model.script(completion(entries_json(PARTS)))
    with django_capture_on_commit_callbacks(execute=True):
        assert tenant_a.admin_client.post(f"/api/v1/jobs/{job['id']}/retry").status_code == 202
    body = fetch(tenant_a.admin_client, job["id"])
    assert len(model.requests) == 1  # asked again (it replayed the refusal with no call before)
    assert body["state"] == "done" and len(body["draft"]) == 3
    assert body["usage"]["calls"] == 3


def test_retry_of_a_generate_draft_that_was_not_usable_asks_again(tenant_a, model,
                                                                  django_capture_on_commit_callbacks):
    model.script(completion(good_entries(2)))  # too few, three times
    with django_capture_on_commit_callbacks(execute=True):
        job = tenant_a.admin_client.post("/api/v1/jobs/generate", {"description": "Isles"}, format="json").json()
    assert fetch(tenant_a.admin_client, job["id"])["error"]["code"] == "draft_not_usable"
    model.script(completion(good_entries(4)))
    with django_capture_on_commit_callbacks(execute=True):
        tenant_a.admin_client.post(f"/api/v1/jobs/{job['id']}/retry")
    assert fetch(tenant_a.admin_client, job["id"])["state"] == "done" and len(model.requests) == 1


def test_a_retry_is_a_start_the_daily_quota_counts(tenant_a, model, settings, django_capture_on_commit_callbacks):
    settings.LOREWEAVE_JOBS_PER_DAY = 2
    model.script(error(400, "bad request"))
    job = start_split(tenant_a.admin_client, django_capture_on_commit_callbacks)
    assert fetch(tenant_a.admin_client, job["id"])["state"] == "failed"
    with django_capture_on_commit_callbacks(execute=True):
        assert tenant_a.admin_client.post(f"/api/v1/jobs/{job['id']}/retry").status_code == 202
    with django_capture_on_commit_callbacks(execute=True):
        refused = tenant_a.admin_client.post("/api/v1/jobs/split", {"text": NOTES}, format="json")
        again = tenant_a.admin_client.post(f"/api/v1/jobs/{job['id']}/retry")
    assert refused.status_code == 429 and refused.json()["error"]["details"]["unit"] == "jobs per 24 hours"
    assert again.status_code == 429 and again.json()["error"]["details"]["actual"] == 2
    assert 86_000 < int(refused["Retry-After"]) <= 86_401  # when the oldest start leaves the 24 hours
    assert again["Retry-After"] == refused["Retry-After"]


def test_every_call_counts_failed_ones_too_and_asks_for_max_tokens(tenant_a, model, settings,
                                                                     django_capture_on_commit_callbacks):
    settings.LOREWEAVE_LLM_MAX_TOKENS = 1234
    model.script(error(500, "boom"), error(500, "boom"), completion(entries_json(PARTS)))
    body = fetch(tenant_a.admin_client, start_split(tenant_a.admin_client, django_capture_on_commit_callbacks)["id"])
    assert body["state"] == "done" and body["usage"]["calls"] == 3  # two failed tries and the answer
    assert body["usage"]["total_tokens"] == 150
    assert [r["body"]["max_tokens"] for r in model.requests] == [1234, 1234, 1234]

    model.script(error(503, "down"))
    body = fetch(tenant_a.admin_client, start_split(tenant_a.admin_client, django_capture_on_commit_callbacks)["id"])
    assert body["state"] == "failed" and body["usage"]["calls"] == 3  # LOREWEAVE_LLM_MAX_RETRIES 2: three tries


# --- cancel, with the job on a worker thread as on a worker ---------------------------------------------


def _run_in_background(tenant: Any, job_id: int) -> tuple[threading.Thread, dict[str, Any]]:
    from jobs.services import job_execute

    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["state"] = job_execute(tenant=tenant.pk, job_id=job_id)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            outcome["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread, outcome


def _wait_for(condition: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def queued_job(tenant_a: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Start a split job without running it (the test runs it on a thread, as a worker would)."""
    from jobs.tasks import job_run

    for send in ("delay", "apply_async"):  # its message is sent, and the test's thread is its worker
        monkeypatch.setattr(job_run, send, lambda *args, **kwargs: None)

    def start() -> int:
        response = tenant_a.admin_client.post("/api/v1/jobs/split", {"text": NOTES}, format="json")
        assert response.status_code == 202, response.json()
        return response.json()["id"]

    return start


@pytest.mark.django_db(transaction=True)
def test_cancel_stops_the_calls_retries_at_once(tenant_a, model, settings, queued_job):
    settings.LOREWEAVE_LLM_MAX_RETRIES = 5
    model.script(error(500, "overloaded", headers={"Retry-After": "1"}))
    job_id = queued_job()
    thread, outcome = _run_in_background(tenant_a.tenant, job_id)
    _wait_for(lambda: len(model.requests) >= 1)
    cancelled = tenant_a.admin_client.post(f"/api/v1/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200
    sent = len(model.requests)
    thread.join(timeout=2.0)
    assert not thread.is_alive() and outcome == {"state": JobState.CANCELLED}
    time.sleep(1.5)  # past the Retry-After the server asked for: the old loop sent its next try here
    assert len(model.requests) == sent
    body = fetch(tenant_a.admin_client, job_id)
    assert body["state"] == "cancelled" and body["usage"]["calls"] == sent


@pytest.mark.django_db(transaction=True)
def test_cancel_abandons_a_call_in_flight(tenant_a, model, settings, queued_job):
    settings.LOREWEAVE_LLM_TIMEOUT = 30.0
    model.script(Reply(body=completion(entries_json(PARTS)).body, delay=5.0), completion(entries_json(PARTS)))
    job_id = queued_job()
    thread, outcome = _run_in_background(tenant_a.tenant, job_id)
    _wait_for(lambda: len(model.requests) >= 1)
    asked = time.monotonic()
    assert tenant_a.admin_client.post(f"/api/v1/jobs/{job_id}/cancel").status_code == 200
    thread.join(timeout=3.0)
    assert not thread.is_alive() and time.monotonic() - asked < 2.0  # not the 5 s the server takes
    assert outcome == {"state": JobState.CANCELLED} and len(model.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_a_long_call_keeps_its_lease_so_the_sweep_leaves_it_alone(tenant_a, model, settings, queued_job):
    settings.LOREWEAVE_JOB_LEASE_SECONDS = 1
    settings.LOREWEAVE_LLM_TIMEOUT = 30.0
    model.script(Reply(body=completion(entries_json(PARTS)).body, delay=2.5))
    job_id = queued_job()
    thread, outcome = _run_in_background(tenant_a.tenant, job_id)
    _wait_for(lambda: len(model.requests) >= 1)
    row = Job.objects.for_tenant(tenant_a.tenant).filter(pk=job_id)
    first = row.get().lease_until
    _wait_for(lambda: row.get().lease_until > first + timedelta(seconds=0.5))  # renewed during the call
    time.sleep(1.2)  # longer than the lease: the call still runs, the worker still renews it
    assert jobs_sweep() == {"requeued": 0, "taken_over": 0, "failed": 0}
    thread.join(timeout=5.0)
    assert outcome == {"state": JobState.DONE} and len(model.requests) == 1
    assert row.get().lease_until is None  # a job that ended holds nothing
