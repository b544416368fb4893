"""The web server's worker class (deploy/gunicorn.conf.py): sync behind a buffering proxy, gthread without one."""
from __future__ import annotations

import runpy
from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_sync_workers_by_default_and_the_setting_wins(monkeypatch):
    monkeypatch.delenv("GUNICORN_WORKER_CLASS", raising=False)
    monkeypatch.delenv("DATABASE_STATEMENT_TIMEOUT_MS", raising=False)  # the file sets it: restored after
    assert runpy.run_path(str(DEPLOY / "gunicorn.conf.py"))["worker_class"] == "sync"
    monkeypatch.setenv("GUNICORN_WORKER_CLASS", "gthread")
    assert runpy.run_path(str(DEPLOY / "gunicorn.conf.py"))["worker_class"] == "gthread"


def test_compose_without_a_proxy_serves_with_keep_alive_threads():
    # compose.yaml publishes gunicorn's port itself: a slow client must not hold a sync worker.
    web = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]["web"]
    assert web["environment"]["GUNICORN_WORKER_CLASS"] == "gthread"
