"""Delete → trash → restore on the pages in a real browser (issue 28, point 1), with the settings page's
tag suggestions script running under the Content-Security-Policy (the CSP watcher fails on any violation)."""
from __future__ import annotations

import pytest

from books.models import Book
from tests.books.factories import fill, make_book
from tests.web.browser import axe_violations, shot
from tests.web.test_browser import browser  # noqa: F401  (the module's Chromium fixture)
from tests.web.test_editor_browser import signed_in_page

pytestmark = pytest.mark.django_db(transaction=True)


def test_settings_delete_trash_restore(browser, live_server, tenant_a):  # noqa: F811
    book = make_book(tenant_a, title="dal_main_11.3.3", profile="classic", tags=["anime"])
    fill(book, 3)
    page = signed_in_page(browser, live_server.url, tenant_a.member)
    page.goto(f"{live_server.url}/books/{book.pk}")
    page.get_by_test_id("book-settings-link").click()
    page.wait_for_url(f"**/books/{book.pk}/settings")
    assert not axe_violations(page), "settings"
    page.get_by_label("Title").fill("Date A Live")
    tags = page.get_by_label("Tags (separated by commas)")
    tags.fill("anime, ")
    tags.type("sp")  # the script rebuilds suggestions for the tag being typed
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(f"**/books/{book.pk}/settings")
    assert "Book settings saved." in page.inner_text("main")
    shot(page, "book-settings")

    page.get_by_test_id("book-delete").click()
    page.wait_for_url(f"**/books/{book.pk}/delete")
    assert "30 days" in page.inner_text("main")
    assert not axe_violations(page), "delete"
    page.get_by_test_id("confirm-delete").click()
    page.wait_for_url("**/books")
    assert "is in the trash" in page.inner_text("main")
    assert page.locator("tbody a", has_text="Date A Live").count() == 0

    page.get_by_test_id("trash-link").click()
    page.wait_for_url("**/books/trash")
    assert not axe_violations(page), "trash"
    row = page.get_by_test_id("trashed-book")
    assert "Date A Live" in row.inner_text()
    shot(page, "book-trash")
    row.get_by_role("button", name="Restore Date A Live").click()
    page.wait_for_url(f"**/books/{book.pk}")
    assert "is restored" in page.inner_text("main")
    restored = Book.objects.for_tenant(tenant_a.tenant).get(pk=book.pk)
    assert (restored.title, restored.tags) == ("Date A Live", ["anime", "sp"])
    page.context.close()
