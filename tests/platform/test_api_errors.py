"""Every failure under /api/ and /healthz answers the one JSON error shape, whatever DEBUG says."""
from __future__ import annotations

import json
import logging
import time

import pytest
from django.db import OperationalError

from lore_platform.api.parsers import JSON_BODY_BYTES, JSON_MAX_DEPTH
from lore_platform.tenancy.api.views import TenantView
from lore_platform.tenancy.authentication import ApiKeyAuthentication
from tests.books.factories import make_book, make_entry

pytestmark = pytest.mark.django_db


@pytest.fixture(params=[False, True], ids=["debug-off", "debug-on"])
def debug(request, settings):
    settings.DEBUG = request.param
    return request.param


def _error(response, status):
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) == {"error"} and {"code", "message"} <= set(body["error"]), body
    return body["error"]


def _post_raw(client, path, data: bytes, content_type="application/json"):
    return client.generic("POST", path, data, content_type=content_type)


def test_unknown_urls_are_json_404(tenant_a, debug):
    for path in ("/api/v1/nope", "/api/v1/books/1/nothing-here", "/api/nothing", "/healthz/extra"):
        assert _error(tenant_a.admin_client.get(path), 404)["code"] == "not_found", path


def test_wrong_method_is_json_405_with_allow(tenant_a, client, debug):
    error = _error(tenant_a.admin_client.put("/api/v1/tenant", {}, format="json"), 405)
    assert error["code"] == "method_not_allowed"
    response = client.post("/healthz")
    assert _error(response, 405)["code"] == "method_not_allowed"
    assert "GET" in response["Allow"]


def test_unsupported_media_type_is_415(tenant_a, debug):
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        response = _post_raw(tenant_a.member_client, "/api/v1/books", b"title=x", content_type)
        assert _error(response, 415)["code"] == "unsupported_media_type", content_type


def test_a_body_over_the_limit_is_413_naming_it(tenant_a, debug):
    body = b'{"title": "' + b"x" * JSON_BODY_BYTES + b'"}'
    error = _error(_post_raw(tenant_a.member_client, "/api/v1/books", body), 413)
    assert error["details"]["limit"] == JSON_BODY_BYTES and error["field"] == "body"
    assert f"{JSON_BODY_BYTES:,}" in error["message"]


def test_malformed_json_is_400(tenant_a, debug):
    for body in (b'{"title": ', b"\xff\xfe", b'{"title": NaN}'):
        assert _error(_post_raw(tenant_a.member_client, "/api/v1/books", body), 400)["code"] == "parse_error", body


@pytest.mark.parametrize("depth", [JSON_MAX_DEPTH + 1, 10_000])
def test_too_deep_json_is_400_naming_the_limit(tenant_a, depth):
    body = b'{"title": "Deep", "extra": ' + b"[" * depth + b"]" * depth + b"}"
    error = _error(_post_raw(tenant_a.member_client, "/api/v1/books", body), 400)
    assert error["code"] == "too_deep" and error["details"]["limit"] == JSON_MAX_DEPTH


def test_nesting_at_the_limit_is_accepted(tenant_a):
    # The body object is level 1 and ``extra`` level 2: 30 more lists reach the limit exactly.
    inner = JSON_MAX_DEPTH - 2
    body = b'{"title": "Deep", "extra": {"x": ' + b"[" * inner + b"]" * inner + b"}}"
    assert _post_raw(tenant_a.member_client, "/api/v1/books", body).status_code == 201


@pytest.mark.parametrize(
    "value, ok", [(2**63 - 1, True), (2**63, False), (-(2**63), True), (-(2**63) - 1, False), (10**400, False)]
)
def test_integers_beyond_64_bits_are_refused_naming_the_field(tenant_a, value, ok):
    body = f'{{"title": "Numbers", "extra": {{"n": [{value}]}}}}'.encode()
    response = _post_raw(tenant_a.member_client, "/api/v1/books", body)
    if ok:
        assert response.status_code == 201
        assert tenant_a.member_client.get("/api/v1/books").status_code == 200  # and it reads back
    else:
        error = _error(response, 400)
        assert error["code"] in {"out_of_range", "parse_error"}
        if error["code"] == "out_of_range":
            assert error["field"] == "extra.n[0]"


def test_infinity_is_refused(tenant_a):
    error = _error(_post_raw(tenant_a.member_client, "/api/v1/books", b'{"title": "F", "extra": {"f": 1e999}}'), 400)
    assert error["field"] == "extra.f"


