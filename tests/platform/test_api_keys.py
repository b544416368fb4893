"""API keys: hashed at rest, shown once, scoped, revocable; 401 with a JSON body."""
from __future__ import annotations

import time

import pytest
from django.core.management import call_command
from django.utils import timezone

from lore_platform.tenancy.keys import key_hash, key_split
from lore_platform.tenancy.models import ApiKey
from lore_platform.tenancy.selectors import verified_keys
from lore_platform.tenancy.services import api_key_create, api_key_revoke

pytestmark = pytest.mark.django_db


def test_key_is_stored_only_as_a_hash(tenant_a):
    issued = api_key_create(tenant=tenant_a.tenant, name="bot", scopes=["read"])
    row = ApiKey.objects.for_tenant(tenant_a.tenant).get(pk=issued.api_key.pk)
    prefix, secret = key_split(issued.secret)
    assert row.prefix == prefix
    assert row.secret_hash == key_hash(secret)
    # Nothing stored can be turned back into the key.
    stored = [str(value) for value in ApiKey.objects.unscoped().filter(pk=row.pk).values().get().values()]
    assert not any(secret in value for value in stored)


def test_valid_key_reaches_its_tenant(tenant_a):
    response = tenant_a.admin_client.get("/api/v1/tenant")
    assert response.status_code == 200
    body = response.json()
    assert body["tenant"]["slug"] == tenant_a.tenant.slug
    assert body["role"] == "admin"
    assert body["scopes"] == ["read", "write"]


