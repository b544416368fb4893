"""What production installs runs (issue 19): the locked runtime tree, no dev extras, not editable.

One test builds a fresh virtual environment the way deploy/Dockerfile does, then runs the stack the
way deploy/compose.yaml says (the commands are read from that file) against PostgreSQL + pgvector
and Redis: migrate, collectstatic, a tenant, gunicorn, a Celery worker and beat. Through HTTP it
sees a context turn answered, the turn's usage counted by the worker, and a smart entry indexed.

It has its own database (created and dropped here) and its own Redis database number, so it never
meets the suite's `loreweave` database or Redis db 15. Every process it starts is stopped by pid.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
# Redis database numbers the suite does not use (scripts/test.sh: db 15).
REDIS_DB_CHOICES = (14, 13)

pytestmark = [pytest.mark.services, pytest.mark.postgres]


def compose_commands() -> dict[str, list[str]]:
    services = yaml.safe_load((REPO / "deploy" / "compose.yaml").read_text())["services"]
    return {name: services[name]["command"] for name in ("migrate", "web", "worker", "beat")}


def _run(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server_params() -> dict[str, Any]:
    from django.db import connection

    params = connection.settings_dict
    return {
        "user": params.get("USER") or "postgres",
        "password": params.get("PASSWORD") or "",
        "host": params.get("HOST") or "127.0.0.1",
        "port": int(params.get("PORT") or 5432),
    }


@contextlib.contextmanager
def own_database() -> Iterator[str]:
    """A new PostgreSQL database with the vector extension; dropped afterwards. Yields its URL."""
    import psycopg

    server = _server_params()
    name = f"lw_prodinstall_{uuid.uuid4().hex[:10]}"
    admin = dict(server, dbname="postgres", autocommit=True)
    with psycopg.connect(**admin) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(**dict(server, dbname=name, autocommit=True)) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        password = f":{server['password']}" if server["password"] else ""
        yield f"postgres://{server['user']}{password}@{server['host']}:{server['port']}/{name}"
    finally:
        with psycopg.connect(**admin) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def own_broker_url() -> str:
    from django.conf import settings

    parts = urllib.parse.urlsplit(settings.CELERY_BROKER_URL)
    assert parts.scheme.startswith("redis"), "the production stack uses Redis"
    current = int(parts.path.strip("/") or 0)
    db = next(n for n in REDIS_DB_CHOICES if n != current)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, f"/{db}", "", ""))


def production_venv(root: Path) -> Path:
    """deploy/Dockerfile's install: the locked runtime tree, then the package (no deps, not editable),
    its translations compiled first by the image's command (a clean checkout has no .mo files)."""
    source = root / "src"
    shutil.copytree(
        REPO, source,
        ignore=shutil.ignore_patterns(".git", ".venv", "var", "build", "dist", "*.egg-info", "__pycache__",
                                      ".pytest_cache", ".hypothesis", "tests", "*.mo"),
    )
    _run(["bash", str(REPO / "scripts" / "compile-messages.sh"), "--force", str(source)], cwd=root, env=_tool_env())
    venv = root / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    _run([base_python, "-m", "venv", str(venv)], cwd=root, env=_tool_env())
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    _run([*pip, "install", "-q", "--require-hashes", "-r", str(REPO / "requirements" / "prod.txt")],
         cwd=root, env=_tool_env())
    _run([*pip, "install", "-q", "--no-deps", "--no-build-isolation", str(source)], cwd=root, env=_tool_env())
    _run([*pip, "check"], cwd=root, env=_tool_env())
    shutil.rmtree(source)  # the app must run from site-packages, as in the image
    return venv


def _tool_env() -> dict[str, str]:
    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "PIP_CACHE_DIR", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL",
            "PIP_CONFIG_FILE", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    return env


def app_dir(root: Path) -> Path:
    """What the image keeps beside the package (its WORKDIR): manage.py and deploy/."""
    app = root / "app"
    app.mkdir()
    shutil.copy2(REPO / "manage.py", app / "manage.py")
    shutil.copytree(REPO / "deploy", app / "deploy")
    return app


class Stack:
    def __init__(self, root: Path, venv: Path, env: dict[str, str], cwd: Path) -> None:
        self.root, self.venv, self.env, self.cwd = root, venv, env, cwd
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def command(self, args: list[str]) -> list[str]:
        # The image's PATH holds its interpreter's scripts: here, the venv's.
        return [str(self.venv / "bin" / args[0]), *args[1:]]

    def run(self, args: list[str]) -> str:
        return _run(self.command(args), cwd=self.cwd, env=self.env, timeout=300)

    def start(self, name: str, args: list[str]) -> None:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        self.processes[name] = subprocess.Popen(
            self.command(args), cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def logs(self) -> str:
        return "\n".join(f"--- {name} ---\n{self.log(name)}" for name in self.processes)

    def assert_alive(self) -> None:
        dead = {name: p.returncode for name, p in self.processes.items() if p.poll() is not None}
        assert not dead, f"processes exited: {dead}\n{self.logs()}"

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)  # the session this test started for it
                process.wait(timeout=10)


class Api:
    def __init__(self, base: str, key: str | None = None) -> None:
        self.base, self.key = base, key

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"X-Forwarded-Proto": "https", "Accept": "application/json"}  # behind the TLS proxy
        if self.key:
            headers["Authorization"] = f"Api-Key {self.key}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def post(self, path: str, body: Any, expect: int = 201) -> Any:
        status, answer = self.call("POST", path, body)
        assert status == expect, f"POST {path}: {status} {answer}"
        return answer

    def get(self, path: str) -> Any:
        status, answer = self.call("GET", path)
        assert status == 200, f"GET {path}: {status} {answer}"
        return answer


