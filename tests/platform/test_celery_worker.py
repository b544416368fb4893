"""A real Celery worker process takes a task from Redis and runs it against the database."""
from __future__ import annotations

import os
import re
import time

import pytest

from lore_platform.tenancy.services import tenant_create
from tests.celery_worker import celery_worker


@pytest.fixture
def celery_worker_process(transactional_db, tmp_path):
    with celery_worker(tmp_path / "worker.log") as running:
        yield running


@pytest.mark.services
@pytest.mark.postgres
def test_worker_runs_task_against_the_real_stack(celery_worker_process):
    from config.celery import app
    from config.tasks import worker_probe

    queue, process = celery_worker_process
    tenant_create(name="Worker Seen", admin_email="w@seen.test")

    started = time.monotonic()
    app.conf.task_always_eager = False
    try:
        result = worker_probe.apply_async(queue=queue).get(timeout=90)
    finally:
        app.conf.task_always_eager = True
    assert process.poll() is None, "the worker died"
    assert result["pid"] != os.getpid(), "the task ran in the test process, not the worker"
    assert result["healthy"] is True
    assert result["checks"]["database"]["engine"] == "postgresql"
    assert result["checks"]["vector"]["backend"] == "pgvector"
    assert result["checks"]["broker"]["mode"] == "broker"
    # The worker reads committed data through the same database.
    assert "worker-seen" in result["tenants"]
    assert time.monotonic() - started < 90


@pytest.mark.services
@pytest.mark.postgres
def test_turns_are_counted_by_the_worker_a_second_later(celery_worker_process, tenant_a, monkeypatch):
    """The whole usage path (W-11): a turn commits, sets a sweep a second ahead on Redis, the worker counts."""
    import functools

    from cast import usage
    from cast.tasks import request_usage_sweep
    from config.celery import app
    from tests.platform.test_turn_usage import _chat_with_book, _turn

    queue, process = celery_worker_process
    monkeypatch.setattr(usage, "_next_sweep", 0.0)
    from django.core.cache import cache

    cache.delete(usage.SWEEP_CLAIM_KEY)  # a sweep claimed by an earlier test would be on another queue
    monkeypatch.setattr(request_usage_sweep, "apply_async",
                        functools.partial(request_usage_sweep.apply_async, queue=queue))
    chat, (bell,) = _chat_with_book(tenant_a, [{"keys": ["bell"], "content": "Tide bells ring."}])
    app.conf.task_always_eager = False
    try:
        _turn(tenant_a, chat, "the bell")
        _turn(tenant_a, chat, "the bell again")
    finally:
        app.conf.task_always_eager = True
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        bell.refresh_from_db()
        if bell.usage_count == 2:
            break
        time.sleep(0.2)
    assert process.poll() is None, "the worker died"
    assert bell.usage_count == 2


def test_workers_know_every_task_the_code_defines():
    """A task the worker never imported is dropped as "unregistered" when it arrives."""
    import subprocess
    import sys

    from tests.celery_worker import REPO

    code = (
        "from config.celery import app; app.loader.import_default_modules(); "
        "print('\\n'.join(sorted(n for n in app.tasks if not n.startswith('celery.'))))"
    )
    listed = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    names = set(listed.stdout.split())
    defined = set()
    for path in REPO.glob("*/**/tasks.py"):
        if ".venv" in path.parts:
            continue
        defined.update(re.findall(r'@(?:app\.task|shared_task)\(name="([^"]+)"', path.read_text()))
    assert defined and defined <= names, f"not registered in a worker: {sorted(defined - names)}"
