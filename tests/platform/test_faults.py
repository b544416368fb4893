"""The short fault commands (issue 13, point 6): each starts and stops its own services.

They run in the services pass of ``scripts/test.sh``; each must report ``ok`` and
stay under about a minute.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.services


def _run(mode: str) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL")}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "bench.faults", mode, "--short"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=240)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines and lines[-1]["ok"], f"{done.stdout}\n{done.stderr[-3000:]}"
    assert done.returncode == 0
    assert time.monotonic() - started < 120  # ~60 s alone; the services pass shares two cores
    return lines


def test_redis_down_keeps_the_api_fast_and_loses_nothing():
    up, down, back, _ = _run("redis")
    # The latency rule is bench.faults' own (its "ok": no stall per call); here, what a user would lose.
    assert up["errors"] == 0 and down["errors"] == 0
    assert back["worker_survived"] and back["usage_count"] == back["turns_injected"]
    assert back["indexed_once"] == back["entries"]


def test_a_worker_killed_mid_import_is_recovered_by_the_sweep():
    result = _run("worker")[0]
    assert result["indexed_once"] == result["entries"]


def test_an_ai_job_whose_worker_is_killed_mid_call_finishes_within_a_minute():
    """Issue 33: the lease lapses, beat's jobs sweep hands the job to the new worker."""
    result = _run("job")[0]
    assert result["state"] == "done" and result["recovery_s"] <= 60 and result["runs"] == 2
    assert result["duplicates"] == 0 and result["slots_held"] == 0


def test_postgres_down_answers_503_json_fast_and_recovers():
    _, down, back, _ = _run("postgres")
    assert down["statuses"] == [503] and down["json"] and down["context"]["max_ms"] < 1000
    assert back["errors"] == 0
