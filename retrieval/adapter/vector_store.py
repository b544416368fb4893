"""The engine's ``VectorIndex`` port on the database: pgvector, or in process.

``settings.VECTOR_BACKEND`` picks the implementation (:func:`vector_index_get`):

- ``"pgvector"`` (PostgreSQL): one SQL query, ``ORDER BY embedding <=> query
  LIMIT k`` over the partial HNSW index of the model's dimension (migration
  0003), with pgvector's iterative index scan so filtering by book and by
  ``enabled`` still yields ``k`` rows.
- ``"memory"`` (SQLite, the embedded default): each book's vectors are loaded
  once into a :class:`MemoryVectorIndex` and cached per process under the
  book's vector stamp (``indexing.books_vector_stamps``: its version and when
  indexing last counted it), so an edit or a finished indexing task is seen on
  the next turn.

Both are bound to one tenant and one embedder (model name + dimension): vectors
of another model are never compared with this model's queries. Disabled entries
are filtered against the live ``enabled`` flag (W-6), not only by their vectors
having been deleted.

:class:`BookMeaningSearch` puts the pieces together for the smart selection
(``retrieval.engine.smart.MeaningSearch``): the W-7 "mostly indexed" check and
ranking by meaning over the message window, embedding only messages the
process-wide cache has not seen.
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Collection, Sequence
from typing import Any

from django.conf import settings
from django.db import connection

from books.models import Entry
from lore_platform.tenancy.models import Tenant
from retrieval.adapter.embedders import embedder_get, message_cache_get
from retrieval.adapter.indexing import books_mostly_indexed, books_vector_stamps, coverage_cache_clear
from retrieval.adapter.models import EntryVector, vector_to_pg_text
from retrieval.engine.embeddings import (
    Embedder,
    MemoryVectorIndex,
    MessageEmbeddingCache,
    Vector,
    VectorIndex,
    as_vector,
    vectors_mean,
)

# HNSW candidate list size; 40 (pgvector's default) loses recall once filters drop rows.
HNSW_EF_SEARCH = 100
MEMORY_CACHE_BOOKS = 64


def vector_index_get(tenant: Tenant, *, embedder: Embedder | None = None, backend: str | None = None) -> VectorIndex:
    """The configured ``VectorIndex`` for a tenant's books and the configured embedder."""
    embedder = embedder if embedder is not None else embedder_get()
    backend = backend or settings.VECTOR_BACKEND
    if backend == "pgvector":
        return PgVectorIndex(tenant, model_name=embedder.name, dimension=embedder.dimension)
    if backend == "memory":
        return MemoryBookVectorIndex(tenant, model_name=embedder.name, dimension=embedder.dimension)
    raise ValueError(f"unknown VECTOR_BACKEND {backend!r}")


def _check_query(query_vector: Vector, dimension: int) -> Vector:
    query = as_vector(query_vector)
    if query.shape[0] != dimension:
        raise ValueError(f"query vector has dimension {query.shape[0]}, the index holds {dimension}")
    return query


class PgVectorIndex:
    """Nearest entries with pgvector (PostgreSQL)."""

    def __init__(self, tenant: Tenant, *, model_name: str, dimension: int) -> None:
        self.tenant_id = int(tenant.pk)
        self.model_name = model_name
        self.dimension = int(dimension)

    def query_sql(self, *, exclude_disabled: bool = True) -> str:
        """The search statement (exposed so the pgvector test can EXPLAIN exactly it)."""
        d = self.dimension  # an int, inlined: the cast and the index predicate need literals
        distance = f"(ev.embedding::vector({d})) <=> %s::vector({d})"
        enabled = "AND e.enabled" if exclude_disabled else ""
        return (
            f"SELECT ev.entry_id, {distance} AS distance "
            f"FROM {EntryVector._meta.db_table} ev JOIN {Entry._meta.db_table} e ON e.id = ev.entry_id "
            f"WHERE ev.dimension = {d} AND ev.model_name = %s AND ev.tenant_id = %s AND e.tenant_id = %s "
            f"AND e.book_id = ANY(%s) {enabled} "
            f"ORDER BY {distance} LIMIT %s"
        )

    def query_params(self, book_ids: Collection[int], query_vector: Vector, k: int) -> list[Any]:
        text = vector_to_pg_text(query_vector)
        return [text, self.model_name, self.tenant_id, self.tenant_id, [int(b) for b in book_ids], text, int(k)]

    def nearest(
        self,
        book_ids: Collection[int],
        query_vector: Vector,
        k: int,
        exclude_disabled: bool = True,
    ) -> list[tuple[int, float]]:
        query = _check_query(query_vector, self.dimension)
        if k <= 0 or not book_ids:
            return []
        with connection.cursor() as cursor:
            _hnsw_settings(cursor)
            cursor.execute(self.query_sql(exclude_disabled=exclude_disabled), self.query_params(book_ids, query, k))
            rows = cursor.fetchall()
        return [(int(entry_id), 1.0 - float(distance)) for entry_id, distance in rows]


