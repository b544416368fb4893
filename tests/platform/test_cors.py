"""CORS for browser partners (issue 27, P-6): per-tenant origins, preflights without a key,
no credentials ever, the public library open to every origin."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from books.models import Book
from lore_platform.tenancy.models import Tenant
from lore_platform.tenancy.selectors import cors_origins_forget
from lore_platform.tenancy.services import tenant_cors_set

pytestmark = pytest.mark.django_db

PARTNER = "https://partner.example"
OTHER = "https://other.example"
EVIL = "https://evil.example"

ACAO = "Access-Control-Allow-Origin"
ACAC = "Access-Control-Allow-Credentials"


def _preflight(origin: str, path: str = "/api/v1/books", method: str = "POST",
               headers: str = "authorization, content-type") -> object:
    return APIClient().options(path, HTTP_ORIGIN=origin, HTTP_ACCESS_CONTROL_REQUEST_METHOD=method,
                               HTTP_ACCESS_CONTROL_REQUEST_HEADERS=headers)


@pytest.fixture(autouse=True)
def _fresh_origins_cache():
    cors_origins_forget()  # the list of every tenant's origins is cached across requests
    yield
    cors_origins_forget()


@pytest.fixture
def partner_tenant(tenant_a):
    tenant_cors_set(tenant=tenant_a.tenant, origins=[PARTNER])
    return tenant_a


def test_preflight_from_an_allowed_origin_is_answered_without_a_key(partner_tenant):
    response = _preflight(PARTNER)
    assert response.status_code == 200
    assert response[ACAO] == PARTNER
    assert "POST" in response["Access-Control-Allow-Methods"]
    allowed_headers = response["Access-Control-Allow-Headers"].lower()
    assert "authorization" in allowed_headers and "content-type" in allowed_headers
    assert not response.has_header(ACAC)
    assert "origin" in response["Vary"].lower()


def test_preflight_from_an_origin_no_tenant_allows_gets_no_allow_origin(partner_tenant):
    response = _preflight(EVIL)
    assert response.status_code == 200  # answered, never a 401; the browser then refuses the call
    assert not response.has_header(ACAO)


def test_call_with_a_key_from_an_allowed_origin_is_readable(partner_tenant):
    client = partner_tenant.admin_client
    response = client.post("/api/v1/books", {"title": "From the browser"}, format="json", HTTP_ORIGIN=PARTNER)
    assert response.status_code == 201
    assert response[ACAO] == PARTNER
    assert not response.has_header(ACAC)
    assert "x-request-id" in response["Access-Control-Expose-Headers"].lower()


def test_key_from_an_origin_its_tenant_does_not_allow_is_refused_and_writes_nothing(partner_tenant, tenant_b):
    # OTHER is allowed by tenant B, so its preflight passes: the call itself must be refused for A's key.
    tenant_cors_set(tenant=tenant_b.tenant, origins=[OTHER])
    assert _preflight(OTHER)[ACAO] == OTHER
    before = Book.objects.for_tenant(partner_tenant.tenant).count()
    response = partner_tenant.admin_client.post("/api/v1/books", {"title": "Smuggled"}, format="json",
                                                HTTP_ORIGIN=OTHER)
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "origin_not_allowed" and error["field"] == "Origin" and error["rule"] == "P-6"
    assert Book.objects.for_tenant(partner_tenant.tenant).count() == before
    # A GET too: the answer is refused, never handed over.
    read = partner_tenant.admin_client.get("/api/v1/books", HTTP_ORIGIN=EVIL)
    assert read.status_code == 403
    assert not read.has_header(ACAO)


def test_same_origin_calls_with_a_key_keep_working(tenant_a):
    # The docs page (/api/docs/) calls with a key from the server's own origin.
    response = tenant_a.admin_client.post("/api/v1/books", {"title": "Docs"}, format="json",
                                          HTTP_ORIGIN="http://testserver")
    assert response.status_code == 201
    assert not response.has_header(ACAO)


def test_server_to_server_calls_have_no_origin_and_are_unaffected(tenant_a):
    assert tenant_a.admin_client.get("/api/v1/books").status_code == 200


def test_a_signed_in_session_never_answers_another_origin(partner_tenant):
    client = APIClient()
    client.force_login(partner_tenant.admin)
    response = client.get("/api/v1/books", HTTP_ORIGIN=PARTNER)
    assert response.status_code == 200
    assert not response.has_header(ACAO)
    assert not response.has_header(ACAC)


def test_public_library_and_schema_reads_are_open_to_every_origin(anon_client, tenant_a):
    for path in ("/api/v1/library/books", "/api/v1/library/languages", "/api/schema/"):
        response = anon_client.get(path, HTTP_ORIGIN=EVIL)
        assert response.status_code == 200, path
        assert response[ACAO] == "*"
        assert not response.has_header(ACAC)
    preflight = _preflight(EVIL, path="/api/v1/library/books", method="GET", headers="accept")
    assert preflight.status_code == 200
    assert preflight[ACAO] == "*"
    # Copying into a library is a write with a key: not public.
    assert not _preflight(EVIL, path="/api/v1/library/copies", method="POST").has_header(ACAO)


def test_a_bad_key_error_is_readable_by_an_allowed_origin(partner_tenant, anon_client):
    response = anon_client.get("/api/v1/books", HTTP_ORIGIN=PARTNER, HTTP_AUTHORIZATION="Api-Key lw_deadbeef_nope")
    assert response.status_code == 401
    assert response[ACAO] == PARTNER


def test_removing_an_origin_takes_effect_on_the_next_call(partner_tenant):
    client = partner_tenant.admin_client
    assert client.get("/api/v1/books", HTTP_ORIGIN=PARTNER)[ACAO] == PARTNER
    assert client.put("/api/v1/tenant/cors", {"origins": []}, format="json").status_code == 200
    assert client.get("/api/v1/books", HTTP_ORIGIN=PARTNER).status_code == 403
    assert not _preflight(PARTNER).has_header(ACAO)


# --- managing the origins -----------------------------------------------------------


def test_admin_reads_and_replaces_the_origins_normalised(tenant_a):
    client = tenant_a.admin_client
    assert client.get("/api/v1/tenant/cors").json() == {"origins": []}
    response = client.put("/api/v1/tenant/cors", {"origins": [
        "HTTPS://Partner.Example:443", "http://localhost:8000/", "http://[::1]:5173", "https://partner.example",
    ]}, format="json")
    assert response.status_code == 200
    expected = ["https://partner.example", "http://localhost:8000", "http://[::1]:5173"]
    assert response.json() == {"origins": expected}
    assert client.get("/api/v1/tenant/cors").json() == {"origins": expected}
    assert Tenant.objects.get(pk=tenant_a.tenant.pk).cors_origins == expected


@pytest.mark.parametrize(
    "bad",
    ["*", "https://*.example.com", "partner.example", "ftp://partner.example", "https://partner.example/app",
     "https://partner.example?x=1", "https://user@partner.example", "https://partner.example:99999",
     "https://bad_host.example", "", 7],
)
def test_a_malformed_origin_is_422_naming_it_and_nothing_is_saved(tenant_a, bad):
    tenant_cors_set(tenant=tenant_a.tenant, origins=[PARTNER])
    response = tenant_a.admin_client.put("/api/v1/tenant/cors", {"origins": [OTHER, bad]}, format="json")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_origin"
    assert error["field"] == "origins[1]"
    assert error["rule"] == "P-6"
    assert Tenant.objects.get(pk=tenant_a.tenant.pk).cors_origins == [PARTNER]


def test_origins_must_be_a_list_of_at_most_50(tenant_a):
    client = tenant_a.admin_client
    for body in ({}, {"origins": "https://partner.example"}):
        response = client.put("/api/v1/tenant/cors", body, format="json")
        assert response.status_code in (400, 422)
        assert response.json()["error"]["field"] == "origins"
    many = [f"https://p{i}.example" for i in range(51)]
    response = client.put("/api/v1/tenant/cors", {"origins": many}, format="json")
    assert response.status_code == 422 and response.json()["error"]["field"] == "origins"


def test_only_admins_manage_origins(tenant_a):
    assert tenant_a.member_client.get("/api/v1/tenant/cors").status_code == 403
    response = tenant_a.member_client.put("/api/v1/tenant/cors", {"origins": [PARTNER]}, format="json")
    assert response.status_code == 403
    assert Tenant.objects.get(pk=tenant_a.tenant.pk).cors_origins == []


# --- the API keys page ------------------------------------------------------------------


def test_keys_page_sets_the_origins_the_api_then_allows(tenant_a):
    from tests.web.support import signed_in

    admin = signed_in(tenant_a.admin)
    page = admin.get("/keys")
    assert 'name="origins"' in page.content.decode()
    saved = admin.post("/keys/origins", {"origins": f"{PARTNER}\n\n http://localhost:8000 \n"})
    assert saved.status_code == 302
    assert tenant_a.admin_client.get("/api/v1/tenant/cors").json() == {"origins": [PARTNER, "http://localhost:8000"]}
    assert PARTNER in admin.get("/keys").content.decode()
    assert tenant_a.admin_client.get("/api/v1/books", HTTP_ORIGIN="http://localhost:8000")[ACAO] == \
        "http://localhost:8000"


def test_keys_page_refuses_a_malformed_origin_with_422_and_keeps_the_list(tenant_a):
    from tests.web.support import signed_in

    tenant_cors_set(tenant=tenant_a.tenant, origins=[PARTNER])
    admin = signed_in(tenant_a.admin)
    refused = admin.post("/keys/origins", {"origins": f"{OTHER}\nhttps://*.example.com"})
    assert refused.status_code == 422
    body = refused.content.decode()
    assert "Wildcards are not allowed" in body and "P-6" in body
    assert "https://*.example.com" in body  # the typed text is kept to be fixed
    assert Tenant.objects.get(pk=tenant_a.tenant.pk).cors_origins == [PARTNER]


def test_members_may_not_set_origins_on_the_page(tenant_a):
    from tests.web.support import signed_in

    assert signed_in(tenant_a.member).post("/keys/origins", {"origins": PARTNER}).status_code == 403
    assert Tenant.objects.get(pk=tenant_a.tenant.pk).cors_origins == []


def test_an_unknown_api_url_from_an_allowed_origin_is_a_readable_json_404(partner_tenant, anon_client):
    # Django's own 404 becomes the JSON error shape one layer out; the CORS headers survive that.
    response = anon_client.get("/api/v1/no-such-thing", HTTP_ORIGIN=PARTNER)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert response[ACAO] == PARTNER


def test_an_unknown_field_is_refused_naming_it_and_nothing_is_saved(tenant_a):
    response = tenant_a.admin_client.put("/api/v1/tenant/cors", {"origins": [PARTNER], "origin": OTHER},
                                         format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "origin"
    assert Tenant.objects.get(pk=tenant_a.tenant.pk).cors_origins == []


def test_the_schema_states_the_body_the_server_reads():
    from drf_spectacular.generators import SchemaGenerator

    put = SchemaGenerator().get_schema(request=None, public=True)["paths"]["/api/v1/tenant/cors"]["put"]
    assert put["requestBody"]["required"] is True
    body = put["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["origins"] and body["additionalProperties"] is False
    assert body["properties"]["origins"]["maxItems"] == 50
    assert "422" in put["responses"]


def test_the_pages_never_answer_another_origin(partner_tenant, anon_client):
    for path in ("/library", "/login", "/api/docs/"):
        response = anon_client.get(path, HTTP_ORIGIN=PARTNER)
        assert not response.has_header(ACAO), path
    assert not _preflight(PARTNER, path="/login").has_header(ACAO)
