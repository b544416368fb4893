"""Tenant scoping by construction.

Every model that holds a tenant's data uses ``TenantScopedManager`` as its
``objects``. Queries start from ``Model.objects.for_tenant(tenant)``; a
deliberate cross-tenant read is spelled ``Model.objects.unscoped()`` so it
stands out in review (only sharing selectors and operator code may use it).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

from django.db import models

if TYPE_CHECKING:
    from lore_platform.tenancy.models import Tenant

M = TypeVar("M", bound=models.Model)


class TenantScopedQuerySet(models.QuerySet[M], Generic[M]):
    def for_tenant(self, tenant: Tenant) -> TenantScopedQuerySet[M]:
        return self.filter(tenant=tenant)


class TenantScopedManager(models.Manager[M], Generic[M]):
    """Manager whose public entry points name the tenant they read."""

    def get_queryset(self) -> TenantScopedQuerySet[M]:
        return TenantScopedQuerySet(self.model, using=self._db)

    def for_tenant(self, tenant: Tenant) -> TenantScopedQuerySet[M]:
        if tenant is None:
            raise ValueError("for_tenant() needs a tenant; use unscoped() for operator code")
        return self.get_queryset().for_tenant(tenant)

    def unscoped(self) -> TenantScopedQuerySet[M]:
        return self.get_queryset()

    def create(self, **kwargs: Any) -> M:
        if kwargs.get("tenant") is None and kwargs.get("tenant_id") is None:
            raise ValueError(f"{self.model.__name__} rows belong to a tenant")
        return super().create(**kwargs)