# Database connections whose session already has the HNSW settings (set outside any transaction).
_hnsw_sessions: weakref.WeakSet[Any] = weakref.WeakSet()
_HNSW_SET = "SELECT set_config('hnsw.iterative_scan', 'strict_order', %s), set_config('hnsw.ef_search', %s, %s)"


def _hnsw_settings(cursor: Any) -> None:
    """strict_order: keep scanning the graph until k rows pass the filters, in distance order.

    Set once per connection when no transaction is open (autocommit: the session
    keeps it), so a turn's search is one round trip. Inside a transaction it is set
    for that transaction only: a session setting made there would be undone by a
    rollback while this process still believed it set.
    """
    raw = connection.connection
    if connection.in_atomic_block:
        cursor.execute(_HNSW_SET, [True, str(HNSW_EF_SEARCH), True])
    elif raw not in _hnsw_sessions:
        cursor.execute(_HNSW_SET, [False, str(HNSW_EF_SEARCH), False])
        _hnsw_sessions.add(raw)


class _BookVectors:
    __slots__ = ("stamp", "index", "disabled")

    def __init__(self, stamp: tuple[Any, ...], index: MemoryVectorIndex, disabled: frozenset[int]) -> None:
        self.stamp = stamp
        self.index = index
        self.disabled = disabled


_cache: OrderedDict[tuple[int, int, str], _BookVectors] = OrderedDict()
_cache_lock = threading.Lock()


def memory_cache_clear() -> None:
    """Forget every cached book index and coverage figure (tests, operator tooling)."""
    with _cache_lock:
        _cache.clear()
    coverage_cache_clear()


class MemoryBookVectorIndex:
    """Nearest entries with per-book in-process indexes (SQLite, the embedded default)."""

    def __init__(self, tenant: Tenant, *, model_name: str, dimension: int) -> None:
        self.tenant = tenant
        self.model_name = model_name
        self.dimension = int(dimension)

    def nearest(
        self,
        book_ids: Collection[int],
        query_vector: Vector,
        k: int,
        exclude_disabled: bool = True,
    ) -> list[tuple[int, float]]:
        query = _check_query(query_vector, self.dimension)
        if k <= 0 or not book_ids:
            return []
        found: list[tuple[int, float]] = []
        for book in self._book_indexes(book_ids):
            found.extend(book.index.nearest(query, k, excluded_ids=book.disabled if exclude_disabled else ()))
        found.sort(key=lambda pair: (-pair[1], pair[0]))
        return found[:k]

    def _book_indexes(self, book_ids: Collection[int]) -> list[_BookVectors]:
        stamps = books_vector_stamps(self.tenant, book_ids, model_name=self.model_name)
        books = []
        for book_id, stamp in stamps.items():
            key = (self.tenant.pk, book_id, self.model_name)
            with _cache_lock:
                cached = _cache.get(key)
                if cached is not None and cached.stamp == stamp:
                    _cache.move_to_end(key)
                    books.append(cached)
                    continue
            loaded = _BookVectors(stamp, self._load(book_id), self._disabled(book_id))
            with _cache_lock:
                _cache[key] = loaded
                _cache.move_to_end(key)
                while len(_cache) > MEMORY_CACHE_BOOKS:
                    _cache.popitem(last=False)
            books.append(loaded)
        return books

    def _disabled(self, book_id: int) -> frozenset[int]:
        # The live flag (W-6): a disabled entry keeps its vector until indexing removes it.
        # Enabling or disabling bumps the version, so the stamp reloads this with the vectors.
        return frozenset(
            Entry.objects.for_tenant(self.tenant).filter(book_id=book_id, enabled=False).values_list("pk", flat=True)
        )

    def _load(self, book_id: int) -> MemoryVectorIndex:
        rows = (
            EntryVector.objects.for_tenant(self.tenant)
            .filter(entry__book_id=book_id, model_name=self.model_name, dimension=self.dimension)
            .values_list("entry_id", "embedding")
        )
        return MemoryVectorIndex.from_items(self.dimension, rows)


