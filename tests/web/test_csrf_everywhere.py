"""CSRF by construction: Django's middleware guards every page route, and no page opts out.

The URLconf is walked rather than listed by hand, so a new page (or a ``csrf_exempt`` on an old one,
``/signup`` say) is checked the day it is written. The API is left out: its callers authenticate with a
key in a header, which a browser never sends on its own (session-authenticated API calls are CSRF-checked
by DRF, tested in tests/platform).
"""
from __future__ import annotations

import re
from collections.abc import Iterator

from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.web.support import signed_in

# Routes that are not pages: the API (key auth), the OpenAPI documents, static files, and the health
# probe (exempt on purpose: a probe carries no token and answers GET/HEAD only).
NOT_PAGES = re.compile(r"^(api/|static/|healthz$)")
_CONVERTER = re.compile(r"<(?:(\w+):)?\w+>")


def _routes(patterns: list[URLPattern | URLResolver], prefix: str = "") -> Iterator[str]:
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, route)
        else:
            yield route


def _concrete(route: str) -> str | None:
    if route.startswith("^") or "(?P" in route:  # a regex route (Django's admin internals): not ours
        return None
    return "/" + _CONVERTER.sub(lambda m: "999999" if m.group(1) == "int" else "x", route)


def page_routes() -> list[str]:
    urls = {_concrete(route) for route in _routes(get_resolver().url_patterns) if not NOT_PAGES.match(route)}
    return sorted(url for url in urls if url)


def test_the_walk_finds_the_pages() -> None:
    routes = page_routes()
    # The forms people use most are among them (a walk that found nothing would prove nothing).
    for page in ("/signup", "/login", "/keys", "/books/999999/entries", "/jobs/split", "/i18n/setlang/"):
        assert page in routes, page
    assert len(routes) >= 50


def test_every_page_refuses_a_post_without_its_token(tenant_a) -> None:
    session = signed_in(tenant_a.admin, csrf=True)
    anonymous = Client(enforce_csrf_checks=True)
    unguarded = [
        (who, url, response.status_code)
        for url in page_routes()
        for who, client in (("signed in", session), ("anonymous", anonymous))
        if (response := client.post(url, {"title": "x", "email": "x@example.test", "password1": "x"})).status_code
        != 403
    ]
    assert unguarded == []
