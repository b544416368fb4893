"""Models of the retrieval app: one vector per entry.

One model, one column, both databases. :class:`EmbeddingField` is a pgvector
``vector`` column on PostgreSQL and a ``blob`` of little-endian float32 on
SQLite; Python code sees a 1-D float32 numpy array either way. The column is
untyped (``vector``, no dimension) so vectors of different models can coexist
while a model change re-indexes; each known dimension gets a *partial expression*
HNSW index, ``USING hnsw ((embedding::vector(N)) vector_cosine_ops) WHERE
dimension = N`` (migration 0003, PostgreSQL only), which is pgvector's documented
way to index a column holding several dimensions. ``vector_store.PgVectorIndex``
queries with the same cast so the planner can use it.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from books.models import Book, Entry
from lore_platform.tenancy.models import Tenant
from lore_platform.tenancy.scoping import TenantScopedManager
from retrieval.engine.embeddings import Vector

# Dimensions that have an HNSW index on PostgreSQL (migration 0003). A model with
# another dimension still works (exact search), but needs a migration adding its
# index before books get big: 512 = USE multilingual v3, 384 = multilingual-e5-small.
INDEXED_DIMENSIONS = (512, 384)


def vector_to_pg_text(vector: Vector) -> str:
    """pgvector's text input format. ``%.9g`` round-trips float32 exactly."""
    return "[" + ",".join(f"{x:.9g}" for x in vector.tolist()) + "]"


class EmbeddingField(models.Field):
    """A float32 vector: pgvector ``vector`` on PostgreSQL, ``blob`` elsewhere."""

    description = "Embedding vector (pgvector on PostgreSQL, float32 bytes elsewhere)"

    def db_type(self, connection: BaseDatabaseWrapper) -> str:
        return "vector" if connection.vendor == "postgresql" else "blob"

    def get_db_prep_value(self, value: Any, connection: BaseDatabaseWrapper, prepared: bool = False) -> Any:
        if value is None:
            return None
        vector = np.asarray(value, dtype=np.float32)
        if vector.ndim != 1:
            raise ValueError(f"an embedding is 1-D, got shape {vector.shape}")
        if connection.vendor == "postgresql":
            return vector_to_pg_text(vector)
        return vector.astype("<f4").tobytes()

    def from_db_value(self, value: Any, expression: Any, connection: BaseDatabaseWrapper) -> Vector | None:
        return self.to_python(value)

    def to_python(self, value: Any) -> Vector | None:
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray, memoryview)):
            return np.frombuffer(bytes(value), dtype="<f4").astype(np.float32)
        if isinstance(value, str):  # pgvector text output: "[0.1,0.2,...]"
            return np.array(value.strip("[]").split(","), dtype=np.float32)
        if hasattr(value, "to_numpy"):  # pgvector.Vector when its psycopg adapter is registered
            return np.asarray(value.to_numpy(), dtype=np.float32)
        return np.asarray(value, dtype=np.float32)


class EntryVector(models.Model):
    """The current embedding of one entry under one model.

    Written only by ``retrieval.adapter.indexing``. ``content_hash`` is
    ``books.models.content_hash`` of what was embedded and ``model_name`` the
    embedder that did it: when either differs from the entry and the configured
    embedder, the vector is stale and the entry is re-embedded (a retry or a sweep
    never embeds the same text twice). Disabled entries have no row (W-6).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="entry_vectors")
    entry = models.OneToOneField(Entry, on_delete=models.CASCADE, related_name="vector")
    # Denormalised from the entry for per-book counts (coverage); searches join the entry itself.
    book = models.ForeignKey(Book, on_delete=models.CASCADE, related_name="entry_vectors")
    model_name = models.CharField(max_length=100)
    dimension = models.PositiveSmallIntegerField()
    content_hash = models.CharField(max_length=64)
    embedding = EmbeddingField()
    # When this vector was (re)computed; also how the in-process index notices changes.
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedManager["EntryVector"]()

    class Meta:
        # Covers the per-turn freshness check of the in-process index (count and newest
        # per book and model) without touching the vectors themselves.
        indexes = [models.Index(fields=["book", "model_name", "created_at"], name="entryvector_book_model_at")]

    def __str__(self) -> str:
        return f"vector of entry {self.entry_id} ({self.model_name})"


class BookIndexCoverage(models.Model):
    """W-7's figures for one book and one embedding model: its enabled entries, and how many have a vector.

    Written only by ``retrieval.adapter.indexing``: every indexing run recounts the books it
    touched, under this row's lock (two workers never store an older count over a
    newer one). A smart turn reads the numbers instead of counting the book;
    ``book_version`` is the version they were counted at, so an edit whose indexing
    has not run yet (a new version) is counted again by the turn, never trusted.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="book_index_coverage")
    book = models.ForeignKey(Book, on_delete=models.CASCADE, related_name="index_coverage")
    model_name = models.CharField(max_length=100)
    book_version = models.PositiveIntegerField(default=0)
    enabled = models.PositiveIntegerField(default=0)
    indexed = models.PositiveIntegerField(default=0)
    # When the figures were counted: the in-process vector index also reloads when it changes.
    counted_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedManager["BookIndexCoverage"]()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["book", "model_name"], name="bookindexcoverage_book_model")]

    def __str__(self) -> str:
        return f"coverage of book {self.book_id} ({self.model_name}): {self.indexed}/{self.enabled}"
