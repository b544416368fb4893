"""Sealed base views: the tenant and actor are resolved once, here.

Subclasses narrow ``scoped_queryset`` (always starting from
``Model.objects.for_tenant(...)``); they never write their own owner filter.
"""
from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import generics, viewsets
from rest_framework.views import APIView

from lore_platform.api.conditional import ConditionalMixin
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.permissions import IsTenantActor, request_actor


def _sealed(cls: type, base: type) -> None:
    # The tenant scope is applied here once; a subclass narrows ``scoped_queryset`` instead.
    if cls is not base and "get_queryset" in vars(cls):
        raise TypeError(f"{cls.__name__} may not override get_queryset: narrow scoped_queryset instead")


class TenantAPIMixin(ConditionalMixin):
    permission_classes = [IsTenantActor]
    # Scope an unsafe method needs; read-only POSTs (previews, stateless context) lower it.
    required_scope = "write"
    request: Any

    @property
    def actor(self) -> Actor:
        actor = request_actor(self.request)
        assert actor is not None, "IsTenantActor runs before any handler"
        return actor


class TenantAPIView(TenantAPIMixin, APIView):
    pass


class TenantGenericAPIView(TenantAPIMixin, generics.GenericAPIView):  # type: ignore[type-arg]
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _sealed(cls, TenantGenericAPIView)

    def scoped_queryset(self, actor: Actor) -> QuerySet[Any]:
        raise NotImplementedError

    def get_queryset(self) -> QuerySet[Any]:
        return self.scoped_queryset(self.actor)


class TenantViewSet(TenantAPIMixin, viewsets.GenericViewSet):  # type: ignore[type-arg]
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _sealed(cls, TenantViewSet)

    def scoped_queryset(self, actor: Actor) -> QuerySet[Any]:
        raise NotImplementedError

    def get_queryset(self) -> QuerySet[Any]:
        return self.scoped_queryset(self.actor)
