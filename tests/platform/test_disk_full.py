"""A full disk says so (issue 26, point 7): 507 ``storage_full``, not "503 … try again shortly"; /healthz warns first."""
from __future__ import annotations

import errno
from collections import namedtuple

import pytest
from django.conf import settings
from django.db import OperationalError, connection

from books.api.views import BookViewSet
from books.models import Book, Entry
from tests.books.factories import make_book

pytestmark = pytest.mark.django_db


def _wrapped(cause: Exception) -> OperationalError:
    """As Django's database error wrapper raises a driver's error: its own class, the driver's as cause."""
    wrapped = OperationalError(*cause.args)
    wrapped.__cause__ = cause
    return wrapped


def _sqlite_full():
    import sqlite3

    return _wrapped(sqlite3.OperationalError("database or disk is full"))


def _postgres_full():
    from psycopg import errors  # SQLSTATE 53100

    return _wrapped(errors.DiskFull('could not extend file "base/16384/2619": wrote only 4096 of 8192 bytes'))


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize("error", [_sqlite_full, _postgres_full], ids=["sqlite", "postgresql"])
def test_a_full_disk_is_a_507_saying_so(tenant_a, monkeypatch, settings, debug, error):
    settings.DEBUG = debug

    def full(*args, **kwargs):
        raise error()

    monkeypatch.setattr(BookViewSet, "create", full)
    response = tenant_a.admin_client.post("/api/v1/books", {"title": "New"}, format="json")
    assert response.status_code == 507
    assert response["Content-Type"].startswith("application/json")
    error_body = response.json()["error"]
    assert error_body["code"] == "storage_full"
    assert "disk is full" in error_body["message"] and "nothing was saved" in error_body["message"]
    assert "Retry-After" not in response  # retrying shortly will not help
    assert error_body["details"]["request_id"]


def test_a_file_write_on_a_full_disk_is_a_507_on_pages_too(tenant_a, monkeypatch, client):
    from web.views import books as book_pages

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    client.force_login(tenant_a.admin)
    monkeypatch.setattr(book_pages, "book_create", full)
    response = client.post("/books", {"action": "create", "title": "Full", "profile": "classic", "language": "en"})
    assert response.status_code == 507
    assert response.json()["error"]["code"] == "storage_full"
    assert not Book.objects.for_tenant(tenant_a.tenant).filter(title="Full").exists()


def test_an_unreachable_database_is_still_a_503(tenant_a, monkeypatch):
    def down(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(BookViewSet, "list", down)
    response = tenant_a.admin_client.get("/api/v1/books")
    assert response.status_code == 503 and response.json()["error"]["code"] == "database_unavailable"


Usage = namedtuple("Usage", "total used free")


def test_healthz_reports_low_free_space_as_degraded(client, monkeypatch, settings):
    from config import health

    settings.HEALTH_MIN_FREE_BYTES = 500 * 1024 * 1024
    seen = []

    def usage(path):
        seen.append(path)
        return Usage(total=10 * 1024**3, used=10 * 1024**3 - 20 * 1024 * 1024, free=20 * 1024 * 1024)

    monkeypatch.setattr(health.shutil, "disk_usage", usage)
    response = client.get("/healthz")
    assert response.status_code == 200  # still serving reads: a probe must not restart it
    body = response.json()
    assert body["status"] == "degraded" and body["degraded"] == ["disk"] and body["down"] == []
    disk = body["checks"]["disk"]
    assert disk["ok"] is False and disk["free_bytes"] == 20 * 1024 * 1024
    assert disk["min_free_bytes"] == 500 * 1024 * 1024
    assert seen == [settings.DATA_DIR]


def test_healthz_with_room_on_disk_is_ok(client, monkeypatch, settings):
    from config import health

    settings.HEALTH_MIN_FREE_BYTES = 500 * 1024 * 1024
    monkeypatch.setattr(health.shutil, "disk_usage", lambda path: Usage(10 * 1024**3, 1024**3, 9 * 1024**3))
    body = client.get("/healthz").json()
    assert body["status"] == "ok" and body["degraded"] == [] and body["checks"]["disk"]["ok"] is True


@pytest.mark.skipif(settings.DATABASE_IS_POSTGRES, reason="SQLite's page cap stands in for a full disk")
def test_sqlite_really_full_is_a_507_and_nothing_half_written(tenant_a):
    """No mock: SQLite capped at the pages it has answers SQLITE_FULL ("database or disk is full")."""
    book = make_book(tenant_a, owner=None, profile="smart", title="Server lore")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA page_count")
        (pages,) = cursor.fetchone()
        cursor.execute("PRAGMA max_page_count")
        (cap,) = cursor.fetchone()
        cursor.execute(f"PRAGMA max_page_count = {pages}")
    try:
        body = {"title": "Varn", "content": "The river city of Varn. " * 800}  # overflow pages: the file must grow
        response = tenant_a.admin_client.post(f"/api/v1/books/{book.pk}/entries", body, format="json")
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA max_page_count = {cap}")
    assert response.status_code == 507, response.content
    assert response.json()["error"]["code"] == "storage_full"
    assert not Entry.objects.for_tenant(tenant_a.tenant).exists()
