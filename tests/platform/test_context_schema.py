"""The context answers are exactly what the OpenAPI schema documents: every field typed, none extra."""
from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from tests.books.factories import make_book, make_entry
from tests.platform.test_context_api import CLASSIC, _attach, _character, _chat
from tests.platform.test_context_smart import _smart_chat, _world, xling  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db


def _strict(node: Any) -> Any:
    """OpenAPI 3.0 to JSON Schema: ``nullable`` becomes a null type; objects with listed
    properties allow no others, so an undocumented field fails."""
    if isinstance(node, list):
        return [_strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strict(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        elif "$ref" in out or "allOf" in out:
            out = {"anyOf": [out, {"type": "null"}]}
    if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


@pytest.fixture
def validate(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    components = _strict(schema["components"])

    def check(body: Any, component: str, *, many: bool = False) -> None:
        ref = {"$ref": f"#/components/schemas/{component}"}
        document = {"components": components, **({"type": "array", "items": ref} if many else ref)}
        jsonschema.validate(body, document)

    return check


def test_every_context_endpoint_documents_the_typed_answer(client):
    paths = client.get("/api/schema/", {"format": "json"}).json()["paths"]
    for path in ("/api/v1/chats/{id}/context", "/api/v1/chats/{id}/preview", "/api/v1/context",
                 "/api/v1/books/{book_id}/preview"):
        ok = paths[path]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok == {"$ref": "#/components/schemas/ContextOut"}, path


def test_a_classic_turn_its_preview_and_its_stored_log_match_the_schema(tenant_a, validate):
    book = make_book(tenant_a, owner="admin", title="Coast")
    bell = make_entry(book, keys=["bell"], content="Tide bells ring.")
    make_entry(book, keys=["gull"], content="Gulls steal bread.")
    kael = _character(tenant_a, "Kael")
    _attach(tenant_a, "character", kael, book)
    chat = _chat(tenant_a, kind="character", character_id=kael)
    client = tenant_a.admin_client
    body = client.post(f"/api/v1/chats/{chat}/context",
                       {"messages": [{"role": "user", "text": "a bell"}], "model": CLASSIC, "render": True,
                        "log": "full"}, format="json").json()
    validate(body, "ContextOut")
    assert body["injections"][0]["entry"] == bell.pk and body["injections"][0]["book"] == book.pk
    assert {row["entry"] for row in body["request_log"]} == {e.pk for e in book.entries.all()}
    assert isinstance(body["request_log_id"], int) and body["messages"]

    preview = client.post(f"/api/v1/chats/{chat}/preview", {"message": "a gull"}, format="json").json()
    validate(preview, "ContextOut")
    logs = client.get(f"/api/v1/chats/{chat}/requests").json()["results"]
    validate(logs, "RequestLogOut", many=True)
    assert logs[0]["injections"][0]["entry"] == bell.pk


def test_a_smart_turn_with_world_index_and_tools_matches_the_schema(tenant_a, xling, validate,
                                                                     django_capture_on_commit_callbacks):
    chat = _smart_chat(tenant_a, _world(tenant_a, xling, django_capture_on_commit_callbacks))
    body = tenant_a.admin_client.post(
        f"/api/v1/chats/{chat}/context",
        {"messages": [{"role": "user", "text": "Tell me about this world."}],
         "model": {"tokenizer": "ceil-chars-4", "input_window": 2000, "tools": True}},
        format="json",
    ).json()
    validate(body, "ContextOut")
    assert body["world_index"] and isinstance(body["world_index"][0]["entry"], int) and body["tools"]


def test_a_stateless_sillytavern_turn_matches_the_schema(tenant_a, validate):
    book = make_book(tenant_a, owner="member", title="Tavern", profile="sillytavern")
    make_entry(book, keys=["dragon"], content="A dragon sleeps under the hill.")
    body = tenant_a.read_client.post(
        "/api/v1/context",
        {"messages": [{"role": "user", "text": "Is there a dragon?"}], "book_ids": [book.pk],
         "profile": "sillytavern", "model": CLASSIC},
        format="json",
    ).json()
    validate(body, "ContextOut")
    assert [i["content"] for i in body["injections"]] == ["A dragon sleeps under the hill."]
    assert "sillytavern" in body["timed_state"]
