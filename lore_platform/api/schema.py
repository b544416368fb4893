"""Schema post-processing: every operation documents every error status it can answer.

Views document the errors that carry product meaning (a rule, a limit) in their own
words; this hook adds, with the one error schema, the statuses any operation can
answer from the layers around it: the parser (400, 413, 415), authentication and
scopes (401, 403), the throttle (429) and the failures the API middleware turns
into JSON (500 with a request id, 503 when the database does not answer).
"""
from __future__ import annotations

from typing import Any

from lore_platform.api.parsers import INT_MAX, INT_MIN

ERROR_REF = {"$ref": "#/components/schemas/ErrorOut"}

COMMON = {
    "400": "The request could not be read, or a field is invalid (`error.field`).",
    "404": "No such object, or not visible to the caller (another tenant's objects are 404, never 403).",
    "429": "The tenant's request budget is spent (P-6); see `Retry-After`.",
    "500": "Unexpected failure; `error.details.request_id` is also in the server log.",
    "503": "The database is not answering; try again shortly.",
}
AUTHENTICATED = {
    "401": "No credentials, or a bad or revoked API key.",
    "403": "The key lacks the scope, or the caller may not do this.",
}
WITH_BODY = {
    "413": "The body is larger than the limit named in `error.details.limit`.",
    "415": "The body's media type is not the one this operation accepts.",
}
WRITES = {
    "409": "The change conflicts with the current state (a name taken, a stale version), or a request with "
           "the same Idempotency-Key is still running.",
    "422": "A product limit would be broken (`error.rule`, `error.details`), or the Idempotency-Key was first "
           "used for another request; nothing was written.",
}


# Every authenticated POST takes an Idempotency-Key (lore_platform.api.base; Stripe's header and rules).
IDEMPOTENCY_KEY = {
    "in": "header", "name": "Idempotency-Key", "required": False,
    "description": "A key you choose (a UUID) to make a retry safe: the first answer is kept 24 h per tenant and a "
                   "retry with the same key and the same request (method, path, body) gets it again, with "
                   "`Idempotent-Replayed: true`, without running anything twice. The same key with another "
                   "request is 422 `idempotency_key_reused`; while the first is still running, 409 "
                   "`idempotency_key_in_flight`.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"},
}
REPLAYED_HEADER = {"Idempotent-Replayed": {
    "description": "`true` when this is the stored first answer to the request's Idempotency-Key.",
    "schema": {"type": "string", "enum": ["true"]},
}}


def _idempotent(operation: dict[str, Any]) -> None:
    parameters = operation.setdefault("parameters", [])
    if not any(p.get("in") == "header" and p.get("name") == IDEMPOTENCY_KEY["name"] for p in parameters):
        parameters.append(dict(IDEMPOTENCY_KEY))
    for code, response in operation.get("responses", {}).items():
        if code.isdigit() and int(code) < 500:
            response.setdefault("headers", {}).update(REPLAYED_HEADER)


def _error_response(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ERROR_REF}}}


def _bound_integers(node: Any) -> None:
    """An integer the schema leaves open gets the 64-bit range the JSON parser enforces."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("type") == "integer":
                item.setdefault("minimum", INT_MIN)
                item.setdefault("maximum", INT_MAX)
                item.setdefault("format", "int64")
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def error_responses_hook(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    from lore_platform.api.inputs import STRICT_REQUEST_COMPONENTS

    for name, component in result.get("components", {}).get("schemas", {}).items():
        if name in STRICT_REQUEST_COMPONENTS and component.get("type") == "object":
            component["additionalProperties"] = False
    _bound_integers(result.get("components", {}).get("schemas", {}))
    _bound_integers(result.get("paths", {}))
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method not in {"get", "put", "post", "patch", "delete"}:
                continue
            extra = dict(COMMON)
            if operation.get("security") != [{}] and operation.get("security", True):
                extra.update(AUTHENTICATED)
            if "requestBody" in operation:
                extra.update(WITH_BODY)
            if method != "get":
                extra.update(WRITES)
            authenticated = operation.get("security") != [{}] and operation.get("security", True)
            responses = operation.setdefault("responses", {})
            for code, description in extra.items():
                responses.setdefault(code, _error_response(description))
            for code, response in responses.items():
                # A status documented without a body, or with another one, answers the error schema.
                if code.isdigit() and int(code) >= 400:
                    response["content"] = {"application/json": {"schema": ERROR_REF}}
            if method == "post" and authenticated:
                _idempotent(operation)
    return result
