"""Books through the editor API, and the schema documenting every endpoint."""
from __future__ import annotations

import pytest

from books.lineages import lineage_get_or_create
from books.models import Book, Profile, Scope
from tests.books.factories import make_book, make_entry, version

pytestmark = pytest.mark.django_db


def test_create_read_update_delete(tenant_a):
    client = tenant_a.member_client
    created = client.post(
        "/api/v1/books",
        {"title": "Varn", "description": "River city.", "tags": ["city"], "profile": "smart",
         "extra": {"scan_depth_st": 4}},
        format="json",
    )
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["title"], body["profile"], body["scope"], body["owner"], body["version"]) == (
        "Varn", "smart", "personal", tenant_a.member.pk, 1
    )
    assert (body["entry_count"], body["can_edit"], body["visibility"], body["extra"]) == (
        0, True, "private", {"scan_depth_st": 4}
    )
    book_id = body["id"]

    shown = client.get(f"/api/v1/books/{book_id}")
    assert shown.status_code == 200 and shown.json()["title"] == "Varn"

    patched = client.patch(f"/api/v1/books/{book_id}", {"title": "Varn of the Delta", "tags": []}, format="json")
    assert patched.status_code == 200
    assert (patched.json()["title"], patched.json()["tags"], patched.json()["version"]) == ("Varn of the Delta", [], 2)

    assert client.delete(f"/api/v1/books/{book_id}").status_code == 204
    assert client.get(f"/api/v1/books/{book_id}").status_code == 404
    assert not Book.objects.for_tenant(tenant_a.tenant).exists()


def test_form_encoded_writes_are_refused(tenant_a):
    book = make_book(tenant_a, recursive=True)
    response = tenant_a.member_client.patch(f"/api/v1/books/{book.pk}", {"title": "x"})  # multipart
    assert response.status_code == 415
    book.refresh_from_db()
    assert (book.title, book.recursive, book.version) == ("A book", True, 1)


def test_profile_defaults_to_the_tenants(make_tenant):
    smart_tenant = make_tenant("Smarty", profile="smart")
    response = smart_tenant.member_client.post("/api/v1/books", {"title": "World"}, format="json")
    assert response.json()["profile"] == "smart"


def test_profile_scope_and_visibility_are_not_editable(tenant_a):
    book = make_book(tenant_a)
    response = tenant_a.member_client.patch(
        f"/api/v1/books/{book.pk}", {"profile": "smart", "scope": "server", "visibility": "public"}, format="json"
    )
    assert response.status_code == 200  # unknown-to-update fields are ignored by the input serializer
    book.refresh_from_db()
    assert (book.profile, book.scope, book.visibility, book.version) == ("classic", "personal", "private", 1)


def test_list_shows_own_and_tenant_books_with_filters(tenant_a, tenant_b):
    mine = make_book(tenant_a, title="Mine")
    make_entry(mine)
    make_entry(mine)
    server = make_book(tenant_a, owner=None, profile=Profile.SERVER, title="Factions")
    lineage = lineage_get_or_create(tenant=tenant_a.tenant, key="ada")
    persona = make_book(tenant_a, owner=None, profile=Profile.SERVER, scope=Scope.PERSONA, lineage=lineage, title="Ada")
    make_book(tenant_a, owner="admin", title="Admin's private")
    make_book(tenant_b, title="Foreign")

    rows = tenant_a.member_client.get("/api/v1/books").json()["results"]
    assert {row["title"] for row in rows} == {"Mine", "Factions", "Ada"}
    assert {row["title"]: row["entry_count"] for row in rows}["Mine"] == 2

    def titles(**params):
        return [row["title"] for row in tenant_a.member_client.get("/api/v1/books", params).json()["results"]]

    assert titles(scope="server") == ["Factions"]
    assert titles(profile="classic") == ["Mine"]
    assert titles(lineage=str(lineage.public_id)) == ["Ada"]
    assert titles(q="fact") == ["Factions"]
    assert {server.pk, persona.pk} <= {row["id"] for row in tenant_a.member_client.get("/api/v1/books").json()["results"]}


def test_toggle_active_through_the_api(tenant_a):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER)
    response = tenant_a.admin_client.post(f"/api/v1/books/{book.pk}/active", {"active": False}, format="json")
    assert response.status_code == 200
    assert (response.json()["active"], response.json()["version"]) == (False, version(book))


def test_canon_meter_endpoint(tenant_a):
    book = make_book(tenant_a, profile=Profile.SMART)
    make_entry(book, title="Frame", content="f" * 3_000, constant=True)  # 750 tokens
    make_entry(book, title="Rules", content="r" * 800, constant=True)  # 200 tokens
    response = tenant_a.member_client.get(
        f"/api/v1/books/{book.pk}/canon-meter", {"model": "small-8k", "input_window": 8_000, "tokenizer": "ceil-chars-4"}
    )
    assert response.status_code == 200
    body = response.json()
    assert body["message"] == "Core canon: 950 tokens per turn"
    assert (body["budget"], body["over_budget"]) == (800, True)
    assert "950" in body["warning"] and "800" in body["warning"]
    assert [(e["title"], e["fits"]) for e in body["entries"]] == [("Frame", True), ("Rules", False)]

    roomy = tenant_a.member_client.get(f"/api/v1/books/{book.pk}/canon-meter", {"model": "gpt-4o"}).json()
    assert (roomy["input_window"], roomy["budget"], roomy["tokenizer"]) == (128_000, 4_000, "o200k_base")
    assert (roomy["over_budget"], roomy["warning"]) == (False, None)

    missing = tenant_a.member_client.get(f"/api/v1/books/{book.pk}/canon-meter", {"model": "mystery"})
    assert missing.status_code == 400 and missing.json()["error"]["rule"] == "W-1"


