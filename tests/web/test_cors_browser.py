"""CORS in a real browser (issue 27.1): a partner's page on another origin calls the API with a key.

Chromium enforces what the headers say: from an origin the key's tenant allows the call works, from
one it does not the browser refuses it (and, the preflight refused, never sends the write); the
public library reads anonymously from anywhere; cookies are never allowed cross-origin.
"""
from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from books.models import Book
from lore_platform.tenancy.selectors import cors_origins_forget
from lore_platform.tenancy.services import tenant_cors_set
from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, CspWatchedBrowser

pytestmark = pytest.mark.django_db(transaction=True)

PARTNER_PAGE = "<!doctype html><html lang=en><head><title>Partner app</title></head><body>partner</body></html>"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"browser tests need {CHROMIUM}: run scripts/setup.sh (as root)")
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield CspWatchedBrowser(launched)
            launched.close()
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@pytest.fixture
def partner_sites(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two tiny static sites (Python's http.server) on their own ports: two origins, neither the API's."""
    (tmp_path / "index.html").write_text(PARTNER_PAGE)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(tmp_path), **kwargs)

        def log_message(self, *args: Any) -> None:
            pass

    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield tuple(f"http://127.0.0.1:{server.server_address[1]}" for server in servers)  # type: ignore[misc]
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
        cors_origins_forget()


FETCH = """async ([url, method, key, body, credentials]) => {
  const headers = {};
  if (key) headers['Authorization'] = 'Api-Key ' + key;
  if (body) headers['Content-Type'] = 'application/json';
  try {
    const r = await fetch(url, {method, headers, body: body ? JSON.stringify(body) : undefined,
                                credentials: credentials || 'omit'});
    return {ok: true, status: r.status, body: await r.text()};
  } catch (e) {
    return {ok: false, error: String(e)};
  }
}"""


def _call(page: Any, url: str, method: str = "GET", key: str | None = None, body: dict | None = None,
          credentials: str | None = None) -> dict[str, Any]:
    return page.evaluate(FETCH, [url, method, key, body, credentials])


def test_a_partner_page_calls_the_api_from_an_allowed_origin_and_is_refused_from_another(
    browser, live_server, partner_sites, tenant_a
):
    allowed, stranger = partner_sites
    api = live_server.url
    cors_origins_forget()
    tenant_cors_set(tenant=tenant_a.tenant, origins=[allowed])
    key = tenant_a.admin_key
    context = browser.new_context()
    try:
        page = context.new_page()
        blocked: list[str] = []
        page.on("console", lambda message: blocked.append(message.text) if "CORS" in message.text else None)

        # From the allowed origin: a read and a write (both preflighted: the key is a header).
        page.goto(allowed + "/index.html")
        read = _call(page, f"{api}/api/v1/books", key=key)
        assert read["ok"] and read["status"] == 200, read
        wrote = _call(page, f"{api}/api/v1/books", "POST", key=key, body={"title": "From the partner page"})
        assert wrote["ok"] and wrote["status"] == 201, wrote
        assert Book.objects.for_tenant(tenant_a.tenant).filter(title="From the partner page").exists()
        # Cookies are never allowed cross-origin: asking to send them makes the browser refuse the answer.
        with_cookies = _call(page, f"{api}/api/v1/books", key=key, credentials="include")
        assert not with_cookies["ok"], with_cookies

        # From an origin the tenant does not allow: the browser refuses, and the write is never sent.
        page.goto(stranger + "/index.html")
        refused_read = _call(page, f"{api}/api/v1/books", key=key)
        assert not refused_read["ok"] and "Failed to fetch" in refused_read["error"], refused_read
        refused_write = _call(page, f"{api}/api/v1/books", "POST", key=key, body={"title": "Smuggled"})
        assert not refused_write["ok"], refused_write
        assert not Book.objects.for_tenant(tenant_a.tenant).filter(title="Smuggled").exists()
        assert any("blocked by CORS policy" in text for text in blocked), blocked

        # The public library is open to every origin, with no key.
        library = _call(page, f"{api}/api/v1/library/books")
        assert library["ok"] and library["status"] == 200, library
    finally:
        context.close()
