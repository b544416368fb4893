"""Permission classes: resolve the tenant actor and enforce key scopes."""
from __future__ import annotations

from typing import Any

from rest_framework import exceptions, permissions

from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.selectors import actor_for_user

TENANT_HEADER = "HTTP_X_LOREWEAVE_TENANT"


def request_actor(request: Any) -> Actor | None:
    """The actor of an authenticated request, cached on the request."""
    cached = getattr(request, "actor", None)
    if cached is not None:
        return cached
    actor: Actor | None = None
    if isinstance(request.auth, Actor):
        actor = request.auth
    elif request.user is not None and request.user.is_authenticated:
        actor = actor_for_user(request.user, request.META.get(TENANT_HEADER))
    request.actor = actor
    return actor


class IsTenantActor(permissions.BasePermission):
    """Authenticated in exactly one tenant, with the scope the method needs."""

    message = "This API key lacks the scope this request needs."

    def has_permission(self, request: Any, view: Any) -> bool:
        if request.user is None or not request.user.is_authenticated:
            raise exceptions.NotAuthenticated()
        actor = request_actor(request)
        if actor is None:
            raise exceptions.PermissionDenied(
                "Signed in, but not in one tenant: send X-Loreweave-Tenant with the tenant's slug."
            )
        if request.method in permissions.SAFE_METHODS:
            return actor.can_read
        required = getattr(view, "required_scope", "write")
        return required in actor.scopes or (required == "read" and actor.can_read)


class IsTenantAdmin(IsTenantActor):
    message = "Only tenant admins may do this."

    def has_permission(self, request: Any, view: Any) -> bool:
        return super().has_permission(request, view) and request.actor.is_admin
