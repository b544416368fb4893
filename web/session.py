"""Who is signed in, and in which of their tenants they act (the tenant switcher)."""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.selectors import actor_for_user, user_memberships

TENANT_KEY = "web_tenant"


def web_actor(request: HttpRequest) -> Actor | None:
    """The actor of a signed-in request: the tenant chosen in the session, else their first one."""
    cached = getattr(request, "_web_actor", None)
    if cached is not None:
        return cached
    user = request.user
    if not user.is_authenticated:
        return None
    slug = request.session.get(TENANT_KEY)
    actor = actor_for_user(user, slug) if slug else None
    if actor is None:
        memberships = user_memberships(user)
        if not memberships:
            return None
        first = memberships[0]
        actor = Actor(tenant=first.tenant, user=user, role=first.role)
        request.session[TENANT_KEY] = first.tenant.slug
    request._web_actor = actor  # type: ignore[attr-defined]
    return actor


def tenant_switch(request: HttpRequest, slug: str) -> bool:
    """Act in the tenant ``slug`` from now on; False when the user is not a member there."""
    if actor_for_user(request.user, slug) is None:  # type: ignore[arg-type]
        return False
    request.session[TENANT_KEY] = slug
    request.__dict__.pop("_web_actor", None)
    return True


def page_actor(request: HttpRequest) -> Actor:
    """The actor of a page behind ``actor_required``: the one typed way a view reads who acts.

    Django's request has no ``actor`` attribute to type; reading it through here keeps views free of
    ``type: ignore`` and fails loudly (not with an AttributeError deep in a view) when a view forgot the decorator.
    """
    actor = getattr(request, "actor", None)
    if not isinstance(actor, Actor):
        raise RuntimeError("page_actor() needs a view behind @actor_required")
    return actor


def actor_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Sign-in first; the view reads the actor with ``page_actor(request)``."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        actor = web_actor(request)
        if actor is None:
            if request.user.is_authenticated:
                # Signed in but in no workspace yet (or any more): sending them to sign in would loop.
                return render(request, "web/no_workspace.html", status=200)
            return redirect_to_login(request.get_full_path())
        setattr(request, "actor", actor)  # noqa: B010 - HttpRequest declares no actor; page_actor() reads it typed
        return view(request, *args, **kwargs)

    return wrapped
