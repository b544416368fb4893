"""`make run`'s background work (issue 15, point 7): on the embedded default a Celery worker beside
the web server takes tasks from kombu's filesystem transport (no broker service), so an import
answers at once and its entries go from "indexing…" to indexed by themselves (W-7)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

IMPORT = """
from lore_platform.tenancy.services import tenant_create
from lore_platform.tenancy.actor import Actor
from books.imports import book_import_new
from tests.web.support import world_info
made = tenant_create(name="Run", admin_email="run@run.test", profile="smart")
actor = Actor(tenant=made.tenant, user=made.admin, role="admin")
result = book_import_new(actor=actor, data=world_info(), filename="varn.json", profile="smart")
print("BOOK", result.book.pk)
"""

STATES = """
import time
from books.models import Entry
deadline = time.monotonic() + float(WAIT)
while True:
    states = sorted(set(Entry.objects.unscoped().values_list("indexing_state", flat=True)))
    if states == ["indexed"] or time.monotonic() > deadline:
        break
    time.sleep(1)
print("STATES", states)
"""


def _manage(env: dict[str, str], *args: str, timeout: float = 120) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_an_import_is_indexed_by_the_worker_on_the_filesystem_broker(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(LOREWEAVE_DATA_DIR=str(tmp_path), CELERY_BROKER_URL="filesystem://", OMP_NUM_THREADS="1")
    _manage(env, "migrate", "--noinput", "-v0")
    started = time.monotonic()
    assert "BOOK" in _manage(env, "shell", "-c", IMPORT)
    assert "'pending'" in _manage(env, "shell", "-c", STATES.replace("WAIT", "0"))  # queued, not run in the request
    assert list((tmp_path / "broker" / "queue").iterdir()), "the task waits as a file in var/broker"
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo",
         "--concurrency=1", "-Q", "loreweave", "--loglevel=WARNING"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        states = _manage(env, "shell", "-c", STATES.replace("WAIT", "120"), timeout=180)
        assert "['indexed']" in states, states
        assert time.monotonic() - started < 150
    finally:
        worker.terminate()
        worker.wait(timeout=30)
