"""Start a real Celery worker process against the test database (integration tests only)."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.db import connection

REPO = Path(__file__).resolve().parents[1]


def worker_database_url() -> str:
    """The URL of the database this test process uses, for the worker to share it."""
    params = connection.settings_dict
    user = params.get("USER") or "postgres"
    host = params.get("HOST") or "127.0.0.1"
    port = params.get("PORT") or 5432
    password = f":{params['PASSWORD']}" if params.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{host}:{port}/{params['NAME']}"


@contextlib.contextmanager
def celery_worker(log_path: Path, *, env: dict[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A worker consuming its own queue; yields (queue, process) and stops it by pid."""
    queue = f"test-{uuid.uuid4().hex[:8]}"
    full_env = {
        **os.environ,
        "DATABASE_URL": worker_database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "OMP_NUM_THREADS": "1",
        **(env or {}),
    }
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "config", "worker",
                "-Q", queue, "--concurrency", "1", "--pool", "prefork",
                "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO",
            ],
            cwd=REPO, env=full_env, stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            yield queue, process
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
