"""Conditional requests for editable resources: ``ETag`` on answers, ``If-None-Match`` → 304 on reads,
``If-Match`` → the version a write expects (412 when stale, 428 when the tenant requires it and it is
missing). The services compare the version under the row lock; this module only reads the headers.
"""
from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.response import Response

from lore_platform.errors import PreconditionRequired
from lore_platform.etags import etag

# A version no resource ever has: an If-Match naming another resource, a weak or a malformed tag is
# stale by definition (If-Match uses the strong comparison, RFC 9110 §13.1.1).
NEVER = "\x00never"

UNSAFE = frozenset({"PUT", "PATCH", "DELETE"})


def _tags(header: str) -> list[str]:
    return [part.strip() for part in header.split(",") if part.strip()]


def if_match_version(request: Any, kind: str, pk: int, *, required: bool) -> str | None:
    """The version ``If-Match`` names for ``kind``/``pk``; None = no condition (absent or ``*``)."""
    header = request.headers.get("If-Match")
    if header is None:
        if required and request.method in UNSAFE:
            raise PreconditionRequired(
                "This workspace requires If-Match on every change: send the ETag you read ({kind} answers "
                "carry one).", values={"kind": kind}, field="If-Match", details={"resource": kind, "id": pk},
            )
        return None
    prefix = f'"{kind}-{pk}-'
    for tag in _tags(header):
        if tag == "*":
            return None
        if tag.startswith(prefix) and tag.endswith('"') and len(tag) > len(prefix) + 1:
            return tag[len(prefix):-1]
    return NEVER


def tagged(request: Any, response: Response, kind: str, pk: int, version: object) -> Response:
    """Put the resource's ETag on ``response``; a read whose If-None-Match names it answers 304."""
    tag = etag(kind, pk, version)
    if request.method in ("GET", "HEAD") and response.status_code == 200:
        wanted = request.headers.get("If-None-Match")
        # If-None-Match uses the weak comparison: W/"x" matches "x".
        if wanted and (wanted.strip() == "*" or tag in {t.removeprefix("W/") for t in _tags(wanted)}):
            response = Response(status=status.HTTP_304_NOT_MODIFIED)
    response["ETag"] = tag
    return response


class ConditionalMixin:
    """For the sealed base views of editable resources: ``self.expected_version(kind, pk)`` before a
    write, ``self.tagged(response, kind, pk, version)`` on every answer carrying the resource."""

    request: Any

    def expected_version(self, kind: str, pk: int) -> str | None:
        tenant = self.actor.tenant  # type: ignore[attr-defined]
        return if_match_version(self.request, kind, pk, required=bool(getattr(tenant, "require_if_match", False)))

    def tagged(self, response: Response, kind: str, pk: int, version: object) -> Response:
        return tagged(self.request, response, kind, pk, version)


# --- the schema's words for it (views add these to their operations' extend_schema) -------------------
def _schema_parts() -> dict[str, Any]:
    from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

    etag_header = OpenApiParameter(
        "ETag", str, OpenApiParameter.HEADER, response=["200", "201"],
        description='The resource\'s version, a strong tag (`"<kind>-<id>-<version>"`): send it back in If-Match '
                    "to change or delete only that version, or in If-None-Match to read it only if it changed.",
    )
    if_match = OpenApiParameter(
        "If-Match", str, OpenApiParameter.HEADER,
        description="The ETag you read: the change is made only if the resource is still at that version (412 "
                    "`precondition_failed` otherwise, nothing written). Required when the tenant requires it "
                    "(PUT /api/v1/tenant/preconditions; 428 `precondition_required` without it).",
    )
    if_none_match = OpenApiParameter(
        "If-None-Match", str, OpenApiParameter.HEADER,
        description="An ETag you hold: 304 with no body when the resource is still at that version.",
    )
    return {
        "read": {"parameters": [if_none_match, etag_header],
                 "responses": {304: OpenApiResponse(description="Not modified: still at the version If-None-Match "
                                                                "names (no body).")}},
        "write": {"parameters": [if_match, etag_header], "responses": {
            412: OpenApiResponse(description="If-Match names a version that is no longer current; "
                                             "`error.details` names the resource and its current `etag`. Nothing "
                                             "was written."),
            428: OpenApiResponse(description="The tenant requires If-Match on every change; none was sent."),
        }},
        "created": {"parameters": [etag_header], "responses": {}},
    }


SCHEMA: dict[str, Any] = _schema_parts()
