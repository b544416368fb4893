"""Celery tasks for sharing: library search vectors and translations for display (P-4, P-5).

Tasks take ids (the tenant id travels with the book id, so every read is
tenant-scoped) and are idempotent: a fresh search document, a current vector
or a ready translation is left alone, so ``acks_late`` redelivery, retries and
the sweep never redo finished work. Database hiccups are retried with backoff;
a translation error is recorded on its row and not retried.
"""
from __future__ import annotations

from typing import Any

from celery import shared_task

from books.events import SHARED_BOOK_CHANGED
from lore_platform.tasks import TASK_RETRY


@shared_task(name="sharing.book_shared_refresh", **TASK_RETRY)
def book_shared_refresh(tenant_id: int, book_id: int) -> dict[str, Any]:
    """A shared book changed or was shared: refresh its search document, vector and translations."""
    from sharing.services import book_shared_refresh_run

    report = book_shared_refresh_run(tenant=tenant_id, book_id=book_id)
    return {"outcome": report.outcome, "translations_scheduled": report.translations_scheduled}


@shared_task(name=SHARED_BOOK_CHANGED, **TASK_RETRY)
def shared_book_changed(tenant_id: int, book_id: int) -> bool:
    """A book got a new version (published by ``books.events``): refresh it if it is shared."""
    from sharing.services import shared_book_changed_run

    return shared_book_changed_run(tenant=tenant_id, book_id=book_id)


@shared_task(name="sharing.book_vector_refresh", **TASK_RETRY)
def book_vector_refresh(tenant_id: int, book_id: int) -> str:
    """Embed a shared book for search by meaning (skips a current vector)."""
    from sharing.services import book_vector_refresh_run

    return book_vector_refresh_run(tenant=tenant_id, book_id=book_id)


@shared_task(name="sharing.book_translate", **TASK_RETRY)
def book_translate(tenant_id: int, book_id: int, language: str) -> str:
    """Translate a shared book for display into one language (skips a ready translation)."""
    from sharing.services import book_translate_run

    return book_translate_run(tenant=tenant_id, book_id=book_id, language=language)


@shared_task(name="sharing.shared_books_sweep", **TASK_RETRY)
def shared_books_sweep() -> dict[str, int]:
    """Periodic safety net (celery beat): refreshes that were missed or lost, translations left pending."""
    from sharing.services import shared_books_sweep as sweep

    return sweep()
