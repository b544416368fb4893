"""A real Celery worker translates a shared book: the task takes ids and reads the same database and packages."""
from __future__ import annotations

import pytest

from sharing.models import BookTranslation
from sharing.translation import package_install_from_path
from tests.celery_worker import celery_worker
from tests.shared_data import require_shared


@pytest.fixture
def worker(transactional_db, tmp_path):
    """A worker whose data dir holds the toy package (settings default: DATA_DIR/translation-packages)."""
    data_dir = tmp_path / "data"
    package_install_from_path(
        require_shared("recipes", "translate-en_es-toy.argosmodel"), data_dir / "translation-packages"
    )
    with celery_worker(tmp_path / "worker.log", env={"LOREWEAVE_DATA_DIR": str(data_dir)}) as (queue, process):
        yield queue, process, data_dir / "translation-packages"


@pytest.mark.services
@pytest.mark.postgres
def test_a_worker_translates_a_published_book(worker, make_tenant, anon_client, xling, monkeypatch, display_settings):
    from config.celery import app
    from sharing.services import book_visibility_set
    from sharing.tasks import book_translate
    from tests.sharing.helpers import owner_actor
    from tests.sharing.test_translation_pipeline import xling_book

    queue, process, packages = worker
    monkeypatch.setattr("sharing.services.book_vector_refresh_run", lambda **kwargs: "skipped")
    setup = make_tenant("Worker")
    book, expected = xling_book(setup, xling)
    # Published with no package visible to this process: nothing is translated here.
    book_visibility_set(actor=owner_actor(setup), book=book, visibility="public")
    book.refresh_from_db()
    assert not BookTranslation.objects.for_tenant(setup.tenant).exists()

    app.conf.task_always_eager = False
    try:
        # Results are not kept by default (nothing on a request reads them): this call asks for its own.
        outcome = book_translate.apply_async((setup.tenant.pk, book.pk, "es"), queue=queue,
                                             ignore_result=False).get(timeout=90)
    finally:
        app.conf.task_always_eager = True
    assert process.poll() is None, "the worker died"
    assert outcome == "translated"

    display_settings.LOREWEAVE_TRANSLATION_PACKAGES_DIR = str(packages)  # what the web process would see
    page = anon_client.get(f"/api/v1/library/books/{book.pk}", {"lang": "es"}).json()
    entries = anon_client.get(f"/api/v1/library/books/{book.pk}/entries", {"lang": "es"}).json()["results"]
    assert page["title"] == expected["title"] and page["display"]["status"] == "ready"
    assert [{"title": e["title"], "content": e["content"]} for e in entries] == expected["entries"]
