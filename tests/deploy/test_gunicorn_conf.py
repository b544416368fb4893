"""The web server's worker class (deploy/gunicorn.conf.py): sync behind a buffering proxy, gthread without one;
compose.yaml puts nginx (deploy/nginx) in front of gunicorn, which publishes no port of its own."""
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


def test_compose_puts_the_buffering_proxy_in_front_of_gunicorn():
    # Only nginx is reachable from outside: a slow client holds the proxy, never a sync worker (issue 26.6).
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    assert "ports" not in services["web"]
    assert "GUNICORN_WORKER_CLASS" not in services["web"]["environment"]  # sync, the default
    assert services["web"]["environment"]["CLIENT_ADDRESS_PROXIES"] == "1"
    proxy = services["proxy"]
    assert proxy["build"]["target"] == "proxy" and proxy["ports"] == ["80:80"] and proxy["depends_on"] == ["web"]
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    stage = dockerfile[dockerfile.index("AS proxy"):]
    assert "apt-get install -y -q --no-install-recommends nginx" in stage  # Debian's package
    assert "COPY deploy/nginx/loreweave-proxy.conf /etc/nginx/snippets/loreweave-proxy.conf" in stage
    assert "COPY --from=app /app/static /var/lib/loreweave/static" in stage
    assert dockerfile.rstrip().endswith("FROM app")  # the default target stays the app image
