"""One JSON error shape for every API failure.

    {"error": {"code": "...", "message": "...", "field": "...", "rule": "...", "details": {...}}}
"""
from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from lore_platform.api.parsers import BodyRefused
from lore_platform.errors import DomainError


def _first_field(detail: Any, prefix: str = "") -> str | None:
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if key == "non_field_errors":
                return prefix or None
            nested = _first_field(value, name)
            return nested if nested is not None else name
    if isinstance(detail, list):
        for index, value in enumerate(detail):
            if isinstance(value, (dict, list)):
                return _first_field(value, f"{prefix}[{index}]" if prefix else str(index))
    return prefix or None


def _first_message(detail: Any) -> str:
    if isinstance(detail, dict):
        for value in detail.values():
            return _first_message(value)
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    return str(detail)


def error_response(status_code: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response({"error": body}, status=status_code, headers=headers)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DomainError):
        # A refusal that knows when to come back (a lockout, a quota's 429) says it in the standard header.
        retry_after = getattr(exc, "retry_after", None) or exc.details.get("retry_after")
        headers = {"Retry-After": str(max(1, int(retry_after)))} if isinstance(retry_after, (int, float)) else None
        return error_response(exc.status, exc.as_dict(), headers)
    if isinstance(exc, Http404):
        return error_response(status.HTTP_404_NOT_FOUND, {"code": "not_found", "message": "Not found."})
    if isinstance(exc, BodyRefused):
        refused: dict[str, Any] = {"code": exc.error_code, "message": str(exc.detail), "details": exc.details}
        if exc.field:
            refused["field"] = exc.field
        if exc.rule:
            refused["rule"] = exc.rule
        return error_response(status.HTTP_400_BAD_REQUEST, refused)
    if isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()

    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        body: dict[str, Any] = {
            "code": "invalid",
            "message": _first_message(exc.detail),
            "fields": exc.detail,
        }
        field = _first_field(exc.detail)
        if field:
            body["field"] = field
        response.data = {"error": body}
        return response
    if isinstance(exc, exceptions.APIException):
        detail = exc.detail
        code = exc.get_codes() if not isinstance(detail, (dict, list)) else exc.default_code
        response.data = {"error": {"code": str(code), "message": _first_message(detail)}}
    return response


class ErrorBodyOut(serializers.Serializer):
    code = serializers.CharField(help_text="invalid, too_short, out_of_range, limit_exceeded, not_found, …")
    message = serializers.CharField()
    field = serializers.CharField(required=False, help_text="The field at fault, e.g. `entries[3].content`.")
    rule = serializers.CharField(required=False, help_text="The product rule, e.g. `W-12`, `S-14`.")
    details = serializers.DictField(required=False, help_text="e.g. {limit, actual, unit}; `request_id` on a 5xx.")
    fields = serializers.DictField(  # type: ignore[assignment]  # the error body's `fields`, not DRF's
        required=False, help_text="On a 400: every field at fault, with its messages.")


class ErrorOut(serializers.Serializer):
    """The one error schema: every status >= 400 of every operation answers it."""

    error = ErrorBodyOut()
