"""Shared fixtures: tenants, users, keys and API clients.

The same suite runs on SQLite (embedded default) and on PostgreSQL + pgvector
with Redis (``DATABASE_URL`` / ``CELERY_BROKER_URL`` set). With ``CI=true`` or
``REQUIRE_SERVICES=1`` a missing service fails the run instead of skipping.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient


def services_required() -> bool:
    return os.environ.get("CI") == "true" or os.environ.get("REQUIRE_SERVICES") == "1"


def pytest_configure(config: pytest.Config) -> None:
    # Unit tests run tasks in-process even when a broker is configured; the
    # integration tests in tests/platform/test_celery_worker.py use a real worker.
    from config.celery import app

    app.conf.task_always_eager = True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from django.conf import settings

    on_postgres = settings.DATABASE_IS_POSTGRES
    broker = bool(settings.CELERY_BROKER_URL)
    for item in items:
        if item.get_closest_marker("postgres") and not on_postgres:
            item.add_marker(pytest.mark.skip(reason="needs PostgreSQL + pgvector: runs in the PostgreSQL pass"))
        if item.get_closest_marker("services") and not broker:
            item.add_marker(pytest.mark.skip(reason="needs Redis + a Celery worker: runs in the PostgreSQL pass"))


@dataclass
class TenantSetup:
    tenant: Any
    admin: Any
    member: Any
    admin_key: str
    member_key: str
    read_key: str

    def client(self, key: str | None) -> APIClient:
        client = APIClient()
        if key:
            client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
        return client

    @property
    def admin_client(self) -> APIClient:
        return self.client(self.admin_key)

    @property
    def member_client(self) -> APIClient:
        return self.client(self.member_key)

    @property
    def read_client(self) -> APIClient:
        return self.client(self.read_key)


@pytest.fixture
def make_tenant(db: Any) -> Callable[..., TenantSetup]:
    from lore_platform.tenancy.models import Membership
    from lore_platform.tenancy.services import api_key_create, membership_set, tenant_create, user_get_or_create

    counter = {"n": 0}

    def make(name: str | None = None, profile: str = "classic") -> TenantSetup:
        counter["n"] += 1
        label = name or f"Tenant {counter['n']}"
        slug = label.lower().replace(" ", "")
        created = tenant_create(name=label, admin_email=f"admin@{slug}.test", profile=profile)
        member = user_get_or_create(email=f"member@{slug}.test")
        membership_set(tenant=created.tenant, user=member, role=Membership.Role.MEMBER)
        member_key = api_key_create(tenant=created.tenant, name="member", scopes=["read", "write"], user=member)
        read_key = api_key_create(tenant=created.tenant, name="reader", scopes=["read"], user=member)
        return TenantSetup(
            tenant=created.tenant,
            admin=created.admin,
            member=member,
            admin_key=created.key.secret,
            member_key=member_key.secret,
            read_key=read_key.secret,
        )

    return make


@pytest.fixture
def tenant_a(make_tenant: Callable[..., TenantSetup]) -> TenantSetup:
    return make_tenant("Alpha")


@pytest.fixture
def tenant_b(make_tenant: Callable[..., TenantSetup]) -> TenantSetup:
    return make_tenant("Beta")


@pytest.fixture
def anon_client() -> APIClient:
    return APIClient()


@pytest.fixture(autouse=True)
def _fresh_abuse_counters(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test counts failed sign-ins and sign-ups afresh: the suite signs in and up from one address
    many times, and the cache (process memory or Redis) outlives a test. Fresh keys, not a flush
    (on Redis that would empty a database other runs use)."""
    import uuid

    from lore_platform.tenancy import limits

    monkeypatch.setattr(limits, "KEY_PREFIX", f"abuse-test-{uuid.uuid4().hex}")
