"""Tenant scoping by construction.

Every model that holds a tenant's data uses ``TenantScopedManager`` as its
``objects``. A query over such a model must say whose rows it reads before it
touches the database:

- ``Model.objects.for_tenant(tenant)``: the tenant's rows (the normal case);
- ``Model.objects.unscoped()``: a deliberate cross-tenant read (authentication,
  the public library, the sweeps), spelled out so that it stands out in review;
- a relation from a row that is itself scoped (``chat.request_logs.all()``,
  ``tenant.books.all()``): the parent row is the scope.

Anything else (``Book.objects.filter(...)``, ``Book.objects.all()``, a reverse
relation from a global row such as a user) raises :class:`UnscopedQuery` when it
is evaluated, counted, updated, deleted or used as a subquery. Django's own
internals (deletion, ``refresh_from_db``, forward foreign keys) use the plain
base manager and are unaffected.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

from django.db import models

if TYPE_CHECKING:
    from lore_platform.tenancy.models import Tenant

M = TypeVar("M", bound=models.Model)


class UnscopedQuery(RuntimeError):
    """A query over tenant data that did not say whose rows it reads (a bug, never a user error)."""


class TenantScopedQuerySet(models.QuerySet[M], Generic[M]):
    _tenant_scoped = False

    def _scoped(self) -> TenantScopedQuerySet[M]:
        self._tenant_scoped = True
        return self

    def for_tenant(self, tenant: Tenant | int) -> TenantScopedQuerySet[M]:
        # A tenant's id scopes as well as the row (the sweeps carry ids across tenants).
        if tenant is None:
            raise ValueError("for_tenant() needs a tenant; use unscoped() for operator code")
        return self.filter(tenant=tenant)._scoped()

    def unscoped(self) -> TenantScopedQuerySet[M]:
        return self.all()._scoped()

    # --- the guard: every way a queryset reaches the database ---------------------------------

    def _scope_check(self) -> None:
        if not self._tenant_scoped:
            name = self.model.__name__
            raise UnscopedQuery(
                f"{name} rows belong to tenants: start from {name}.objects.for_tenant(tenant), "
                f"or {name}.objects.unscoped() where a cross-tenant read is the point"
            )

    def _clone(self) -> TenantScopedQuerySet[M]:
        clone: TenantScopedQuerySet[M] = super()._clone()  # type: ignore[misc]  # a private hook, not in the stubs
        clone._tenant_scoped = self._tenant_scoped
        return clone

    def _fetch_all(self) -> None:
        if self._result_cache is None:
            self._scope_check()
        super()._fetch_all()

    def iterator(self, chunk_size: int | None = None) -> Any:
        self._scope_check()
        return super().iterator(chunk_size=chunk_size)

    def aggregate(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self._scope_check()
        return super().aggregate(*args, **kwargs)

    def count(self) -> int:
        if self._result_cache is None:
            self._scope_check()
        return super().count()

    def exists(self) -> bool:
        if self._result_cache is None:
            self._scope_check()
        return super().exists()

    def contains(self, obj: models.Model) -> bool:
        self._scope_check()
        return super().contains(obj)

    def in_bulk(self, *args: Any, **kwargs: Any) -> dict[Any, M]:
        self._scope_check()
        return super().in_bulk(*args, **kwargs)

    def update(self, **kwargs: Any) -> int:
        self._scope_check()
        return super().update(**kwargs)

    def delete(self) -> tuple[int, dict[str, int]]:
        self._scope_check()
        return super().delete()

    def explain(self, *, format: str | None = None, **options: Any) -> str:  # noqa: A002 - Django's name
        self._scope_check()
        return super().explain(format=format, **options)

    def resolve_expression(self, *args: Any, **kwargs: Any) -> Any:
        # Used as a subquery (``id__in=Entry.objects...``): the inner query is scoped too.
        self._scope_check()
        return super().resolve_expression(*args, **kwargs)


class TenantScopedManager(models.Manager[M], Generic[M]):
    """Manager whose querysets refuse to run until they name the tenant they read."""

    def get_queryset(self) -> TenantScopedQuerySet[M]:
        queryset: TenantScopedQuerySet[M] = TenantScopedQuerySet(self.model, using=self._db)
        # A related manager (``chat.request_logs``, ``tenant.books``) is bound to the row it hangs
        # from: that row was read through a scoped query, so it is the scope. A row with no tenant
        # of its own (a user, who may belong to several) is no scope.
        parent = getattr(self, "instance", None)
        if parent is not None and _tenant_owned(parent):
            queryset._tenant_scoped = True
        return queryset

    def for_tenant(self, tenant: Tenant | int) -> TenantScopedQuerySet[M]:
        return self.get_queryset().for_tenant(tenant)

    def unscoped(self) -> TenantScopedQuerySet[M]:
        return self.get_queryset().unscoped()

    def create(self, **kwargs: Any) -> M:
        if kwargs.get("tenant") is None and kwargs.get("tenant_id") is None:
            raise ValueError(f"{self.model.__name__} rows belong to a tenant")
        return super().create(**kwargs)


def _tenant_owned(row: models.Model) -> bool:
    from lore_platform.tenancy.models import Tenant

    return isinstance(row, Tenant) or getattr(row, "tenant_id", None) is not None
