"""A model's answer holding NUL or a lone surrogate is repaired, not stored raw (issue 26, point 5).

What the model says is no caller's input to refuse: the draft keeps U+FFFD in place of a lone
surrogate and drops NUL, so the job can be stored (PostgreSQL's jsonb takes neither), read and accepted.
"""
from __future__ import annotations

import json

import pytest

from books.models import Entry
from tests.jobs.llm_server import completion

pytestmark = pytest.mark.django_db

WORLD = "A drowned archipelago where lighthouse-keepers rule and the tide hides old gods."


def _entries() -> str:
    rows = [{"title": f"Isle number {n}", "lore": f"The isle number {n} is ruled by a keeper of the light.",
             "aliases": [f"Isle {n}"], "canon": n == 1} for n in range(1, 6)]
    text = json.dumps({"entries": rows})
    # A lone surrogate as the model's JSON escape, and a raw NUL in its text.
    return text.replace("isle number 2 is", "isle number 2 \\udc00 is").replace("isle number 3 is", "isle\x00 number 3 is")


def test_a_draft_with_nul_and_a_lone_surrogate_is_repaired(tenant_a, model, django_capture_on_commit_callbacks):
    model.script(completion(_entries()))
    client = tenant_a.admin_client
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post("/api/v1/jobs/generate", {"description": WORLD}, format="json")
    assert started.status_code == 202, started.content
    body = client.get(f"/api/v1/jobs/{started.json()['id']}")
    assert body.status_code == 200, body.content
    draft = {row["title"]: row["lore"] for row in body.json()["draft"]}
    assert draft["Isle number 2"] == "The isle number 2 \ufffd is ruled by a keeper of the light."
    assert draft["Isle number 3"] == "The isle number 3 is ruled by a keeper of the light."
    with django_capture_on_commit_callbacks(execute=True):
        accepted = client.post(f"/api/v1/jobs/{started.json()['id']}/accept", {"title": "Isles"}, format="json")
    assert accepted.status_code in (200, 201), accepted.content
    assert "\ufffd" in Entry.objects.for_tenant(tenant_a.tenant).get(title="Isle number 2").content
