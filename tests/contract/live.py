"""A live Loreweave on the embedded default: its own SQLite file, gunicorn, the demo tenant.

Started as a partner would reach it (a real socket, the production gunicorn config),
whatever database the surrounding test pass uses.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class LiveServer:
    url: str
    api_key: str
    book_id: int
    log: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def embedded_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL"}}
    env.update(
        LOREWEAVE_DATA_DIR=str(data_dir),
        DJANGO_SETTINGS_MODULE="config.settings",
        OMP_NUM_THREADS="1",
        # The tools send thousands of requests a minute; the throttle has its own tests.
        API_THROTTLE_RATE="1000000/min",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


@contextmanager
def live_server(data_dir: Path) -> Iterator[LiveServer]:
    env = embedded_env(data_dir)
    manage = [str(BIN / "python"), str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, cwd=ROOT, check=True)
    demo = json.loads(subprocess.run([*manage, "demo_setup", "--json"], env=env, cwd=ROOT, check=True,
                                     capture_output=True, text=True).stdout.strip().splitlines()[-1])
    port = _free_port()
    log = data_dir / "server.log"
    server_env = dict(env, GUNICORN_WORKERS="2", GUNICORN_THREADS="4", GUNICORN_ACCESS_LOG="off")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(BIN / "gunicorn"), "config.wsgi:application", "--config", str(ROOT / "deploy/gunicorn.conf.py"),
             "--bind", f"127.0.0.1:{port}"],
            env=server_env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the live server did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        yield LiveServer(url=url, api_key=demo["api_key"], book_id=int(demo["book_id"]), log=log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
