"""Cross-tenant access looks like absence (P-3): 404, and nothing changes."""
from __future__ import annotations

import pytest

from lore_platform.tenancy.keys import key_split
from lore_platform.tenancy.models import ApiKey

pytestmark = pytest.mark.django_db


def _key_row(setup, raw):
    prefix, _ = key_split(raw)
    return ApiKey.objects.for_tenant(setup.tenant).get(prefix=prefix)


def test_other_tenants_key_is_404(tenant_a, tenant_b):
    foreign = _key_row(tenant_b, tenant_b.read_key)
    response = tenant_a.admin_client.get(f"/api/v1/api-keys/{foreign.pk}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_revoking_another_tenants_key_is_404_and_changes_nothing(tenant_a, tenant_b):
    foreign = _key_row(tenant_b, tenant_b.read_key)
    response = tenant_a.admin_client.post(f"/api/v1/api-keys/{foreign.pk}/revoke")
    assert response.status_code == 404
    foreign.refresh_from_db()
    assert foreign.revoked_at is None
    assert tenant_b.read_client.get("/api/v1/tenant").status_code == 200


def test_listing_shows_only_own_keys(tenant_a, tenant_b):
    rows = tenant_a.admin_client.get("/api/v1/api-keys").json()["results"]
    own = set(ApiKey.objects.for_tenant(tenant_a.tenant).values_list("prefix", flat=True))
    assert {row["prefix"] for row in rows} == own
    assert not own & set(ApiKey.objects.for_tenant(tenant_b.tenant).values_list("prefix", flat=True))


def test_each_key_sees_its_own_tenant(tenant_a, tenant_b):
    assert tenant_a.read_client.get("/api/v1/tenant").json()["tenant"]["slug"] == tenant_a.tenant.slug
    assert tenant_b.read_client.get("/api/v1/tenant").json()["tenant"]["slug"] == tenant_b.tenant.slug


def test_scoped_manager_refuses_rows_without_tenant(db):
    with pytest.raises(ValueError):
        ApiKey.objects.create(name="orphan", prefix="00000000", secret_hash="x", scopes=["read"])


def test_session_user_in_two_tenants_must_name_one(tenant_a, tenant_b):
    from rest_framework.test import APIClient

    from lore_platform.tenancy.services import membership_set

    membership_set(tenant=tenant_b.tenant, user=tenant_a.admin, role="member")
    client = APIClient()
    client.force_login(tenant_a.admin)
    assert client.get("/api/v1/tenant").status_code == 403
    named = client.get("/api/v1/tenant", HTTP_X_LOREWEAVE_TENANT=tenant_b.tenant.slug)
    assert named.status_code == 200
    assert named.json()["tenant"]["slug"] == tenant_b.tenant.slug
    assert named.json()["role"] == "member"
