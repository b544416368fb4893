"""One request budget per tenant, shared by every key and every web process (P-6)."""
from __future__ import annotations

import uuid

import pytest

from lore_platform.api import throttling

pytestmark = pytest.mark.django_db


@pytest.fixture
def budget_of_three(monkeypatch):
    monkeypatch.setattr(throttling, "rate_parse", lambda rate: (3, 3600))
    # Fresh counters without clearing the cache (on Redis that would flush the whole database).
    monkeypatch.setattr(throttling.TenantRateThrottle, "key_prefix", f"throttle-test-{uuid.uuid4().hex}")


def test_a_tenant_over_its_budget_gets_429_with_a_json_body_and_retry_after(tenant_a, budget_of_three):
    for _ in range(3):
        assert tenant_a.admin_client.get("/api/v1/tenant").status_code == 200
    # Another key of the same tenant spends the same budget.
    response = tenant_a.read_client.get("/api/v1/tenant")
    assert response.status_code == 429
    assert response.json()["error"]["code"]
    assert 0 < int(response["Retry-After"]) <= 3600


def test_tenants_have_separate_budgets(tenant_a, tenant_b, budget_of_three):
    for _ in range(3):
        tenant_a.admin_client.get("/api/v1/tenant")
    assert tenant_a.admin_client.get("/api/v1/tenant").status_code == 429
    assert tenant_b.admin_client.get("/api/v1/tenant").status_code == 200


def test_the_budget_is_counted_in_the_shared_cache(tenant_a, budget_of_three):
    """Web processes share the cache, not memory: a count made elsewhere counts here."""
    tenant_a.admin_client.get("/api/v1/tenant")
    # A throttle object of its own, as another web process has: it shares only the cache.
    throttle = throttling.TenantRateThrottle()

    class Seen:
        actor = type("A", (), {"tenant": tenant_a.tenant})()

    assert throttle.allow_request(Seen(), None)  # 2 of 3
    assert throttle.allow_request(Seen(), None)  # 3 of 3
    assert tenant_a.admin_client.get("/api/v1/tenant").status_code == 429


def test_an_unreachable_cache_lets_requests_through(tenant_a, settings):
    # Nothing listens on port 1: the counter cannot be reached, and the call still works.
    settings.CACHE_URL = "redis://127.0.0.1:1/0"
    assert tenant_a.admin_client.get("/api/v1/tenant").status_code == 200
