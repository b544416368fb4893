from __future__ import annotations

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db


def test_healthz_reports_each_part(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["database"]["engine"] == ("postgresql" if settings.DATABASE_IS_POSTGRES else "sqlite")
    expected_backend = "pgvector" if settings.DATABASE_IS_POSTGRES else "memory"
    assert body["checks"]["vector"]["backend"] == expected_backend
    assert body["checks"]["broker"]["ok"] is True


def test_healthz_is_503_naming_a_broker_that_is_down(client, monkeypatch):
    monkeypatch.setattr(settings, "CELERY_TASK_ALWAYS_EAGER", False)
    monkeypatch.setattr(settings, "CELERY_BROKER_URL", "redis://127.0.0.1:1/0")
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["down"] == ["broker"]
    assert body["checks"]["broker"]["ok"] is False


@pytest.mark.postgres
def test_healthz_is_503_when_vector_extension_missing(client, monkeypatch):
    from config import health

    def no_extension():
        return {"ok": False, "backend": "pgvector", "error": "extension 'vector' is not installed"}

    monkeypatch.setattr(health, "_check_vector", no_extension)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["down"] == ["vector"]


@pytest.mark.postgres
def test_vector_extension_is_installed_in_the_database():
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert cursor.fetchone() is not None


def test_openapi_schema_and_docs_are_served(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/v1/tenant" in paths
    assert "/api/v1/api-keys" in paths
    assert client.get("/api/docs/").status_code == 200


def test_the_api_docs_pages_load_nothing_from_another_host(client):
    # An offline install (or a strict network) must still show the docs: no CDN scripts, fonts or logos.
    import re

    for page in ("/api/redoc/", "/api/docs/"):
        body = client.get(page).content.decode()
        assert re.findall(r"(?:src|href)=[\"'](?:https?:)?//[^\"']+", body) == [], page
        assert "googleapis" not in body and "jsdelivr" not in body and "unpkg" not in body, page


def test_the_schema_answers_json_when_asked(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200 and response["Content-Type"].startswith("application/json")
    assert response.json()["openapi"].startswith("3.")