def _wait_for(what: str, probe: Any, stack: Stack, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        stack.assert_alive()
        with contextlib.suppress(OSError):
            last = probe()
            if last:
                return last
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})\n{stack.logs()}")


def test_production_install_runs_web_worker_and_beat_on_the_real_stack(tmp_path: Path) -> None:
    started = time.monotonic()
    commands = compose_commands()
    venv = production_venv(tmp_path)
    app = app_dir(tmp_path)
    port = _free_port()

    with own_database() as database_url:
        env = {
            **_tool_env(),
            "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            # deploy/loreweave.env.example / compose.yaml's environment, for this machine:
            "DEBUG": "false",
            "SECRET_KEY": "prod-install-test-" + uuid.uuid4().hex + uuid.uuid4().hex,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DATABASE_URL": database_url,
            "CELERY_BROKER_URL": own_broker_url(),
            "OMP_NUM_THREADS": "1",
            "LOREWEAVE_DATA_DIR": str(tmp_path / "data"),
            "GUNICORN_BIND": f"127.0.0.1:{port}",
            "GUNICORN_WORKERS": "2",
        }
        stack = Stack(tmp_path, venv, env, app)

        where = stack.run(["python", "-c", "import lore_platform; print(lore_platform.__file__)"])
        assert where.strip().startswith(str(venv)), f"the app must import from the venv, not a checkout: {where}"

        stack.run(commands["migrate"])
        stack.run(["python", "manage.py", "collectstatic", "--noinput"])
        assert (tmp_path / "data" / "static" / "admin" / "css" / "base.css").is_file()
        stack.run(["python", "manage.py", "check", "--deploy", "--fail-level", "WARNING"])
        stack.run(["python", "-m", "web.catalogues"])  # as the image checks its install
        created = json.loads(stack.run(["python", "manage.py", "tenant_create", "Prod Install",
                                        "--admin", "ops@prodinstall.test", "--json"]))

        try:
            for name in ("web", "worker", "beat"):
                stack.start(name, commands[name])
            base = f"http://127.0.0.1:{port}"

            def healthy() -> Any:
                status, body = Api(base).call("GET", "/healthz")
                return body if status == 200 else None

            health = _wait_for("GET /healthz 200", healthy, stack, 90)
            assert health["checks"]["vector"]["backend"] == "pgvector"
            assert health["checks"]["broker"]["mode"] == "broker"
            _wait_for("the worker to be ready", lambda: " ready." in stack.log("worker"), stack, 60)

            # The pages speak Spanish from the installed package (its compiled catalogue).
            spanish = urllib.request.Request(base + "/login", headers={
                "Accept-Language": "es", "X-Forwarded-Proto": "https"})
            with urllib.request.urlopen(spanish, timeout=30) as response:
                page = response.read().decode()
            assert '<html lang="es">' in page and "Iniciar sesión" in page, page[:2000]

            api = Api(base, created["api_key"])
            # A classic book with an entry, on a character's chat: the turn injects it.
            book = api.post("/api/v1/books", {"title": "Coast", "profile": "classic"})
            entry = api.post(f"/api/v1/books/{book['id']}/entries",
                             {"title": "Lighthouse", "keys": ["lighthouse"],
                              "content": "The lighthouse never goes dark."})
            character = api.post("/api/v1/characters", {"name": "Kael", "lineage_key": "Kael"})
            api.post("/api/v1/attachments", {"target": "character", "target_id": character["id"],
                                              "book_id": book["id"]})
            chat = api.post("/api/v1/chats", {"kind": "character", "character_id": character["id"],
                                               "profile": "classic"})
            turn = api.post(f"/api/v1/chats/{chat['id']}/context", {
                "messages": [{"role": "user", "name": "Ana", "text": "We row toward the lighthouse."}],
                "model": {"tokenizer": "ceil-chars-4", "input_window": 8192},
            }, expect=200)
            assert [i["content"] for i in turn["injections"]] == ["The lighthouse never goes dark."]

            # The web process set a usage sweep on Redis; the worker counts the turn.
            entry_path = f"/api/v1/books/{book['id']}/entries/{entry['id']}"
            _wait_for("the entry's usage count to reach 1",
                      lambda: api.get(entry_path)["usage_count"] == 1, stack, 30)

            # A smart entry is indexed (embedded) by the worker.
            world = api.post("/api/v1/books", {"title": "World", "profile": "smart"})
            smart = api.post(f"/api/v1/books/{world['id']}/entries", {
                "title": "Varn", "keys": ["river city"],
                "content": "Varn is the river city of salt, built where the delta meets the sea.",
            })
            smart_path = f"/api/v1/books/{world['id']}/entries/{smart['id']}"
            _wait_for("the smart entry to be indexed",
                      lambda: api.get(smart_path)["indexing_state"] == "indexed", stack, 60)

            stack.assert_alive()
            assert "beat: Starting" in stack.log("beat"), stack.log("beat")
        finally:
            stack.stop()
    for name in ("worker", "beat", "web"):
        assert "Traceback" not in stack.log(name), stack.log(name)
    assert time.monotonic() - started < 600
