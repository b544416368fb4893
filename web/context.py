"""Template context for every page: the signed-in actor and their workspaces (tenant switcher)."""
from __future__ import annotations

from functools import cached_property
from typing import Any

from django.http import HttpRequest

from web.session import user_memberships, web_actor


class WebContext:
    """Read only when a template asks (the API's pages never do)."""

    def __init__(self, request: HttpRequest) -> None:
        self.request = request

    @cached_property
    def actor(self) -> Any:
        return web_actor(self.request)

    @cached_property
    def memberships(self) -> Any:
        return user_memberships(self.request.user)


def web(request: HttpRequest) -> dict[str, Any]:
    return {"web": WebContext(request)}
