"""Sharing state kept beside books: links, counters, provenance, search, translations.

The books app owns ``Book.visibility``; everything else sharing needs lives
here, one row per book at most, created the first time a book is shared or
copied. Every row belongs to the tenant of its book (a copy's rows to the
copier's tenant) and is read through ``for_tenant``; reads across tenants are
``unscoped()`` and live only in ``sharing/selectors.py``.
"""
from __future__ import annotations

import secrets
from typing import Any

from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from books.models import Book
from lore_platform.tenancy.models import Tenant
from lore_platform.tenancy.scoping import TenantScopedManager
from retrieval.adapter.models import EmbeddingField

LINK_TOKEN_BYTES = 24  # 192 bits: unguessable; 32 URL-safe characters


def link_token_new() -> str:
    return secrets.token_urlsafe(LINK_TOKEN_BYTES)


class SearchDocumentField(SearchVectorField):
    """A ``tsvector`` on PostgreSQL (full-text search); an unused text column elsewhere.

    SQLite searches ``BookShare.search_text`` with ``icontains`` instead.
    """

    def db_type(self, connection: BaseDatabaseWrapper) -> str:
        return "tsvector" if connection.vendor == "postgresql" else "text"


class BookShare(models.Model):
    """How one book is shared: its link, its counters, where a copy came from."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="book_shares")
    book = models.OneToOneField(Book, on_delete=models.CASCADE, related_name="share")

    # Unlisted books are reached only through this token; rotating it kills old links.
    link_token = models.CharField(max_length=64, unique=True, default=link_token_new)
    link_rotated_at = models.DateTimeField(null=True, blank=True)
    # The last time the book became public ("newest" in the library).
    published_at = models.DateTimeField(null=True, blank=True)
    visibility_changed_at = models.DateTimeField(null=True, blank=True)
    copy_count = models.PositiveIntegerField(default=0)

    # Provenance of a copy (P-2): the source book and the version that was copied.
    source_book = models.ForeignKey(
        Book, null=True, blank=True, on_delete=models.SET_NULL, related_name="copies"
    )
    source_version = models.PositiveIntegerField(null=True, blank=True)
    source_title = models.CharField(max_length=120, blank=True, default="")
    copied_at = models.DateTimeField(null=True, blank=True)

    # Library search document (title, description, tags, entry titles), as of ``search_version``.
    search_text = models.TextField(blank=True, default="")
    tags_index = models.TextField(blank=True, default="")  # "|tag one|tag two|", casefolded
    search_vector = SearchDocumentField(null=True, blank=True)
    search_version = models.PositiveIntegerField(default=0)
    # The book version whose refresh (search, vector, translations) was last scheduled / finished.
    refresh_requested_version = models.PositiveIntegerField(default=0)
    refresh_requested_at = models.DateTimeField(null=True, blank=True)
    refreshed_version = models.PositiveIntegerField(default=0)

    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedManager["BookShare"]()

    class Meta:
        indexes = [models.Index(fields=["copy_count"]), models.Index(fields=["published_at"])]

    def __str__(self) -> str:
        return f"sharing of book {self.book_id}"

    @property
    def is_copy(self) -> bool:
        return self.copied_at is not None


class BookVector(models.Model):
    """One vector per non-private book, for library search by meaning (P-5).

    Embedded from the title, description, tags and entry titles
    (``sharing.documents.book_vector_text``); ``content_hash`` is the hash of
    that text, so an unchanged book is never embedded twice. The column is the
    retrieval app's ``EmbeddingField`` (pgvector on PostgreSQL, float32 bytes on
    SQLite), indexed per dimension by migration 0002 (PostgreSQL only).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="book_vectors")
    book = models.OneToOneField(Book, on_delete=models.CASCADE, related_name="library_vector")
    model_name = models.CharField(max_length=100)
    dimension = models.PositiveSmallIntegerField()
    content_hash = models.CharField(max_length=64)
    embedding = EmbeddingField()
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedManager["BookVector"]()

    def __str__(self) -> str:
        return f"library vector of book {self.book_id} ({self.model_name})"


class TranslationStatus(models.TextChoices):
    PENDING = "pending", "Translating"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"


class BookTranslation(models.Model):
    """A book translated for display into one language, at one version (P-4).

    ``entries`` maps entry id (as text) to ``{"title": ..., "content": ...}``.
    Never read by retrieval: the context call always uses the original text.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="book_translations")
    book = models.ForeignKey(Book, on_delete=models.CASCADE, related_name="translations")
    version = models.PositiveIntegerField()
    language = models.CharField(max_length=16)
    source_language = models.CharField(max_length=16)
    status = models.CharField(max_length=16, choices=TranslationStatus.choices, default=TranslationStatus.PENDING)
    title = models.TextField(blank=True, default="")
    description = models.TextField(blank=True, default="")
    entries = models.JSONField(default=dict, blank=True)
    package_version = models.CharField(max_length=32, blank=True, default="")
    error = models.TextField(blank=True, default="")
    requested_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)

    objects = TenantScopedManager["BookTranslation"]()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["book", "version", "language"], name="book_translation_once_per_version")
        ]
        indexes = [models.Index(fields=["status", "requested_at"])]

    def __str__(self) -> str:
        return f"book {self.book_id} v{self.version} in {self.language} ({self.status})"

    def entry_text(self, entry_id: int) -> dict[str, Any] | None:
        found = self.entries.get(str(entry_id))
        return found if isinstance(found, dict) else None
