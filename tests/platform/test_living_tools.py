"""The living world only where it works (issue 33 point 8, L-1/L-2), and tool definitions ready for
OpenAI's strict function calling, checked against the published schema rules.

A chat on the tenant's default ``classic`` profile reads a smart living book as keyword entries: a new
entry without aliases never reaches the model there. Such a chat is offered no lore tools, its answer
says why, and a tool call from it is refused (409) with nothing written.
"""
from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest

from books.living import living_tools_schema
from books.models import Entry, LoreWrite, Profile
from retrieval.adapter.lookup import lookup_tool_schema
from tests.books.factories import make_book, make_entry
from tests.platform.test_context_schema import validate  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db

MODEL = {"tokenizer": "ceil-chars-4", "input_window": 8192, "tools": True}
LORE = "The Glass Tower stands on the salt flats; its keepers trade light for water."
WRITE_TOOLS = {"lore_create", "lore_append"}


# --- OpenAI's strict mode, as published ------------------------------------------------------------
# platform.openai.com/docs/guides/structured-outputs, "Supported schemas" (function calling with
# ``strict: true`` uses the same subset): supported types; the keywords listed per type; the root an
# object, not anyOf; every property required (optional = a union with null); additionalProperties
# false on every object; nesting and size limits (5 levels; 100 object properties in the first
# published limit, raised since, so 100 is the safe bound); 1,000 enum values; 120,000 characters of
# names and enum/const values. Fine-tuned models do not take the type-specific constraints.

STRICT_TYPES = {"string", "number", "boolean", "integer", "object", "array", "null"}
STRICT_KEYWORDS = {
    "type", "description", "title", "properties", "required", "additionalProperties", "items", "enum", "const",
    "anyOf", "$ref", "$defs", "definitions",
    "pattern", "format",  # strings
    "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",  # numbers
    "minItems", "maxItems",  # arrays
}
NOT_FOR_FINE_TUNED = {"pattern", "format", "minimum", "maximum", "multipleOf", "minItems", "maxItems"}
STRICT_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
MAX_DEPTH, MAX_PROPERTIES, MAX_ENUM_VALUES, MAX_STRING_TOTAL = 5, 100, 1000, 120_000


def strict_problems(tool: dict[str, Any], *, fine_tuned: bool = False) -> list[str]:
    """Every way ``tool`` (an OpenAI chat-completions tool) breaks the strict-mode rules; [] if none."""
    problems: list[str] = []
    if tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
        return ["not a function tool"]
    function = tool["function"]
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", str(function.get("name", ""))):
        problems.append("name: 1-64 letters, digits, _ or -")
    if function.get("strict") is not True:
        problems.append("function: strict is not true")
    root = function.get("parameters")
    if not isinstance(root, dict) or root.get("type") != "object" or "anyOf" in root:
        return [*problems, "parameters: the root must be an object, not anyOf"]
    allowed = STRICT_KEYWORDS - NOT_FOR_FINE_TUNED if fine_tuned else STRICT_KEYWORDS
    counts = {"properties": 0, "enum": 0, "chars": 0}

    def walk(schema: Any, path: str, depth: int) -> None:
        if not isinstance(schema, dict):
            problems.append(f"{path}: not a schema object")
            return
        for keyword in sorted(set(schema) - allowed):
            problems.append(f"{path}: unsupported keyword {keyword}")
        types = schema.get("type")
        types = [types] if isinstance(types, str) else list(types or [])
        if not types and not {"enum", "const", "anyOf", "$ref"} & set(schema):
            problems.append(f"{path}: no type")
        for name in types:
            if name not in STRICT_TYPES:
                problems.append(f"{path}: unsupported type {name}")
        if "format" in schema and schema["format"] not in STRICT_FORMATS:
            problems.append(f"{path}: unsupported format {schema['format']}")
        if "enum" in schema:
            counts["enum"] += len(schema["enum"])
            counts["chars"] += sum(len(v) for v in schema["enum"] if isinstance(v, str))
        if isinstance(schema.get("const"), str):
            counts["chars"] += len(schema["const"])
        if "object" in types:
            depth += 1
            if depth > MAX_DEPTH:
                problems.append(f"{path}: more than {MAX_DEPTH} levels of nesting")
            properties = schema.get("properties")
            if not isinstance(properties, dict):
                problems.append(f"{path}: an object without properties")
                properties = {}
            if schema.get("additionalProperties") is not False:
                problems.append(f"{path}: additionalProperties is not false")
            required = schema.get("required", [])
            if sorted(required) != sorted(properties) or len(set(required)) != len(required):
                missing = sorted(set(properties) - set(required))
                problems.append(f"{path}: every property must be required (missing {missing})")
            counts["properties"] += len(properties)
            for name, child in properties.items():
                counts["chars"] += len(name)
                walk(child, f"{path}.{name}", depth)
        if "items" in schema:
            walk(schema["items"], f"{path}[]", depth)
        for i, option in enumerate(schema.get("anyOf", [])):
            walk(option, f"{path}|{i}", depth)
        for defs in ("$defs", "definitions"):
            for name, child in schema.get(defs, {}).items():
                counts["chars"] += len(name)
                walk(child, f"#/{defs}/{name}", 0)

    walk(root, "parameters", 0)
    if counts["properties"] > MAX_PROPERTIES:
        problems.append(f"more than {MAX_PROPERTIES} object properties")
    if counts["enum"] > MAX_ENUM_VALUES:
        problems.append(f"more than {MAX_ENUM_VALUES} enum values")
    if counts["chars"] > MAX_STRING_TOTAL:
        problems.append(f"names and enum values over {MAX_STRING_TOTAL:,} characters")
    return problems