def _meter(tenant, book, **params):
    query = {"model": "big", "input_window": 40_000, "tokenizer": "ceil-chars-4", **params}  # budget 4,000
    response = tenant.member_client.get(f"/api/v1/books/{book.pk}/canon-meter", query)
    assert response.status_code == 200
    return response.json()


@pytest.mark.parametrize(
    "tokens,heavy,over",
    [
        (2_999, False, False),  # one token under three quarters of the budget
        (3_000, True, False),  # exactly 75 %: heavy
        (3_730, True, False),  # the seed's case: no warning used to come before the budget broke
        (4_000, True, False),  # the whole budget, still not over it
        (4_001, True, True),
    ],
)
def test_canon_meter_warns_when_canon_gets_heavy(tenant_a, tokens, heavy, over):
    """W-1 (seed): the meter warns when canon "se vuelve pesado", from 75 % of the budget, not only over it."""
    book = make_book(tenant_a, profile=Profile.SMART)
    make_entry(book, title="Frame", content="f" * (4 * (tokens - 100)), constant=True)
    make_entry(book, title="Tone", content="t" * 400, constant=True)  # 100 tokens
    body = _meter(tenant_a, book)
    assert (body["tokens"], body["budget"], body["heavy_at"]) == (tokens, 4_000, 3_000)
    assert (body["heavy"], body["over_budget"]) == (heavy, over)
    if not heavy:
        assert body["warning"] is None
    elif over:
        assert body["warning"].startswith(f"Canon needs {tokens:,} tokens but this model's canon budget is 4,000")
        assert [e["fits"] for e in body["entries"]] == [True, False]
    else:
        share = tokens * 100 // 4_000
        assert body["warning"].startswith(
            f"Canon is getting heavy: {tokens:,} tokens take {share}% of this model's 4,000-token canon budget"
        )
        assert "75%" in body["warning"] and "3,000 tokens" in body["warning"]
        assert [e["fits"] for e in body["entries"]] == [True, True]


def test_canon_meter_heavy_threshold_follows_the_budget(tenant_a):
    book = make_book(tenant_a, profile=Profile.SMART)
    make_entry(book, title="Frame", content="f" * 2_460, constant=True)  # 615 tokens
    small = _meter(tenant_a, book, input_window=8_192)  # budget 819: heavy from 614.25, so 615 tokens
    assert (small["budget"], small["heavy_at"], small["heavy"]) == (819, 615, True)
    assert "75% of this model's 819-token canon budget" in small["warning"]
    roomy = _meter(tenant_a, book, input_window=8_210)  # budget 821: heavy from 616
    assert (roomy["heavy_at"], roomy["heavy"], roomy["warning"]) == (616, False, None)
    empty = _meter(tenant_a, make_book(tenant_a, profile=Profile.SMART), input_window=5)  # budget 0, no canon
    assert (empty["tokens"], empty["heavy_at"], empty["heavy"], empty["warning"]) == (0, 0, False, None)


def test_canon_meter_schema_names_the_heavy_fields(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    meter = schema["components"]["schemas"]["CanonMeterOut"]
    assert {"heavy_at", "heavy", "warning"} <= set(meter["required"])
    assert "75%" in meter["properties"]["heavy_at"]["description"]
    operation = schema["paths"]["/api/v1/books/{id}/canon-meter"]["get"]
    assert "75% of the canon budget" in operation["description"]


def test_persona_book_creation_by_lineage(tenant_a):
    lineage = lineage_get_or_create(tenant=tenant_a.tenant, key="ada lovelace")
    payload = {"title": "Ada's lore", "profile": "server", "scope": "persona", "lineage": str(lineage.public_id)}
    created = tenant_a.admin_client.post("/api/v1/books", payload, format="json")
    assert created.status_code == 201
    assert (created.json()["lineage"], created.json()["tenant_owned"]) == (str(lineage.public_id), True)
    again = tenant_a.admin_client.post("/api/v1/books", payload, format="json")
    assert again.status_code == 409 and again.json()["error"]["rule"] == "S-2"


ENDPOINTS = {
    "/api/v1/books": {"get", "post"},
    "/api/v1/books/{id}": {"get", "patch", "delete"},
    "/api/v1/books/{id}/active": {"post"},
    "/api/v1/books/{id}/canon-meter": {"get"},
    "/api/v1/books/{book_id}/entries": {"get", "post"},
    "/api/v1/books/{book_id}/entries/{id}": {"get", "patch", "delete"},
    "/api/v1/books/{book_id}/entries/{id}/move": {"post"},
    "/api/v1/books/{book_id}/entries/reorder": {"post"},
    "/api/v1/books/{book_id}/entries/bulk": {"post"},
    "/api/v1/books/{book_id}/entries/bulk-create": {"post"},
}


def test_schema_documents_every_endpoint(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    paths = schema["paths"]
    for path, methods in ENDPOINTS.items():
        assert path in paths, path
        assert methods <= set(paths[path]), (path, set(paths[path]))
        for method in methods:
            operation = paths[path][method]
            assert operation.get("summary"), (method, path)
            assert any(code.startswith("2") for code in operation["responses"]), (method, path)
    entry_list = paths["/api/v1/books/{book_id}/entries"]["get"]
    assert {"enabled", "canon", "never_used", "q", "sort"} <= {p["name"] for p in entry_list["parameters"]}
    assert "422" in paths["/api/v1/books/{book_id}/entries/bulk"]["post"]["responses"]
    assert "ErrorOut" in schema["components"]["schemas"]
