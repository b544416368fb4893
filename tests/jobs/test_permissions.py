"""Permission matrix of the jobs endpoints: anonymous, other tenant, another member, read key, owner, admin.
A denial changes nothing."""
from __future__ import annotations

from typing import Any

import pytest

from tests.jobs.test_jobs import NOTES

pytestmark = pytest.mark.django_db


def _job(owner: Any, capture: Any, *, execute: bool) -> dict[str, Any]:
    with capture(execute=execute):
        created = owner.post("/api/v1/jobs/split", {"text": NOTES}, format="json")
    assert created.status_code == 202
    return owner.get(f"/api/v1/jobs/{created.json()['id']}").json()


@pytest.mark.parametrize("action", ["get", "cancel", "retry", "accept"])
def test_who_may_touch_a_members_job(action, tenant_a, tenant_b, anon_client, no_model,
                                     django_capture_on_commit_callbacks):
    owner = tenant_a.member_client
    job = _job(owner, django_capture_on_commit_callbacks, execute=action not in {"cancel", "retry"})
    if action == "retry":
        assert owner.post(f"/api/v1/jobs/{job['id']}/cancel").status_code == 200  # retry takes a cancelled job
    before = owner.get(f"/api/v1/jobs/{job['id']}").json()
    url = f"/api/v1/jobs/{job['id']}" + ("" if action == "get" else f"/{action}")

    def call(client: Any) -> int:
        with django_capture_on_commit_callbacks(execute=False):
            response = client.get(url) if action == "get" else client.post(url, {}, format="json")
        return response.status_code

    assert call(anon_client) == 401
    assert call(tenant_b.admin_client) == 404
    admin = tenant_a.admin_client  # admins see every job of the tenant
    if action != "get":
        assert call(tenant_a.read_client) == 403
    assert owner.get(f"/api/v1/jobs/{job['id']}").json() == before
    assert call(admin) in {200, 201, 202}


def test_another_member_does_not_see_the_job(tenant_a, no_model, django_capture_on_commit_callbacks):
    from lore_platform.tenancy.services import api_key_create, membership_set, user_get_or_create

    job = _job(tenant_a.member_client, django_capture_on_commit_callbacks, execute=True)
    colleague = user_get_or_create(email="colleague@alpha.test")
    membership_set(tenant=tenant_a.tenant, user=colleague, role="member")
    key = api_key_create(tenant=tenant_a.tenant, name="colleague", scopes=["read", "write"], user=colleague)
    client = tenant_a.client(key.secret)
    assert client.get(f"/api/v1/jobs/{job['id']}").status_code == 404
    assert client.post(f"/api/v1/jobs/{job['id']}/accept", {}, format="json").status_code == 404
    assert client.get("/api/v1/jobs").json()["count"] == 0


def test_model_settings_are_the_admins(tenant_a, anon_client, no_model, settings):
    settings.MODEL_ENDPOINTS = "local=http://127.0.0.1:9/v1"  # the operator's endpoint, chosen by name
    body = {"endpoint": "local", "model": "m"}
    assert anon_client.put("/api/v1/jobs/model", body, format="json").status_code == 401
    assert tenant_a.member_client.put("/api/v1/jobs/model", body, format="json").status_code == 403
    assert tenant_a.admin_client.get("/api/v1/jobs/model").json()["configured"] is False
    bad = tenant_a.admin_client.put("/api/v1/jobs/model", {"base_url": "ftp://x"}, format="json")
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "base_url"
    assert tenant_a.admin_client.put("/api/v1/jobs/model", body, format="json").json()["configured"] is True
    shown = tenant_a.admin_client.get("/api/v1/jobs/model").json()
    assert shown["api_key_set"] is False and "api_key" not in shown
