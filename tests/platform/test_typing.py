"""The whole product is type-checked (mypy with django-stubs and the DRF stubs, pyproject [tool.mypy]):
services, selectors and the engine strictly, the rest with every function body checked.

Folds in the engine's own check (retrieval/engine is strict and imports no Django)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection
from django.http import HttpResponse
from django.test import RequestFactory

from web.session import actor_required, page_actor

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ["config", "web", "backup", "cast", "jobs", "sharing", "retrieval", "books", "lore_platform"]

# The code is the same in both passes of `make test`: checked once, in the SQLite pass.
once = pytest.mark.skipif(connection.vendor == "postgresql",
                          reason="static check: runs once, in the SQLite pass")


def _mypy(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), "--no-error-summary", *args],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )


@once
def test_the_product_type_checks(tmp_path):
    result = _mypy(tmp_path / "mypy", *PRODUCT)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


@once
def test_the_engine_is_strict_on_its_own(tmp_path):
    # Checked alone: the engine must not lean on Django's stubs (it imports no Django).
    result = _mypy(tmp_path / "mypy", "--strict", "retrieval/engine")
    assert result.returncode == 0, result.stdout[-3000:]


def test_a_page_reads_its_actor_typed_and_refuses_without_the_decorator(tenant_a):
    """``page_actor`` is the one way a page view reads who acts: behind ``actor_required`` it is the
    signed-in member's actor; a view that forgot the decorator fails at once instead of running actor-less."""
    factory = RequestFactory()
    seen = []

    @actor_required
    def view(request):
        seen.append(page_actor(request))
        return HttpResponse("ok")

    request = factory.get("/")
    request.user = tenant_a.admin
    request.session = {}
    assert view(request).status_code == 200
    assert seen[0].tenant == tenant_a.tenant and seen[0].user == tenant_a.admin

    with pytest.raises(RuntimeError, match="actor_required"):
        page_actor(factory.get("/"))
