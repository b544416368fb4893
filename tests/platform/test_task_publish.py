"""Publishing a task on a request never waits for a broker that is down (issue 13, point 5)."""
from __future__ import annotations

import socket
import time

import pytest

from cast.tasks import request_usage_sweep
from config.celery import app as celery_app
from lore_platform import tasks as lw_celery


@pytest.fixture
def broker_down(monkeypatch):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    app = celery_app
    monkeypatch.setattr(lw_celery, "_broker_down_until", 0.0)
    app.conf.task_always_eager = False
    app.conf.broker_url = f"redis://127.0.0.1:{port}/0"
    # The settings of a Redis broker (the embedded default has none): one try, a short connect timeout.
    saved_options = app.conf.broker_transport_options
    app.conf.broker_transport_options = {"socket_connect_timeout": 0.1, "max_retries": 0}
    app.pool.force_close_all()
    try:
        yield
    finally:
        app.conf.task_always_eager = True
        app.conf.broker_transport_options = saved_options
        app.pool.force_close_all()


def test_a_publish_to_a_stopped_broker_fails_fast_then_is_skipped(broker_down, monkeypatch):
    lw_celery.task_publish(request_usage_sweep, countdown=1)  # the process's first: loads kombu's transport
    monkeypatch.setattr(lw_celery, "_broker_down_until", 0.0)
    started = time.perf_counter()
    assert lw_celery.task_publish(request_usage_sweep, countdown=1) is False
    first = time.perf_counter() - started
    assert first < 0.1  # kombu's default retries took ~2 s here; with publish retries, ~19 s
    assert lw_celery.broker_marked_down()
    started = time.perf_counter()
    assert lw_celery.task_publish("books.entries_changed", 1, [1]) is False
    assert time.perf_counter() - started < 0.005  # skipped: the sweeps do the work later