def window_weights(count: int) -> list[float]:
    """Recency weights for a message window, oldest first: 0.5 rising to 1.0 for the newest."""
    if count <= 1:
        return [1.0] * count
    return [0.5 + 0.5 * i / (count - 1) for i in range(count)]


class BookMeaningSearch:
    """The smart selection's ``MeaningSearch`` port on the configured embedder and vector index.

    Engine ids are strings (``str(pk)``). One instance serves one turn: the
    mostly-indexed answers are computed once per book and kept.
    """

    def __init__(
        self,
        tenant: Tenant,
        *,
        embedder: Embedder | None = None,
        index: VectorIndex | None = None,
        cache: MessageEmbeddingCache | None = None,
    ) -> None:
        self.tenant = tenant
        # "is None", not "or": an empty cache is falsy (it has a length).
        self.embedder = embedder if embedder is not None else embedder_get()
        self.index = index if index is not None else vector_index_get(tenant, embedder=self.embedder)
        self.cache = cache if cache is not None else message_cache_get()
        self._mostly: dict[int, bool] = {}

    def mostly_indexed(self, book_id: str) -> bool:
        """W-7: at least 90% of the book's enabled entries have a vector of this model."""
        key = int(book_id)
        if key not in self._mostly:
            self._mostly.update(books_mostly_indexed(self.tenant, [key], model_name=self.embedder.name))
        return self._mostly[key]

    def query_vector(self, messages: Sequence[str]) -> Vector | None:
        """One vector for the window: recency-weighted mean of the messages' cached vectors."""
        texts = [m for m in messages if m.strip()]
        if not texts:
            return None
        vectors = self.cache.embed_queries(self.embedder, texts)
        return vectors_mean(vectors, window_weights(len(vectors)))

    def rank(self, *, book_ids: Sequence[str], messages: Sequence[str], limit: int) -> list[str]:
        """Enabled entries of these books, nearest in meaning to the window first."""
        return [entry_id for entry_id, _ in self.rank_scored(book_ids=book_ids, messages=messages, limit=limit)]

    def rank_scored(self, *, book_ids: Sequence[str], messages: Sequence[str], limit: int) -> list[tuple[str, float]]:
        query = self.query_vector(messages)
        if query is None or limit <= 0 or not book_ids:
            return []
        found = self.index.nearest([int(b) for b in book_ids], query, limit)
        return [(str(entry_id), score) for entry_id, score in found]


class ChatMeaningSearch:
    """``MeaningSearch`` over a chat's books, each searched in its owner's tenant.

    A public book attached from another tenant (W-9) keeps its vectors in its
    owner's tenant; results from every tenant are merged by similarity.
    """

    def __init__(self, books: Sequence[Any], *, embedder: Embedder | None = None,
                 cache: MessageEmbeddingCache | None = None) -> None:
        self.embedder = embedder if embedder is not None else embedder_get()
        self.cache = cache if cache is not None else message_cache_get()
        self._tenant_of: dict[str, Tenant] = {str(book.pk): book.tenant for book in books}
        self._searches: dict[int, BookMeaningSearch] = {}

    def _search(self, tenant: Tenant) -> BookMeaningSearch:
        if tenant.pk not in self._searches:
            self._searches[tenant.pk] = BookMeaningSearch(tenant, embedder=self.embedder, cache=self.cache)
        return self._searches[tenant.pk]

    def mostly_indexed(self, book_id: str) -> bool:
        tenant = self._tenant_of.get(book_id)
        return tenant is not None and self._search(tenant).mostly_indexed(book_id)

    def window_embed(self, messages: Sequence[str]) -> None:
        """Embed a turn's window ahead of the selection (before a chat is locked); the
        message cache then answers ``rank`` without calling the model."""
        texts = [m for m in messages if m.strip()]
        # The selection ranks by meaning only when every book is mostly indexed (W-7).
        if texts and self._tenant_of and all(self.mostly_indexed(book_id) for book_id in self._tenant_of):
            self.cache.embed_queries(self.embedder, texts)

    def rank(self, *, book_ids: Sequence[str], messages: Sequence[str], limit: int) -> list[str]:
        by_tenant: dict[int, list[str]] = {}
        for book_id in book_ids:
            tenant = self._tenant_of.get(book_id)
            if tenant is not None:
                by_tenant.setdefault(tenant.pk, []).append(book_id)
        found: list[tuple[str, float]] = []
        for tenant_id, ids in by_tenant.items():
            found += self._searches.get(tenant_id, self._search(self._tenant_of[ids[0]])).rank_scored(
                book_ids=ids, messages=messages, limit=limit
            )
        found.sort(key=lambda item: -item[1])
        return [entry_id for entry_id, _ in found[:limit]]
