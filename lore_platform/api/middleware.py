"""JSON errors for everything under ``/api/`` and ``/healthz``, whatever ``DEBUG`` says.

DRF answers its own errors in the one shape (``lore_platform.api.errors``). This
middleware, outermost, covers what never reaches DRF or escapes it: Django's
404 for an unknown URL, a 405 from a plain view, a body over Django's limits,
a database that does not answer (503), a full disk (507: nothing was saved,
and retrying will not help until the operator frees space) and any unexpected
exception (500 with a request id that is also logged, never a traceback). Every answer carries
``X-Request-Id``.
"""
from __future__ import annotations

import errno
import logging
import uuid
from collections.abc import Callable
from typing import Any

from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

from lore_platform.text import TEXT_RULE

logger = logging.getLogger("lore_platform.api")

JSON_PREFIXES = ("/api/v1/", "/api/schema", "/healthz")
# An unknown /api/... URL is JSON too; the docs pages (/api/docs/, /api/redoc/) are HTML on success.
ERROR_PREFIXES = ("/api/", "/healthz")

CODES = {
    400: ("bad_request", "The request could not be read."),
    401: ("not_authenticated", "Authentication credentials were not provided."),
    403: ("permission_denied", "You do not have permission to perform this action."),
    404: ("not_found", "Not found."),
    405: ("method_not_allowed", "This method is not allowed here."),
    406: ("not_acceptable", "The requested answer type is not available; this API answers JSON."),
    413: ("payload_too_large", "The request body is too large."),
    415: ("unsupported_media_type", "Unsupported media type."),
    500: ("server_error", "Internal error; quote the request id when reporting it."),
    503: ("service_unavailable", "A service this request needs is not answering; try again shortly."),
    507: ("storage_full", "The server's disk is full; nothing was saved."),
}


def request_id_of(request: HttpRequest) -> str:
    return getattr(request, "request_id", "") or ""


def error_json(status: int, request: HttpRequest, **body: Any) -> JsonResponse:
    code, message = CODES.get(status, ("error", "The request failed."))
    error = {"code": code, "message": message, **body}
    if status >= 500:
        error.setdefault("details", {})["request_id"] = request_id_of(request)
    return JsonResponse({"error": error}, status=status)


DATABASE_RETRY_AFTER_SECONDS = 1


def database_unavailable_json(request: HttpRequest, exc: BaseException) -> JsonResponse:
    """The one answer to a request the database could not serve: a fast 503, whatever DEBUG says."""
    logger.warning("database unavailable: request_id=%s %s", request_id_of(request), str(exc).strip()[:200])
    response = error_json(503, request, code="database_unavailable",
                          message="The database is not answering; try again shortly.", field="database")
    response["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
    return response


# SQLSTATE 53100 disk_full (psycopg's errors.DiskFull), the text SQLite gives for SQLITE_FULL, and the OS's.
DISK_FULL_SQLSTATES = frozenset({"53100"})
DISK_FULL_TEXTS = ("database or disk is full", "no space left on device", "disk quota exceeded")
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    """Is ``exc`` (or what it wraps: Django re-raises the driver's error as its cause) a full disk?"""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if getattr(current, "sqlstate", None) in DISK_FULL_SQLSTATES or getattr(current, "pgcode", None) in (
            DISK_FULL_SQLSTATES
        ):
            return True
        if isinstance(current, OSError) and current.errno in DISK_FULL_ERRNOS:
            return True
        # Only a driver's or the OS's words count: a message built from a caller's input never does.
        from_driver = isinstance(current, (DatabaseError, OSError)) or type(current).__module__.startswith(
            ("sqlite3", "psycopg")
        )
        if from_driver and any(text in str(current).lower() for text in DISK_FULL_TEXTS):
            return True
        current = current.__cause__ or current.__context__
    return False


def storage_full_json(request: HttpRequest, exc: BaseException) -> JsonResponse:
    """A write the disk could not take: 507, saying so (a 503 "try again shortly" would send clients looping)."""
    logger.error("disk full: request_id=%s %s %s %s", request_id_of(request), request.method, request.path,
                 str(exc).strip()[:200])
    return error_json(
        507, request, message="The server's disk is full, so nothing was saved. Retrying will not help until "
        "the operator frees disk space.", field="storage",
    )


def database_error_json(request: HttpRequest, exc: BaseException) -> JsonResponse:
    """The answer to a database error a request could not get past: a full disk (507) or an outage (503)."""
    if is_disk_full(exc):
        return storage_full_json(request, exc)
    return database_unavailable_json(request, exc)


def _query_text_refused(request: HttpRequest) -> JsonResponse | None:
    """A query parameter holding NUL (``%00``; a URL cannot carry a lone surrogate: Django decodes it as
    U+FFFD) is a 400 naming it, as the body parser refuses one in a body (P-6): PostgreSQL refuses NUL
    in any string it is sent, so a filter holding one would otherwise be a 500."""
    for name, values in request.GET.lists():
        for value in (name, *values):
            if "\x00" in value:
                field = f"query.{name.replace(chr(0), '')}" if value != name else "query.<name>"
                return error_json(
                    400, request, code="invalid_text", field=field, rule=TEXT_RULE,
                    message=f"{field} contains a NUL character (U+0000), which is not storable text; remove it "
                            f"({TEXT_RULE}).",
                    details={"character": "U+0000", "position": value.index("\x00")},
                )
    return None


def _is_json(response: HttpResponse) -> bool:
    return (response.get("Content-Type") or "").startswith("application/json")


class ApiErrorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path_info.startswith(ERROR_PREFIXES):
            return self.get_response(request)
        request.request_id = request.headers.get("X-Request-Id", "")[:64] or uuid.uuid4().hex  # type: ignore[attr-defined]
        refused = _query_text_refused(request)
        response = refused or self.get_response(request)
        if response.status_code >= 400 and not _is_json(response):
            response = self._as_json(request, response)
        response["X-Request-Id"] = request_id_of(request)
        return response

    def _as_json(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        """Django's own error pages (HTML, or an empty 405) become the one JSON error shape."""
        status = response.status_code
        if status >= 500:
            # An inner middleware failed; Django logged the traceback: this line ties it to the id.
            logger.error("server error: request_id=%s %s %s", request_id_of(request), request.method, request.path)
        converted = error_json(status, request)
        if response.has_header("Allow"):
            converted["Allow"] = response["Allow"]
        # The CORS headers the layer below decided (a partner's page reads this error too).
        for name, value in response.items():
            if name.lower().startswith("access-control-") or name.lower() == "vary":
                converted[name] = value
        return converted

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if not request.path_info.startswith(ERROR_PREFIXES):
            return None
        if isinstance(exc, RequestDataTooBig):
            from django.conf import settings

            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            return error_json(
                413, request, message=f"The request body is larger than {limit:,} bytes.", field="body",
                details={"limit": limit, "unit": "bytes"},
            )
        if isinstance(exc, TooManyFieldsSent):
            return error_json(400, request, message=str(exc))
        if is_disk_full(exc):
            return storage_full_json(request, exc)
        if isinstance(exc, (OperationalError, InterfaceError)) or (
            isinstance(exc, DatabaseError) and "connection" in str(exc).lower()
        ):
            return database_unavailable_json(request, exc)
        logger.error(
            "unhandled exception: request_id=%s %s %s", request_id_of(request), request.method, request.path,
            exc_info=exc,
        )
        return error_json(500, request)
