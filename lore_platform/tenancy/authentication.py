"""``Authorization: Api-Key <key>`` authentication for partner apps."""
from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions

from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.cors import key_origin_check
from lore_platform.tenancy.selectors import actor_for_api_key, api_key_authenticate

KEYWORD = "Api-Key"


class KeyPrincipal:
    """Stands in for ``request.user`` when a key acts without a user."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    pk = None
    id = None

    def __str__(self) -> str:
        return "api-key"


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Any) -> tuple[Any, Actor] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != KEYWORD.lower():
            return None
        if not raw.strip():
            raise exceptions.AuthenticationFailed("The Api-Key header has no key.")
        api_key = api_key_authenticate(raw)
        if api_key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        actor = actor_for_api_key(api_key)
        # A browser page of an origin the tenant does not allow: refused before anything is done.
        key_origin_check(request, actor)
        return (actor.user or KeyPrincipal(), actor)

    def authenticate_header(self, request: Any) -> str:
        # Makes DRF answer 401 (not 403) to unauthenticated calls.
        return KEYWORD
