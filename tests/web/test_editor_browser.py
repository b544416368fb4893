"""The book editor in a real browser (issue 15, point 4): the indexing state refreshing by itself,
drag to reorder, the entry form with its inline errors, and axe-core on both pages."""
from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from books.models import Entry, IndexingState
from tests.books.factories import fill, make_book, make_entry
from tests.web.browser import axe_violations, shot
from tests.web.test_browser import browser  # noqa: F401  (the module's Chromium fixture)

pytestmark = pytest.mark.django_db(transaction=True)

LORE = "La ciudad fluvial de Varn comercia sal por hierro cada primavera."


def signed_in_page(browser: Any, base: str, user: Any, locale: str = "en-GB") -> Any:  # noqa: F811
    client = Client()
    client.force_login(user)
    context = browser.new_context(locale=locale, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(60_000)
    context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": base}])
    page = context.new_page()
    page.on("pageerror", lambda exc: pytest.fail(f"JavaScript error on {page.url}: {exc}"))
    return page


def test_indexing_state_updates_by_itself_until_done(browser, live_server, tenant_a):  # noqa: F811
    book = make_book(tenant_a, title="World", profile="smart")
    entry = make_entry(book, title="Varn", content=LORE, indexing_state=IndexingState.PENDING)
    page = signed_in_page(browser, live_server.url, tenant_a.member)
    page.goto(f"{live_server.url}/books/{book.pk}")
    state = page.locator(f'tr[data-entry="{entry.pk}"] [data-testid="entry-state"]')
    assert state.inner_text() == "Indexing for smart retrieval…"
    page.evaluate("() => { window.sameDocument = true; }")  # gone if the page reloaded
    Entry.objects.for_tenant(tenant_a.tenant).filter(pk=entry.pk).update(indexing_state=IndexingState.INDEXED)
    page.wait_for_function(
        f"""() => document.querySelector('tr[data-entry="{entry.pk}"] [data-testid="entry-state"]')
                  .innerText === 'Enabled'""", timeout=15_000)
    assert page.evaluate("() => window.sameDocument === true")  # htmx swapped the list, no reload
    page.wait_for_timeout(2_500)
    assert page.locator("#entries-form").get_attribute("hx-trigger") is None  # done: the poll stopped
    page.context.close()


def test_drag_reorder_entry_form_inline_errors_and_axe(browser, live_server, tenant_a):  # noqa: F811
    book = make_book(tenant_a, title="Mundo", profile="classic")
    for title in ("Uno", "Dos", "Tres"):
        make_entry(book, title=title, content=LORE, indexing_state=IndexingState.INDEXED)
    fill(book, 60, indexing_state=IndexingState.INDEXED)  # two pages
    page = signed_in_page(browser, live_server.url, tenant_a.member, locale="es-ES")
    page.goto(f"{live_server.url}/books/{book.pk}")
    assert not axe_violations(page), "editor"
    shot(page, "editor-classic")
    with page.expect_navigation():
        page.locator("tr[data-entry]").first.drag_to(page.locator("tr[data-entry]").nth(2))
    titles = page.locator('tr[data-entry] [data-testid="entry-link"]').all_inner_texts()
    assert titles[:3] == ["Dos", "Tres", "Uno"]
    order = list(Entry.objects.for_tenant(tenant_a.tenant).filter(book=book).order_by("position")
                 .values_list("title", flat=True)[:3])
    assert order == ["Dos", "Tres", "Uno"]
    # The row's title opens its form; a bad probability is refused next to the field, with its rule.
    page.get_by_role("link", name="Uno", exact=True).click()
    page.wait_for_url(re.compile(r"/entries/\d+$"))
    assert not axe_violations(page), "entry form"
    page.get_by_label("Probabilidad (%)").fill("150")
    page.get_by_role("button", name="Guardar entrada").click()
    error = page.locator("#id_probability-error")
    assert "S-6" in error.inner_text()
    assert not axe_violations(page), "entry form with errors"
    shot(page, "entry-form-error")
    page.get_by_label("Probabilidad (%)").fill("40")
    page.get_by_role("button", name="Guardar entrada").click()
    page.wait_for_url(re.compile(rf"/books/{book.pk}$"))
    assert Entry.objects.for_tenant(tenant_a.tenant).get(book=book, title="Uno").probability == 40
    page.context.close()