def _tool(parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "t", "description": "", "strict": True,
                                             "parameters": parameters}}


def _obj(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def test_the_strict_validator_knows_the_published_rules():
    """The checker itself: a schema OpenAI accepts passes, each broken rule is named."""
    ok = _obj({"city": {"type": "string"}, "unit": {"type": ["string", "null"], "enum": ["F", "C", None]},
               "days": {"type": "array", "items": _obj({"n": {"type": "integer", "minimum": 1}}), "maxItems": 7}})
    assert strict_problems(_tool(ok)) == []
    assert "unsupported keyword maxItems" in " ".join(strict_problems(_tool(ok), fine_tuned=True))
    optional = {**ok, "required": ["city"]}
    assert "every property must be required" in strict_problems(_tool(optional))[0]
    assert "additionalProperties is not false" in strict_problems(_tool({**ok, "additionalProperties": True}))[0]
    assert "unsupported keyword minLength" in strict_problems(_tool(_obj({"s": {"type": "string",
                                                                               "minLength": 2}})))[0]
    assert "strict is not true" in strict_problems({"type": "function", "function": {
        "name": "t", "parameters": ok}})[0]
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(6):
        deep = _obj({"d": deep})
    assert any("levels of nesting" in p for p in strict_problems(_tool(deep)))
    wide = _obj({f"p{i}": {"type": "string"} for i in range(101)})
    assert "more than 100 object properties" in strict_problems(_tool(wide))
    assert "root must be an object" in strict_problems(_tool({"anyOf": [ok]}))[0]


@pytest.mark.parametrize("several", [False, True])
def test_the_tool_definitions_pass_openais_strict_mode(tenant_a, several):
    books = [make_book(tenant_a, profile=Profile.SMART, living_world=True, title="Varn",
                       description="The salt city.")]
    if several:
        books.append(make_book(tenant_a, profile=Profile.SMART, living_world=True, title="Grey Sea"))
    tools = [*living_tools_schema(books), lookup_tool_schema()]
    assert [t["function"]["name"] for t in tools] == ["lore_create", "lore_append", "lore_lookup"]
    for tool in tools:
        name = tool["function"]["name"]
        assert strict_problems(tool) == [], name
        assert strict_problems(tool, fine_tuned=True) == [], name  # no constraint keywords at all
        jsonschema.Draft202012Validator.check_schema(tool["function"]["parameters"])

    create = jsonschema.Draft202012Validator(tools[0]["function"]["parameters"])
    book = {"book": books[1].pk} if several else {}
    assert create.is_valid({**book, "title": "Glass Tower", "lore": LORE, "aliases": None})
    assert create.is_valid({**book, "title": "Glass Tower", "lore": LORE, "aliases": ["the Tower"]})
    assert not create.is_valid({**book, "title": "Glass Tower", "lore": LORE})  # strict: aliases sent, maybe null
    assert not create.is_valid({**book, "title": "Glass Tower", "lore": LORE, "aliases": None, "canon": True})
    # The limits the schema no longer carries are said to the model (and enforced when the call runs).
    properties = tools[0]["function"]["parameters"]["properties"]
    assert "2–100 characters" in properties["title"]["description"]
    assert "20–4,000 characters" in properties["lore"]["description"]
    assert "at most 50" in properties["aliases"]["description"]


# --- the living world only where it works ------------------------------------------------------


def _living(setup, **fields):
    return make_book(setup, owner="member", profile=Profile.SMART, living_world=True, title="Varn", **fields)


def _chat(setup, book, **chat_fields):
    client = setup.member_client
    character = client.post("/api/v1/characters", {"name": "Mirelda"}, format="json").json()["id"]
    attached = client.post("/api/v1/attachments", {"target": "character", "target_id": character,
                                                   "book_id": book.pk}, format="json")
    assert attached.status_code == 201, attached.content
    chat = client.post("/api/v1/chats", {"kind": "character", "character_id": character, **chat_fields},
                       format="json")
    assert chat.status_code == 201, chat.content
    return chat.json()["id"]


def _context(setup, chat, text="We ride to the Glass Tower.", **extra):
    response = setup.member_client.post(f"/api/v1/chats/{chat}/context", {
        "messages": [{"role": "user", "text": text}], "model": MODEL, **extra}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _tool_call(setup, chat, name="lore_create", **extra):
    arguments = {"title": "Glass Tower", "lore": LORE}
    return setup.member_client.post(f"/api/v1/chats/{chat}/tool-calls", {
        "reply_id": "r1", "model": "gpt-test",
        "tool_call": {"id": "call_1", "type": "function",
                      "function": {"name": name, "arguments": json.dumps(arguments)}}, **extra}, format="json")


@pytest.mark.parametrize("profile", ["", "classic", "sillytavern"])
def test_a_keyword_profile_chat_with_a_living_book_gets_no_tools_and_the_reason(tenant_a, validate, profile):
    """The README's play-through on the tenant's default profile: no write tools, and the answer says why."""
    assert tenant_a.tenant.default_profile == "classic"
    book = _living(tenant_a)
    chat = _chat(tenant_a, book, **({"profile": profile} if profile else {}))
    body = _context(tenant_a, chat)
    validate(body, "ContextOut")
    assert not {t["function"]["name"] for t in body["tools"]} & WRITE_TOOLS
    living = body["living_world"]
    said = profile or "classic"
    assert living["tools_offered"] is False and living["books"] == [book.pk]
    assert living["code"] == "living_world_profile" and living["rule"] == "L-1"
    assert f"runs the {said} profile" in living["off_reason"] and "smart profile" in living["off_reason"]
    assert living["off_reason"] in body["warnings"]


def test_a_smart_chat_offers_the_tools_and_says_so(tenant_a, validate):
    book = _living(tenant_a)
    chat = _chat(tenant_a, book, profile="smart")
    body = _context(tenant_a, chat)
    validate(body, "ContextOut")
    assert WRITE_TOOLS <= {t["function"]["name"] for t in body["tools"]}
    assert body["living_world"] == {"tools_offered": True, "books": [book.pk], "code": None, "rule": None,
                                    "off_reason": None}
    assert not any("living world" in w for w in body["warnings"])

    plain = tenant_a.member_client.post(f"/api/v1/chats/{chat}/context", {
        "messages": [{"role": "user", "text": "hi"}], "model": {**MODEL, "tools": False}}, format="json").json()
    assert plain["living_world"]["code"] == "model_without_tools" and "tool-capable" in plain["living_world"][
        "off_reason"]
    assert not any("tool-capable" in w for w in plain["warnings"])  # the caller's choice, not a misconfiguration


def test_a_chat_without_a_living_book_has_no_living_world_answer(tenant_a):
    book = make_book(tenant_a, owner="member", profile=Profile.SMART, living_world=False)
    assert "living_world" not in _context(tenant_a, _chat(tenant_a, book))


@pytest.mark.parametrize("tool", ["lore_create", "lore_append"])
def test_a_tool_call_in_a_classic_chat_is_refused_and_writes_nothing(tenant_a, tool):
    book = _living(tenant_a)
    make_entry(book, title="Salt", content="Salt is money in Varn; the guild weighs it.")
    chat = _chat(tenant_a, book)  # the tenant's default: classic
    response = _tool_call(tenant_a, chat, tool)
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert error["code"] == "living_world_profile" and error["rule"] == "L-1" and error["field"] == "profile"
    assert "classic profile" in error["message"]
    assert not LoreWrite.objects.for_tenant(tenant_a.tenant).exists()
    assert list(Entry.objects.for_tenant(tenant_a.tenant).filter(book=book).values_list("title", flat=True)) == [
        "Salt"]


def test_a_smart_turn_of_a_classic_chat_takes_the_call_it_offered(tenant_a):
    """The context call may name the profile; the tool call names the same one and is run."""
    book = _living(tenant_a)
    chat = _chat(tenant_a, book)
    body = _context(tenant_a, chat, profile="smart")
    assert WRITE_TOOLS <= {t["function"]["name"] for t in body["tools"]}
    response = _tool_call(tenant_a, chat, profile="smart")
    assert response.status_code == 200 and response.json()["ok"], response.content
    assert Entry.objects.for_tenant(tenant_a.tenant).filter(book=book, title="Glass Tower").exists()


@pytest.mark.parametrize("aliases", [None, "missing"])
def test_a_strict_null_and_a_left_out_optional_argument_both_mean_none(tenant_a, aliases):
    book = _living(tenant_a)
    chat = _chat(tenant_a, book, profile="smart")
    arguments = {"title": "Glass Tower", "lore": LORE, **({"aliases": None} if aliases is None else {})}
    response = tenant_a.member_client.post(f"/api/v1/chats/{chat}/tool-calls", {
        "reply_id": "r1", "tool_call": {"id": "c", "type": "function",
                                        "function": {"name": "lore_create", "arguments": json.dumps(arguments)}}},
        format="json")
    assert response.status_code == 200 and response.json()["ok"], response.content
    assert Entry.objects.for_tenant(tenant_a.tenant).get(book=book, title="Glass Tower").keys == []


def test_the_openapi_schema_documents_the_living_world_answer_and_strict_tools(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]
    living = components["ContextOut"]["properties"]["living_world"]
    target = components[living["$ref"].rsplit("/", 1)[1]] if "$ref" in living else \
        components[living["allOf"][0]["$ref"].rsplit("/", 1)[1]]
    assert {"tools_offered", "books", "code", "rule", "off_reason"} <= set(target["properties"])
    tool = components["ContextOut"]["properties"]["tools"]["items"]
    for option in tool["oneOf"]:
        function = option["properties"]["function"]
        assert "strict" in function["required"] and function["properties"]["strict"]["enum"] == [True]
    assert "profile" in components["ToolCallInRequest"]["properties"]


def test_the_tool_call_documents_its_409(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    responses = schema["paths"]["/api/v1/chats/{id}/tool-calls"]["post"]["responses"]
    assert "living_world_profile" in responses["409"]["description"]
