"""Permission matrix for every sharing and library endpoint (P-3, W-9, STYLE 9).

Callers: anonymous, another tenant's admin, a member of the book's tenant who
does not own it, the owner with a read-only key, and the owner. Every denial
is checked to change nothing, in both tenants.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from lore_platform.tenancy.services import api_key_create
from sharing.services import book_visibility_set
from tests.books.factories import fill, make_book
from tests.sharing.helpers import admin_actor, world

pytestmark = pytest.mark.django_db

CALLERS = ("anonymous", "other_tenant", "member", "owner_read_key", "owner")


@dataclass(frozen=True)
class Case:
    name: str
    state: str  # the book's visibility before the call; "was_unlisted" = private with a link that once worked
    method: str
    path: str
    body: dict[str, Any] | None
    expected: tuple[int, int, int, int, int]  # in CALLERS order

    @property
    def writes(self) -> bool:
        return self.method != "get"


ALL_200 = (200, 200, 200, 200, 200)
ALL_404 = (404, 404, 404, 404, 404)
CASES = [
    Case("library list", "public", "get", "/api/v1/library/books", None, ALL_200),
    Case("library search", "public", "get", "/api/v1/library/books?q=coast", None, ALL_200),
    Case("library languages", "public", "get", "/api/v1/library/languages", None, ALL_200),
    Case("public book page", "public", "get", "/api/v1/library/books/{book}", None, ALL_200),
    Case("public book entries", "public", "get", "/api/v1/library/books/{book}/entries", None, ALL_200),
    Case("unlisted book page by id", "unlisted", "get", "/api/v1/library/books/{book}", None, ALL_404),
    Case("private book page", "private", "get", "/api/v1/library/books/{book}", None, ALL_404),
    Case("private book entries", "private", "get", "/api/v1/library/books/{book}/entries", None, ALL_404),
    Case("unlisted book by link", "unlisted", "get", "/api/v1/library/links/{token}", None, ALL_200),
    Case("unlisted entries by link", "unlisted", "get", "/api/v1/library/links/{token}/entries", None, ALL_200),
    Case("link of a book made private", "was_unlisted", "get", "/api/v1/library/links/{token}", None, ALL_404),
    Case("sharing state, private", "private", "get", "/api/v1/books/{book}/sharing", None, (401, 404, 404, 200, 200)),
    Case("sharing state, public", "public", "get", "/api/v1/books/{book}/sharing", None, (401, 404, 200, 200, 200)),
    Case(
        "publish", "private", "post", "/api/v1/books/{book}/visibility", {"visibility": "public"},
        (401, 404, 404, 403, 200),
    ),
    Case(
        "unlist", "private", "post", "/api/v1/books/{book}/visibility", {"visibility": "unlisted"},
        (401, 404, 404, 403, 200),
    ),
    Case(
        "make private again", "public", "post", "/api/v1/books/{book}/visibility", {"visibility": "private"},
        (401, 404, 403, 403, 200),
    ),
    Case("rotate link, private", "private", "post", "/api/v1/books/{book}/link/rotate", None, (401, 404, 404, 403, 200)),
    Case("rotate link, unlisted", "unlisted", "post", "/api/v1/books/{book}/link/rotate", None, (401, 404, 403, 403, 200)),
    Case("copy a public book", "public", "post", "/api/v1/library/copies", {"book_id": "{book}"}, (401, 201, 201, 403, 201)),
    Case("copy a private book", "private", "post", "/api/v1/library/copies", {"book_id": "{book}"}, (401, 404, 404, 403, 201)),
    Case(
        "copy an unlisted book by id", "unlisted", "post", "/api/v1/library/copies", {"book_id": "{book}"},
        (401, 404, 201, 403, 201),
    ),
    Case(
        "copy an unlisted book by link", "unlisted", "post", "/api/v1/library/copies", {"link_token": "{token}"},
        (401, 201, 201, 403, 201),
    ),
]


@pytest.fixture
def clients(tenant_a, tenant_b, anon_client) -> dict[str, Any]:
    owner_read = api_key_create(tenant=tenant_a.tenant, name="owner reader", scopes=["read"], user=tenant_a.admin)
    return {
        "anonymous": anon_client,
        "other_tenant": tenant_b.admin_client,
        "member": tenant_a.member_client,
        "owner_read_key": tenant_a.client(owner_read.secret),
        "owner": tenant_a.admin_client,
    }


def _book(setup: Any, state: str) -> tuple[Any, str]:
    """A book owned by the tenant's admin (so the member is a non-owner) with 10 entries."""
    book = make_book(setup, owner="admin", title="The Salt Coast")
    fill(book, 10)
    owner = admin_actor(setup)
    token = "no-such-token"
    if state in ("public", "unlisted", "was_unlisted"):
        share = book_visibility_set(actor=owner, book=book, visibility="unlisted" if state != "public" else "public")
        token = share.link_token
    if state == "was_unlisted":
        book_visibility_set(actor=owner, book=book, visibility="private")
    return book, token


def _fill(value: Any, book: Any, token: str) -> Any:
    if isinstance(value, str):
        text = value.replace("{token}", token)
        return book.pk if text == "{book}" else text.replace("{book}", str(book.pk))
    if isinstance(value, dict):
        return {k: _fill(v, book, token) for k, v in value.items()}
    return value


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_permission_matrix(case: Case, caller: str, clients, tenant_a, tenant_b):
    book, token = _book(tenant_a, case.state)
    path = _fill(case.path, book, token)
    expected = case.expected[CALLERS.index(caller)]
    before = world(tenant_a, tenant_b)
    client = clients[caller]
    if case.writes:
        response = client.post(path, _fill(case.body, book, token), format="json")
    else:
        response = client.get(path)
    assert response.status_code == expected, (case.name, caller, response.content)
    if expected >= 400:
        assert set(response.json()) == {"error"}
        assert world(tenant_a, tenant_b) == before, f"{case.name}: a denial changed something"
    elif not case.writes:
        assert world(tenant_a, tenant_b) == before, f"{case.name}: a read changed something"


def test_private_sharing_details_never_leak_to_members(tenant_a):
    book, _ = _book(tenant_a, "public")
    body = tenant_a.member_client.get(f"/api/v1/books/{book.pk}/sharing").json()
    assert body["link"] is None and body["can_manage"] is False


def test_a_bad_key_is_refused_even_on_public_pages(tenant_a, anon_client):
    book, _ = _book(tenant_a, "public")
    anon_client.credentials(HTTP_AUTHORIZATION="Api-Key lw_nope_nope")
    response = anon_client.get(f"/api/v1/library/books/{book.pk}")
    assert response.status_code == 401 and response.json()["error"]["code"] == "authentication_failed"


def test_a_key_for_no_user_cannot_own_a_copy(tenant_a, tenant_b):
    book, _ = _book(tenant_a, "public")
    keyless = api_key_create(tenant=tenant_b.tenant, name="bot", scopes=["read", "write"], user=None)
    before = world(tenant_a, tenant_b)
    response = tenant_b.client(keyless.secret).post("/api/v1/library/copies", {"book_id": book.pk}, format="json")
    assert response.status_code == 403
    assert world(tenant_a, tenant_b) == before
