"""CORS for browser partners (P-6), on django-cors-headers.

The rule, since allowed origins belong to tenants and a preflight carries no key:

- A preflight (``OPTIONS`` with ``Access-Control-Request-Method``) under ``/api/v1/`` is answered by
  the middleware, before authentication (never a 401). It allows the origin when some tenant allows
  it, or for any origin when it asks for a read (GET/HEAD) of the public library.
- The actual call gets ``Access-Control-Allow-Origin`` only when the key's tenant allows the origin;
  a key sent from an origin its tenant does not allow is refused (403 ``origin_not_allowed``) before
  anything is read or written — the preflight alone cannot tell tenants apart.
- Anonymous reads of the public library (``/api/v1/library/…``) and of the OpenAPI schema
  (``/api/schema/``) answer ``*`` to every origin.
- Credentials (cookies) are never allowed cross-origin: a signed-in session's calls never get the
  header, and ``Access-Control-Allow-Credentials`` is never sent.
"""
from __future__ import annotations

import logging
from typing import Any

from corsheaders.middleware import ACCESS_CONTROL_ALLOW_ORIGIN, CorsMiddleware
from django.db import DatabaseError
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from lore_platform.errors import PermissionDenied
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Tenant
from lore_platform.tenancy.selectors import cors_origins_any_tenant

logger = logging.getLogger(__name__)

# What CORS covers (settings.CORS_URLS_REGEX says the same): the API and its schema, never the pages.
API_PREFIXES = ("/api/v1/", "/api/schema/")
PUBLIC_READ_PREFIXES = ("/api/v1/library/", "/api/schema/")
READ_METHODS = frozenset({"GET", "HEAD"})


def is_preflight(request: HttpRequest) -> bool:
    return request.method == "OPTIONS" and "access-control-request-method" in request.headers


def is_public_read(request: HttpRequest) -> bool:
    """A read of the public library or the schema (for a preflight: one that asks to read)."""
    if not request.path_info.startswith(PUBLIC_READ_PREFIXES):
        return False
    method = request.headers.get("access-control-request-method", "") if is_preflight(request) else request.method
    return (method or "").upper() in READ_METHODS


def cross_origin(request: Any) -> str | None:
    """The ``Origin`` of a call made from another origin's page, else None (same origin, or no browser)."""
    origin = request.headers.get("Origin")
    if not origin:
        return None
    own = f"{request.scheme}://{request.get_host()}"
    return None if origin.lower() == own.lower() else origin


def tenant_allows(tenant: Tenant, origin: str) -> bool:
    return origin.lower() in (tenant.cors_origins or [])


def key_origin_check(request: Any, actor: Actor) -> None:
    """Refuse a key used from a page whose origin the key's tenant does not allow (before the view runs)."""
    origin = cross_origin(request)
    if origin is not None and not tenant_allows(actor.tenant, origin):
        raise PermissionDenied(
            "This API key's tenant does not allow calls from {origin}; a tenant admin adds it to the "
            "allowed origins (PUT /api/v1/tenant/cors or the API keys page).",
            values={"origin": origin}, field="Origin", rule="P-6", code="origin_not_allowed",
        )


def _any_tenant_allows(origin: str) -> bool:
    try:
        return origin.lower() in cors_origins_any_tenant()
    except DatabaseError:
        # The database is down: the call itself answers 503; no header is the safe answer.
        logger.warning("cors: origins not readable, %s refused", origin)
        return False


def origin_allowed(sender: Any = None, *, request: HttpRequest, **_: Any) -> bool:
    """django-cors-headers' ``check_request_enabled`` signal: may ``request``'s origin read the answer?"""
    if not request.path_info.startswith(API_PREFIXES):
        return False
    origin = request.headers.get("Origin")
    if not origin:
        return False
    if is_preflight(request):
        return is_public_read(request) or _any_tenant_allows(origin)
    actor = getattr(request, "auth", None)  # DRF copies what authenticated onto the Django request
    if isinstance(actor, Actor):
        return actor.api_key is not None and tenant_allows(actor.tenant, origin)
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return False  # a browser session (cookies) never answers another origin
    if is_public_read(request):
        return True
    # Anonymous and not public: an error (a wrong or revoked key, 401) is readable by the origins some
    # tenant allows, so a partner's page can say why its call failed.
    return _any_tenant_allows(origin)


class TenantCorsMiddleware(CorsMiddleware):
    """django-cors-headers' middleware, answering ``*`` to anonymous reads of the library and the schema."""

    def add_response_headers(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        response = super().add_response_headers(request, response)
        if response.has_header(ACCESS_CONTROL_ALLOW_ORIGIN) and is_public_read(request) and not isinstance(
            getattr(request, "auth", None), Actor
        ):
            response[ACCESS_CONTROL_ALLOW_ORIGIN] = "*"
        return response
