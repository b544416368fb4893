"""K-1 on the entry form: a text field on classic and server books, the parse error inline with its position."""
from __future__ import annotations

import html as html_lib

import pytest

from tests.books.factories import make_book, make_entry
from tests.web.support import signed_in
from tests.web.test_editor_pages import LORE, field_error, form_fields, html

pytestmark = pytest.mark.django_db

BASE = {"title": "Varn", "content": LORE, "enabled": "on", "secondary_logic": "and_any", "role": "system"}


def test_the_form_saves_an_expression_and_shows_a_bad_one_inline_with_its_position(tenant_a):
    book = make_book(tenant_a, title="Keys", profile="classic")
    entry = make_entry(book, title="Varn", content=LORE, keys=["varn"])
    owner = signed_in(tenant_a.member)
    url = f"/books/{book.pk}/entries/{entry.pk}"
    owner.post(url, {**BASE, "key_expression": '(varn AND "río") OR delta, NOT sequía'})
    entry.refresh_from_db()
    assert entry.key_expression == '(varn AND "río") OR delta, NOT sequía'
    page = html(owner.get(url))
    assert "sequía" in html_lib.unescape(page)  # the form shows what is stored

    refused = owner.post(url, {**BASE, "key_expression": "varn AND (delta OR"})
    assert refused.status_code == 400
    error = html_lib.unescape(field_error(html(refused), "key_expression"))
    assert "K-1" in error and "position 18" in error
    entry.refresh_from_db()
    assert entry.key_expression == '(varn AND "río") OR delta, NOT sequía'


def test_only_keyword_books_show_the_field(tenant_a):
    owner = signed_in(tenant_a.member)
    for profile, shown in (("classic", True), ("server", True), ("sillytavern", False), ("smart", False)):
        book = make_book(tenant_a, title=f"B {profile}", profile=profile)
        entry = make_entry(book, title="Varn river", content=LORE)
        fields = form_fields(html(owner.get(f"/books/{book.pk}/entries/{entry.pk}")))
        assert ("key_expression" in fields) is shown, profile
