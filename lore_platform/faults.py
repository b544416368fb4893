"""Failing services answer fast, as JSON (issue 13, point 5).

PostgreSQL down: the connection attempt fails within ``connect_timeout`` (one
second, settings) and this middleware turns the database error into a 503 with
the one error body (``lore_platform.api.middleware.database_unavailable_json``),
whatever ``DEBUG`` says, on every path (pages too). Nothing is cached about the
outage: Django opens a new connection on the next request, so the API recovers
as soon as the database does, with no restart.

A full disk is not an outage: SQLite's "database or disk is full", PostgreSQL's
``DiskFull`` (SQLSTATE 53100) or the OS's ENOSPC on a file write answer 507
``storage_full`` saying so (issue 26, point 7), not "try again shortly".
"""
from __future__ import annotations

from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse

from lore_platform.api.middleware import (
    database_error_json,
    is_disk_full,
    storage_full_json,
)

DATABASE_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError)


class DatabaseUnavailableMiddleware:
    """First in the chain, so it also sees errors of the middleware below it (sessions, auth)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            return self.get_response(request)
        except DATABASE_ERRORS as exc:  # raised by a middleware below (views go through process_exception)
            return database_error_json(request, exc)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, DATABASE_ERRORS):
            return database_error_json(request, exception)
        if is_disk_full(exception):  # a file write (import, static, broker queue) on a full disk, pages too
            return storage_full_json(request, exception)
        return None
