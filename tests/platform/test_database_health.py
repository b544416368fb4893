"""A connection PostgreSQL dropped is replaced before the next call uses it, without a query per
request to find out (``lore_platform.postgres``: the socket says so; issue 18)."""
from __future__ import annotations

import io
import json
import sys
import time

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from config.wsgi import application
from tests.platform.test_context_hot_path import _setup

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _turn(tenant, chat: int) -> dict:
    """A call through the WSGI app as gunicorn makes it: the test client skips the start-of-request
    connection handling (Django's ``close_old_connections``), which is what is tested here."""
    body = json.dumps({"messages": [{"role": "user", "text": "We row toward the lighthouse."}]}).encode()
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": f"/api/v1/chats/{chat}/context", "SCRIPT_NAME": "",
               "QUERY_STRING": "", "SERVER_NAME": "testserver", "SERVER_PORT": "80", "HTTP_HOST": "testserver",
               "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_AUTHORIZATION": f"Api-Key {tenant.admin_key}",
               "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body),
               "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr, "wsgi.multithread": False,
               "wsgi.multiprocess": True, "wsgi.run_once": False, "wsgi.version": (1, 0)}
    status = []
    answer = b"".join(application(environ, lambda code, headers, exc_info=None: status.append(code)))
    assert status[0].startswith("200"), (status, answer[:300])
    return json.loads(answer)


def _backend_pid() -> int:
    return int(connection.connection.info.backend_pid)


def _terminate(pid: int) -> None:
    params = settings.DATABASES["default"]
    with psycopg.connect(host=params["HOST"], port=params["PORT"] or 5432, user=params["USER"],
                         dbname=params["NAME"], autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and connection.idle_connection_sound():
        time.sleep(0.01)  # the server's goodbye reaches the socket


def test_a_sound_connection_is_kept_between_calls(make_tenant):
    assert settings.DATABASES["default"]["ENGINE"] == "lore_platform.postgres"
    assert settings.DATABASES["default"]["CONN_HEALTH_CHECKS"]
    tenant = make_tenant()
    _, _, _, chat = _setup(tenant)
    _turn(tenant, chat)
    pid = _backend_pid()
    _turn(tenant, chat)
    assert _backend_pid() == pid


def test_a_connection_the_server_dropped_is_replaced_before_the_next_call(make_tenant):
    tenant = make_tenant()
    _, _, _, chat = _setup(tenant)
    first = _turn(tenant, chat)
    pid = _backend_pid()
    _terminate(pid)
    # Not a 503: the dead connection is closed at the start of the call and a new one opened.
    second = _turn(tenant, chat)
    assert _backend_pid() != pid
    assert second["request_log_id"] > first["request_log_id"]
