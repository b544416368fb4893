"""Slow clients cannot starve the server (issue 26.6): the web stack as `make run` serves it — nginx
(deploy/nginx) buffering in front of gunicorn's sync workers — keeps answering while 50 connections
trickle their headers, and every refusal that never reaches Django (the proxy's, gunicorn's) is JSON.

Runs `bench.faults`'s slow check (`python -m bench.faults slow --short`) against one stack started the
same way on free loopback ports. On the old topology (gunicorn alone: `--no-proxy`) no probe is
answered within 2 s. Needs nginx (scripts/setup.sh installs it as root).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.faults import PROBE_DEADLINE_S, WebStack, slow_check

# Starts its own server processes: once, in the first pass (scripts/test.sh).
pytestmark = pytest.mark.contract


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebStack]:
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        pytest.fail("nginx is missing: run scripts/setup.sh as root (it installs Debian's nginx)")
    web = WebStack(tmp_path_factory.mktemp("slow-clients"))
    web.start()
    try:
        yield web
    finally:
        web.stop()


def raw(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send bytes as they are (no client library tidying them) and read the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except ConnectionResetError:
            # A server that refuses a request early may reset the connection once it has answered.
            if not data:
                raise
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def json_error(headers: dict[str, str], body: bytes) -> str:
    assert headers["content-type"].startswith("application/json"), (headers, body[:200])
    return str(json.loads(body)["error"]["code"])


def test_fifty_slow_clients_leave_normal_requests_answered_within_two_seconds(stack: WebStack) -> None:
    assert PROBE_DEADLINE_S == 2.0
    assert slow_check(stack, attack_s=15) == []


def test_the_proxys_own_refusals_are_json(stack: WebStack) -> None:
    port = stack.port
    status, headers, body = raw(port, b"GET /api/v1/" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert (status, json_error(headers, body)) == (414, "uri_too_long")
    status, headers, body = raw(port, b"GET /api/v1/books HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 9000
                                + b"\r\nConnection: close\r\n\r\n")
    assert (status, json_error(headers, body)) == (431, "headers_too_large")
    # Refused from its declared length, before the body is read (17 MiB, the app's limit).
    status, headers, body = raw(port, b"POST /api/v1/books HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                      b"Content-Length: 18000000\r\nConnection: close\r\n\r\n")
    assert (status, json_error(headers, body)) == (413, "request_too_large")
    status, headers, body = raw(port, b"NOT A REQUEST\r\n\r\n")
    assert (status, json_error(headers, body)) == (400, "bad_request")


def test_a_large_body_is_buffered_by_the_proxy_and_reaches_the_app(stack: WebStack) -> None:
    # Over nginx's 1 MiB in-memory buffer the body goes to a temp file under the run's folder first:
    # the app answers it (no key: 401/403 JSON), not the proxy with a 500.
    body = b'{"title": "' + b"x" * (3 * 1024 * 1024) + b'"}'
    status, headers, answer = raw(stack.port, b"POST /api/v1/books HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                              b"Content-Type: application/json\r\nContent-Length: %d\r\n"
                                              b"Connection: close\r\n\r\n" % len(body) + body)
    assert status in (401, 403), answer[:300]
    assert headers["content-type"].startswith("application/json")


def test_a_request_line_the_proxy_accepts_is_not_refused_by_gunicorn(stack: WebStack) -> None:
    # 4094 bytes was gunicorn's limit, under nginx's 8 KiB: such a line passed the proxy and got
    # gunicorn's HTML 400. Now it reaches the app, which answers it (an unknown API path: 404 JSON).
    path = b"/api/v1/" + b"c" * 6000
    status, _, body = raw(stack.port, b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert status == 404, body[:300]


def test_gunicorns_own_refusals_are_json(stack: WebStack) -> None:
    # Straight to gunicorn (its internal port): what it refuses itself never shows its HTML page.
    port = stack.internal_port
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(150))
    status, headers, body = raw(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + many + b"\r\n")
    assert (status, json_error(headers, body)) == (431, "headers_too_large")
    status, headers, body = raw(port, b"GET /" + b"d" * 9000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert (status, json_error(headers, body)) == (414, "uri_too_long")
    assert b"<html" not in body


def test_the_production_site_config_is_valid_and_serves_static_files(tmp_path: Path) -> None:
    # deploy/nginx/loreweave.conf as the image and install-services.sh install it (snippets/ beside it),
    # its address and static root moved under tmp_path: nginx accepts it and serves /static/ itself.
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        pytest.fail("nginx is missing: run scripts/setup.sh as root (it installs Debian's nginx)")
    deploy = Path(__file__).resolve().parents[2] / "deploy" / "nginx"
    (tmp_path / "snippets").mkdir()
    shutil.copy(deploy / "loreweave-proxy.conf", tmp_path / "snippets" / "loreweave-proxy.conf")
    port = WebStack(tmp_path).port
    site = (deploy / "loreweave.conf").read_text()
    for production, here in (("listen 80 default_server;", f"listen 127.0.0.1:{port} default_server;"),
                             ("listen [::]:80 default_server;", ""),
                             ("/var/lib/loreweave/static/", f"{tmp_path}/static/")):
        assert production in site
        site = site.replace(production, here)
    (tmp_path / "loreweave.conf").write_text(site)
    (tmp_path / "static").mkdir()
    (tmp_path / "static" / "app.css").write_text("body{}")
    # Started as root, nginx's workers would run as nobody, which cannot enter pytest's private tmp folders.
    user = "user root;" if os.geteuid() == 0 else ""
    temps = " ".join(f"{name}_temp_path {tmp_path}/{name};" for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    (tmp_path / "nginx.conf").write_text(
        f"{user} daemon off; pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{ include /etc/nginx/mime.types; access_log off; {temps} include loreweave.conf; }}\n")
    command = [nginx, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e", str(tmp_path / "error.log")]
    checked = subprocess.run([*command, "-t"], check=False, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                status, headers, body = raw(port, b"GET /static/app.css HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                break
            except ConnectionRefusedError:
                time.sleep(0.1)
        assert (status, headers["content-type"], body) == (200, "text/css", b"body{}")
        # No gunicorn behind it: the proxy's 502 is JSON.
        status, headers, body = raw(port, b"GET /api/v1/books HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert (status, json_error(headers, body)) == (502, "service_unavailable")
    finally:
        server.terminate()
        server.wait(timeout=10)