@pytest.mark.parametrize(
    "header",
    [
        "Api-Key lw_deadbeef_notarealsecret",
        "Api-Key garbage",
        "Api-Key ",
    ],
)
def test_bad_key_is_401_with_json_body(anon_client, tenant_a, header):
    response = anon_client.get("/api/v1/tenant", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == "authentication_failed"


def test_right_prefix_wrong_secret_is_401(anon_client, tenant_a):
    prefix, _ = key_split(tenant_a.admin_key)
    response = anon_client.get("/api/v1/tenant", HTTP_AUTHORIZATION=f"Api-Key lw_{prefix}_wrongsecret")
    assert response.status_code == 401


def test_no_credentials_is_401(anon_client, db):
    response = anon_client.get("/api/v1/tenant")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert response["WWW-Authenticate"] == "Api-Key"


def test_revoked_key_stops_working(tenant_a):
    client = tenant_a.read_client
    assert client.get("/api/v1/tenant").status_code == 200
    prefix, _ = key_split(tenant_a.read_key)
    key = ApiKey.objects.for_tenant(tenant_a.tenant).get(prefix=prefix)
    api_key_revoke(tenant=tenant_a.tenant, key_id=key.pk)
    response = client.get("/api/v1/tenant")
    assert response.status_code == 401
    assert "revoked" in response.json()["error"]["message"].lower()


def test_last_used_time_is_recorded(tenant_a):
    prefix, _ = key_split(tenant_a.read_key)
    assert ApiKey.objects.for_tenant(tenant_a.tenant).get(prefix=prefix).last_used_at is None
    tenant_a.read_client.get("/api/v1/tenant")
    assert ApiKey.objects.for_tenant(tenant_a.tenant).get(prefix=prefix).last_used_at is not None


def test_read_scope_cannot_write(tenant_a):
    before = ApiKey.objects.for_tenant(tenant_a.tenant).count()
    # A read key whose user is an admin still cannot write.
    issued = api_key_create(tenant=tenant_a.tenant, name="ro-admin", scopes=["read"], user=tenant_a.admin)
    client = tenant_a.client(issued.secret)
    response = client.post("/api/v1/api-keys", {"name": "x", "scopes": ["read"]}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert ApiKey.objects.for_tenant(tenant_a.tenant).count() == before + 1


def test_admin_creates_key_shown_once(tenant_a):
    response = tenant_a.admin_client.post("/api/v1/api-keys", {"name": "bot", "scopes": ["read"]}, format="json")
    assert response.status_code == 201
    created = response.json()
    assert created["key"].startswith("lw_")
    # The new key works, and the listing never shows the secret again.
    assert tenant_a.client(created["key"]).get("/api/v1/tenant").json()["scopes"] == ["read"]
    listing = tenant_a.admin_client.get("/api/v1/api-keys").json()
    assert all("key" not in row for row in listing["results"])
    assert created["prefix"] in {row["prefix"] for row in listing["results"]}


def test_write_scope_implies_read(tenant_a):
    issued = api_key_create(tenant=tenant_a.tenant, name="w", scopes=["write"])
    assert issued.api_key.scopes == ["read", "write"]


def test_unknown_scope_is_400_naming_the_field(tenant_a):
    response = tenant_a.admin_client.post("/api/v1/api-keys", {"name": "bot", "scopes": ["root"]}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"].startswith("scopes")


def test_member_cannot_manage_keys(tenant_a):
    assert tenant_a.member_client.get("/api/v1/api-keys").status_code == 403
    before = ApiKey.objects.for_tenant(tenant_a.tenant).count()
    response = tenant_a.member_client.post("/api/v1/api-keys", {"name": "x", "scopes": ["read"]}, format="json")
    assert response.status_code == 403
    assert ApiKey.objects.for_tenant(tenant_a.tenant).count() == before


def test_revoke_endpoint(tenant_a):
    prefix, _ = key_split(tenant_a.read_key)
    key = ApiKey.objects.for_tenant(tenant_a.tenant).get(prefix=prefix)
    response = tenant_a.admin_client.post(f"/api/v1/api-keys/{key.pk}/revoke")
    assert response.status_code == 200
    assert response.json()["revoked_at"] is not None
    assert tenant_a.read_client.get("/api/v1/tenant").status_code == 401


def test_tenant_create_command_prints_a_working_key(capsys, db):
    import json

    call_command("tenant_create", "Moonlit Guild", "--admin", "owner@moonlit.test", "--json")
    printed = json.loads(capsys.readouterr().out)
    assert printed["tenant"]["name"] == "Moonlit Guild"
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {printed['api_key']}")
    body = client.get("/api/v1/tenant").json()
    assert body["tenant"]["slug"] == printed["tenant"]["slug"]
    assert body["user_email"] == "owner@moonlit.test"


def test_tenant_create_command_text_output(capsys, db):
    call_command("tenant_create", "Plain", "--admin", "p@plain.test")
    out = capsys.readouterr().out
    assert "API key: lw_" in out


def _revoke_elsewhere(setup, raw_key):
    """Revoke as another web process would: in the database, without this process hearing of it."""
    prefix, _ = key_split(raw_key)
    ApiKey.objects.for_tenant(setup.tenant).filter(prefix=prefix).update(revoked_at=timezone.now())
    return prefix


def test_key_revoked_by_another_process_stops_working_within_the_cache_time(tenant_a, settings):
    settings.API_KEY_CACHE_SECONDS = 10
    client = tenant_a.read_client
    assert client.get("/api/v1/tenant").status_code == 200  # verified, remembered here
    prefix = _revoke_elsewhere(tenant_a, tenant_a.read_key)
    # Within the cache time this process still trusts its check...
    assert client.get("/api/v1/tenant").status_code == 200
    # ...and once it has passed, the database answers.
    entry = verified_keys.get(prefix)
    assert entry is not None
    object.__setattr__(entry, "expires", time.monotonic() - 1)
    assert client.get("/api/v1/tenant").status_code == 401


def test_cached_key_still_needs_the_right_secret(anon_client, tenant_a, settings):
    settings.API_KEY_CACHE_SECONDS = 10
    assert tenant_a.read_client.get("/api/v1/tenant").status_code == 200
    prefix, _ = key_split(tenant_a.read_key)
    assert verified_keys.get(prefix) is not None
    response = anon_client.get("/api/v1/tenant", HTTP_AUTHORIZATION=f"Api-Key lw_{prefix}_wrongsecret")
    assert response.status_code == 401


def test_last_used_write_notices_a_revocation_at_once(tenant_a, settings):
    settings.API_KEY_CACHE_SECONDS = 10
    client = tenant_a.read_client
    assert client.get("/api/v1/tenant").status_code == 200
    prefix = _revoke_elsewhere(tenant_a, tenant_a.read_key)
    # The minute-resolution last-used write is due: it finds the key revoked.
    ApiKey.objects.for_tenant(tenant_a.tenant).filter(prefix=prefix).update(last_used_at=None)
    entry = verified_keys.get(prefix)
    assert entry is not None
    object.__setattr__(entry, "key_row", (entry.key_row[0], tuple(
        None if name == "last_used_at" else value for name, value in zip(*entry.key_row, strict=True))))
    assert client.get("/api/v1/tenant").status_code == 401


def test_role_change_applies_at_once_in_this_process(tenant_a, settings):
    from lore_platform.tenancy.models import Membership
    from lore_platform.tenancy.services import api_key_create, membership_set

    settings.API_KEY_CACHE_SECONDS = 10
    issued = api_key_create(tenant=tenant_a.tenant, name="member's", scopes=["write"], user=tenant_a.member)
    client = tenant_a.client(issued.secret)
    assert client.get("/api/v1/api-keys").status_code == 403  # members do not manage keys
    membership_set(tenant=tenant_a.tenant, user=tenant_a.member, role=Membership.Role.ADMIN)
    assert client.get("/api/v1/api-keys").status_code == 200


def test_cache_time_zero_checks_the_database_every_call(tenant_a, settings):
    settings.API_KEY_CACHE_SECONDS = 0
    client = tenant_a.read_client
    assert client.get("/api/v1/tenant").status_code == 200
    _revoke_elsewhere(tenant_a, tenant_a.read_key)
    assert client.get("/api/v1/tenant").status_code == 401
