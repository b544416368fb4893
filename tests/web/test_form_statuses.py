"""A page that shows its form again because the input was refused answers 4xx, not 200 (issue 26, point 7).

A form's own errors are a 422; a service's refusal answers the status the API gives it (409 for a name
that exists, 413 for a file too large …). The refusal is still said on the form.
"""
from __future__ import annotations

import io
import json

import pytest
from django.test import Client

from books.models import Book, Entry
from lore_platform.tenancy.models import ApiKey
from tests.books.factories import make_book
from tests.web.support import PASSWORD, signed_in, with_password, world_info

pytestmark = pytest.mark.django_db


def upload(data: bytes, name: str = "varn.json") -> io.BytesIO:
    f = io.BytesIO(data)
    f.name = name
    return f


def _import(client, data: bytes, name: str = "varn.json"):
    return client.post("/books", {"action": "import", "profile": "smart", "language": "en", "file": upload(data, name)})


def test_page_import_refusals_are_4xx_and_say_why(tenant_a):
    owner = signed_in(tenant_a.member)
    assert _import(owner, world_info()).status_code == 302
    again = _import(owner, world_info())
    assert again.status_code == 409 and "I-2" in again.content.decode()  # the name exists (I-2)
    nul = json.dumps({"entries": {"0": {"uid": 0, "key": ["a"], "content": "lore \u0000 here"}}}).encode()
    refused = _import(owner, nul, "nul.json")
    assert refused.status_code == 400 and "I-1" in refused.content.decode()
    not_json = _import(owner, b"not a lore file at all", "notes.json")
    assert 400 <= not_json.status_code < 500
    no_file = owner.post("/books", {"action": "import", "profile": "smart", "language": "en"})
    assert no_file.status_code == 422
    assert Book.objects.for_tenant(tenant_a.tenant).count() == 1


def test_a_book_form_refused_is_422(tenant_a):
    owner = signed_in(tenant_a.member)
    refused = owner.post("/books", {"action": "create", "title": "", "profile": "smart", "language": "en"})
    assert refused.status_code == 422
    assert owner.get("/books").status_code == 200
    assert not Book.objects.for_tenant(tenant_a.tenant).exists()


def test_an_entry_form_with_a_nul_is_refused_and_nothing_stored(tenant_a):
    book = make_book(tenant_a, profile="smart")
    owner = signed_in(tenant_a.member)
    refused = owner.post(f"/books/{book.pk}/entries", {"title": "Va\x00rn", "content": "x" * 40})
    assert refused.status_code in (400, 422)
    assert not Entry.objects.for_tenant(tenant_a.tenant).exists()


def test_sign_in_sign_up_and_key_forms_refused_are_422(tenant_a):
    with_password(tenant_a.admin)
    bad = Client().post("/login", {"username": tenant_a.admin.email, "password": "wrong"})
    assert bad.status_code == 422 and "/logout" not in bad.content.decode()
    # An address with an account is no refusal: the page says the same as for a new one (issue 26: no
    # enumeration), and its owner is mailed.
    taken = Client().post("/signup", {"tenant": "Delta", "email": tenant_a.admin.email, "password": PASSWORD})
    assert taken.status_code == 200 and "Check your email" in taken.content.decode()
    short = Client().post("/signup", {"tenant": "Delta", "email": "new@delta.test", "password": "x"})
    assert short.status_code == 422
    admin = signed_in(tenant_a.admin)
    keys_before = ApiKey.objects.for_tenant(tenant_a.tenant).count()
    assert admin.post("/keys", {"name": ""}).status_code == 422
    assert ApiKey.objects.for_tenant(tenant_a.tenant).count() == keys_before
    assert admin.post("/keys", {"name": "partner", "write": "on"}).status_code == 200  # issued: shown once
