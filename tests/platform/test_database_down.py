"""Database errors on a request answer 503 JSON at once, whatever DEBUG says (issue 13, point 5)."""
from __future__ import annotations

import pytest
from django.db import OperationalError

from books.api.views import BookViewSet

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("debug", [True, False])
def test_an_unreachable_database_is_a_503_json(tenant_a, monkeypatch, settings, debug):
    settings.DEBUG = debug

    def down(*args, **kwargs):
        raise OperationalError('connection to server at "127.0.0.1", port 5432 failed: Connection refused')

    monkeypatch.setattr(BookViewSet, "list", down)
    response = tenant_a.admin_client.get("/api/v1/books")
    assert response.status_code == 503
    assert response["Content-Type"].startswith("application/json")
    assert response["Retry-After"] == "1"
    assert response.json()["error"]["code"] == "database_unavailable"
    assert "5432" not in response.content.decode()  # no connection details leak
