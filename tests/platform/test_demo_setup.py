"""`make run`'s demo key stays the same across runs of the same database."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def _run(*args):
    out = StringIO()
    call_command("demo_setup", "--json", *args, stdout=out)
    return json.loads(out.getvalue())


def _works(key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return client.get("/api/v1/tenant").status_code == 200


def test_demo_key_is_stable_across_runs(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    first = _run()
    second = _run()
    assert second["api_key"] == first["api_key"] and second["key_reused"] is True
    assert second["book_id"] == first["book_id"]
    assert _works(first["api_key"])
    assert (tmp_path / "demo-api-key").stat().st_mode & 0o077 == 0


def test_new_key_on_request_or_when_the_kept_one_is_not_this_databases(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    first = _run()
    rotated = _run("--new-key")
    assert rotated["api_key"] != first["api_key"] and not _works(first["api_key"])
    assert _works(rotated["api_key"])
    (tmp_path / "demo-api-key").write_text("lw_deadbeef_stale\n")
    fresh = _run()
    assert fresh["key_reused"] is False and _works(fresh["api_key"]) and not _works(rotated["api_key"])
    assert _run()["api_key"] == fresh["api_key"]