def test_a_message_role_that_is_an_object_is_400(tenant_a):
    book = make_book(tenant_a)
    response = tenant_a.member_client.post(
        "/api/v1/context", {"book_ids": [book.pk], "messages": [{"role": {}, "text": "hi"}]}, format="json"
    )
    assert _error(response, 400)["field"] == "messages.0.role"


def test_an_unexpected_exception_is_500_with_a_request_id_that_is_logged(tenant_a, monkeypatch, caplog, debug):
    def boom(self, request):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(TenantView, "get", boom)
    with caplog.at_level(logging.ERROR, logger="lore_platform.api"):
        response = tenant_a.admin_client.get("/api/v1/tenant")
    error = _error(response, 500)
    request_id = error["details"]["request_id"]
    assert request_id and response["X-Request-Id"] == request_id
    assert "secret internals" not in response.content.decode() and "Traceback" not in response.content.decode()
    logged = [r for r in caplog.records if request_id in r.getMessage()]
    assert logged and logged[0].exc_info is not None


def test_database_unreachable_is_a_fast_503(tenant_a, monkeypatch, debug):
    def down(self, request):
        raise OperationalError("connection to server at 127.0.0.1, port 5432 failed: Connection refused")

    monkeypatch.setattr(ApiKeyAuthentication, "authenticate", down)
    started = time.perf_counter()
    response = tenant_a.admin_client.get("/api/v1/books")
    assert time.perf_counter() - started < 1.0
    error = _error(response, 503)
    assert error["code"] == "database_unavailable" and error["field"] == "database"
    assert "5432" not in json.dumps(error)


def test_every_answer_carries_a_request_id(tenant_a, client):
    assert client.get("/healthz")["X-Request-Id"]
    assert tenant_a.admin_client.get("/api/v1/tenant")["X-Request-Id"]


def test_docs_pages_load_their_assets_from_this_server(client, settings):
    settings.DEBUG = True
    page = client.get("/api/docs/").content.decode()
    assert "cdn" not in page.lower() and "/static/drf_spectacular_sidecar/swagger-ui-dist/" in page
    assert "/static/drf_spectacular_sidecar/redoc/" in client.get("/api/redoc/").content.decode()


def test_a_hundred_thousand_tags_are_refused_in_under_a_second(tenant_a):
    book = make_book(tenant_a, owner="member")
    tags = [f"tag{i}" for i in range(100_000)]
    started = time.perf_counter()
    response = tenant_a.member_client.patch(f"/api/v1/books/{book.pk}", {"tags": tags}, format="json")
    assert time.perf_counter() - started < 1.0
    error = _error(response, 422)
    assert error["field"] == "tags" and error["details"]["actual"] == 100_000


def test_a_reorder_names_a_bounded_number_of_ids(tenant_a):
    from books.limits import REORDER_IDS

    book = make_book(tenant_a, owner="member")
    ids = list(range(1, REORDER_IDS.value + 2))
    response = tenant_a.member_client.post(f"/api/v1/books/{book.pk}/entries/reorder", {"entry_ids": ids}, format="json")
    error = _error(response, 422)
    assert error["field"] == "entry_ids" and error["details"]["limit"] == REORDER_IDS.value


def test_page_size_is_checked(tenant_a):
    assert _error(tenant_a.admin_client.get("/api/v1/books?page_size=abc"), 400)["field"] == "page_size"
    assert _error(tenant_a.admin_client.get("/api/v1/books?page_size=0"), 400)["field"] == "page_size"
    assert tenant_a.admin_client.get("/api/v1/books?page_size=100000").status_code == 200


def test_an_entry_deleted_under_an_edit_is_404(tenant_a, monkeypatch):
    from books.api import views as book_views
    from books.models import Entry

    book = make_book(tenant_a, owner="member")
    entry = make_entry(book, title="Gone", content="An entry deleted by another request meanwhile.")
    real = book_views.access_entry

    def found_then_deleted(*args, **kwargs):
        found = real(*args, **kwargs)
        Entry.objects.for_tenant(tenant_a.tenant).filter(pk=found.pk).delete()
        return found

    monkeypatch.setattr(book_views, "access_entry", found_then_deleted)
    response = tenant_a.member_client.patch(f"/api/v1/books/{book.pk}/entries/{entry.pk}", {"content": "x" * 30},
                                            format="json")
    assert _error(response, 404)["code"] == "not_found"
