"""Failing services answer fast, as JSON (issue 13, point 5).

PostgreSQL down: the connection attempt fails within ``connect_timeout`` (one
second, settings) and this middleware turns the database error into a 503 with
the one error body, whatever ``DEBUG`` says. Nothing is cached about the
outage: Django opens a new connection on the next request, so the API recovers
as soon as the database does, with no restart.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

from lore_platform.errors import ServiceUnavailable

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 1
DATABASE_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError)


def database_unavailable_response(exc: BaseException) -> JsonResponse:
    """The 503 of a request the database could not serve (API error handlers may answer it too)."""
    logger.warning("database unavailable: %s", str(exc).strip()[:200])
    error = ServiceUnavailable("The database is not answering; retry in a moment.", code="database_unavailable")
    response = JsonResponse({"error": {"field": None, "rule": None, **error.as_dict()}}, status=error.status)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class DatabaseUnavailableMiddleware:
    """First in the chain, so it also sees errors of the middleware below it (sessions, auth)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            return self.get_response(request)
        except DATABASE_ERRORS as exc:  # raised by a middleware below (views go through process_exception)
            return database_unavailable_response(exc)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, DATABASE_ERRORS):
            return database_unavailable_response(exception)
        return None
