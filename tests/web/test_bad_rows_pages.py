"""One row stored before the text check (a lone surrogate in a JSON column) no longer fails a page (issue 26).

Pages render through ``web.templating.RepairingTemplates``: the row is shown with U+FFFD in place of the
surrogate, the rest of the page as it was.
"""
from __future__ import annotations

import pytest
from django.conf import settings

from books.models import Entry
from tests.books.factories import make_book, make_entry
from tests.web.support import signed_in

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(settings.DATABASE_IS_POSTGRES, reason="PostgreSQL never stores a lone surrogate"),
]


def test_the_book_page_and_the_entry_page_show_a_bad_row_repaired(tenant_a):
    book = make_book(tenant_a, profile="smart")
    make_entry(book, title="Good harbour")
    bad = make_entry(book, title="Bad harbour")
    Entry.objects.for_tenant(tenant_a.tenant).filter(pk=bad.pk).update(
        keys=["salt\udc00road"], unresolved_channels=["#old\udc00"], extra={"\udc00": 1}
    )
    owner = signed_in(tenant_a.member)
    listing = owner.get(f"/books/{book.pk}")
    assert listing.status_code == 200
    page = listing.content.decode("utf-8")
    assert "Good harbour" in page and "Bad harbour" in page
    entry = owner.get(f"/books/{book.pk}/entries/{bad.pk}")
    assert entry.status_code == 200 and "salt\ufffdroad" in entry.content.decode("utf-8")
    exported = owner.get(f"/books/{book.pk}/export", {"format": "sillytavern"})
    assert exported.status_code == 200 and "salt\ufffdroad" in exported.content.decode("utf-8")
