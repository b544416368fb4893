"""Indexing services: keep one current vector per enabled entry of every book.

A vector is *current* when it was computed by the configured embedder (its
``model_name``) from the entry's present text (its ``content_hash``, the same
``books.models.content_hash`` the books app uses). Indexing is idempotent by
construction: an entry whose vector is current is skipped without embedding, so
retries, duplicate tasks and sweeps never embed the same text twice, and a model
change re-indexes everything because every vector stops being current.

States (``Entry.indexing_state``, W-7): scheduling marks entries *pending*
("indexing for smart retrieval…"); a stored vector makes them *indexed*; an
embedder error makes them *failed*. Disabled entries are never embedded and
their vectors are deleted (W-6); they are left *pending*, which the sweep
ignores, and become indexed again when re-enabled and scheduled.

Every book is indexed, whatever its profile (``books.models.INDEXED_PROFILES``): a
chat picks the profile and reads each attached book its way, so a classic or
server book may meet a smart turn, and its vectors must exist before that turn
(no entry is embedded on the request path, only the turn's messages).

"Mostly indexed" (W-7 fallback): at least :data:`MOSTLY_INDEXED` (90%) of the
book's enabled entries have a vector of the configured model. A vector that is
merely behind an edit still counts: it describes the same entry, and serving it
until the new one lands beats dropping the entry from semantic matches. An empty
book is fully indexed.

Tasks take ids, and the tenant id travels with the entry ids: every query here
starts from ``for_tenant``, so no cross-tenant read is needed.
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from books.events import ENTRIES_PER_MESSAGE
from books.models import INDEXED_PROFILES, Book, Entry, IndexingState, content_hash
from lore_platform.tasks import task_publish
from lore_platform.tenancy.models import Tenant
from retrieval.adapter.embedders import embedder_configured_name, embedder_get
from retrieval.adapter.models import BookIndexCoverage, EntryVector
from retrieval.engine.embeddings import Embedder, Vector, batched, entry_passage_text

logger = logging.getLogger(__name__)

MOSTLY_INDEXED = 0.9
# Entries embedded and written per transaction: a crash loses at most one chunk,
# and no transaction stays open for long.
WRITE_CHUNK = 64
# The sweep leaves fresh pending entries to the task their edit scheduled.
SWEEP_GRACE = timedelta(minutes=2)
SWEEP_LIMIT = 5000

_VECTOR_FIELDS = ("book", "model_name", "dimension", "content_hash", "embedding", "created_at")
_ENTRY_FIELDS = ("id", "tenant_id", "book_id", "title", "content", "keys", "enabled", "indexing_state")


@dataclass(kw_only=True)
class IndexingReport:
    """What one indexing run did, entry ids per outcome."""

    embedded: list[int] = field(default_factory=list)
    current: list[int] = field(default_factory=list)  # vector already current: nothing embedded
    removed: list[int] = field(default_factory=list)  # disabled, or book not smart: vector deleted
    superseded: list[int] = field(default_factory=list)  # edited while embedding: the newer task indexes it
    failed: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)  # deleted, or not this tenant's


def entry_content_hash(entry: Entry) -> str:
    return content_hash(entry.title, entry.content, list(entry.keys or []))


def entry_passage(entry: Entry) -> str:
    return entry_passage_text(entry.title, entry.content, [str(k) for k in entry.keys or []])


# --- scheduling ---------------------------------------------------------------


def book_schedule_indexing(*, tenant: Tenant | int, book_id: int) -> None:
    """Index a whole book after commit (profile changed to smart, model changed, import)."""
    from retrieval.adapter.tasks import reindex_book

    tenant_id = _tenant_id(tenant)
    transaction.on_commit(lambda: task_publish(reindex_book, tenant_id, book_id), robust=True)


# --- indexing -------------------------------------------------------------------


def entry_index(entry_id: int, *, tenant: Tenant | int, embedder: Embedder | None = None) -> IndexingReport:
    """Bring one entry's vector up to date (see :func:`entries_index`)."""
    return entries_index(tenant=tenant, entry_ids=[entry_id], embedder=embedder)


def book_reindex(
    book_id: int, *, tenant: Tenant | int, embedder: Embedder | None = None, force: bool = False
) -> IndexingReport:
    """Bring every entry of a book up to date; ``force`` re-embeds even current vectors."""
    resolved = _tenant_resolve(tenant)
    if resolved is None:
        return IndexingReport()
    ids = list(Entry.objects.for_tenant(resolved).filter(book_id=book_id).values_list("pk", flat=True))
    return entries_index(tenant=resolved, entry_ids=ids, embedder=embedder, force=force)


def entries_index(
    *,
    tenant: Tenant | int,
    entry_ids: Collection[int],
    embedder: Embedder | None = None,
    force: bool = False,
) -> IndexingReport:
    """Idempotently index entries of one tenant; returns what happened to each id.

    Enabled entries of indexed books (every profile) get a current vector (embedding only the stale
    ones, in batches); other entries lose theirs. Database errors propagate (the
    task retries); embedder errors mark the entries failed and do not.
    """
    embedder = embedder if embedder is not None else embedder_get()
    report = IndexingReport()
    wanted = sorted({int(i) for i in entry_ids})
    resolved = _tenant_resolve(tenant)
    if resolved is None:
        report.missing = wanted
        return report
    if not wanted:
        return report
    touched: set[int] = set()
    try:
        _entries_index(resolved, wanted, embedder, force, report, touched)
    finally:
        # W-7's figures follow the indexing itself: every run recounts the books it touched.
        if touched:
            books_coverage_recount(resolved, touched, model_name=embedder.name)
    return report


def _entries_index(
    resolved: Tenant, wanted: list[int], embedder: Embedder, force: bool, report: IndexingReport, touched: set[int]
) -> None:
    entries = {
        e.pk: e
        for e in Entry.objects.for_tenant(resolved)
        .filter(pk__in=wanted)
        .select_related("book")
        .only(*_ENTRY_FIELDS, "book__profile")
    }
    report.missing = [i for i in wanted if i not in entries]
    touched.update(entry.book_id for entry in entries.values())
    vectors = {
        v.entry_id: v
        for v in EntryVector.objects.for_tenant(resolved)
        .filter(entry_id__in=entries)
        .only("id", "entry_id", "book_id", "model_name", "content_hash")
    }

    to_embed: list[tuple[Entry, str]] = []
    unindexable: list[int] = []
    moved: dict[int, int] = {}
    for entry_id, entry in entries.items():
        if not entry.enabled or entry.book.profile not in INDEXED_PROFILES:
            unindexable.append(entry_id)
            continue
        digest = entry_content_hash(entry)
        vector = vectors.get(entry_id)
        if (
            not force
            and vector is not None
            and vector.content_hash == digest
            and vector.model_name == embedder.name
        ):
            report.current.append(entry_id)
            if vector.book_id != entry.book_id:
                moved[vector.pk] = entry.book_id
            continue
        to_embed.append((entry, digest))

    if unindexable:
        _vectors_remove(resolved, unindexable)
        report.removed.extend(unindexable)
        # The state says why there is no vector (W-6), not "pending" for ever (issue 14).
        _states_set(resolved, unindexable, IndexingState.DISABLED)
    for vector_id, book_id in moved.items():
        EntryVector.objects.for_tenant(resolved).filter(pk=vector_id).update(book_id=book_id)
    _states_set(resolved, report.current, IndexingState.INDEXED)

    for chunk in batched(to_embed, WRITE_CHUNK):
        try:
            embedded = embedder.embed_passages([entry_passage(entry) for entry, _ in chunk])
        except Exception:  # the model, not the database: retrying the same text will not help
            logger.exception("embedding failed for entries %s", [entry.pk for entry, _ in chunk])
            failed = [entry.pk for entry, _ in chunk]
            _states_set(resolved, failed, IndexingState.FAILED)
            report.failed.extend(failed)
            continue
        _vectors_write(resolved, embedder, chunk, embedded, report)


def _vectors_write(
    tenant: Tenant,
    embedder: Embedder,
    chunk: list[tuple[Entry, str]],
    embedded: Sequence[Vector],
    report: IndexingReport,
) -> None:
    """Store vectors for entries whose text did not change while they were embedded."""
    ids = [entry.pk for entry, _ in chunk]
    with transaction.atomic():
        locked = Entry.objects.for_tenant(tenant).filter(pk__in=ids).select_related("book")
        if transaction.get_connection().features.has_select_for_update:
            # Serialises with a concurrent edit of the same entry (PostgreSQL).
            locked = locked.select_for_update(of=("self",))
        now_rows = {e.pk: e for e in locked.only(*_ENTRY_FIELDS, "book__profile")}
        existing = {
            v.entry_id: v
            for v in EntryVector.objects.for_tenant(tenant).filter(entry_id__in=ids).only("id", "entry_id")
        }
        to_create: list[EntryVector] = []
        to_update: list[EntryVector] = []
        done: list[int] = []
        now = timezone.now()
        for (entry, digest), vector in zip(chunk, embedded):
            current = now_rows.get(entry.pk)
            if (
                current is None
                or not current.enabled
                or current.book.profile not in INDEXED_PROFILES
                or entry_content_hash(current) != digest
            ):
                report.superseded.append(entry.pk)
                continue
            values = {
                "book_id": current.book_id,
                "model_name": embedder.name,
                "dimension": int(len(vector)),
                "content_hash": digest,
                "embedding": vector,
                "created_at": now,
            }
            row = existing.get(entry.pk)
            if row is None:
                to_create.append(EntryVector(tenant=tenant, entry_id=entry.pk, **values))
            else:
                for name, value in values.items():
                    setattr(row, name, value)
                to_update.append(row)
            done.append(entry.pk)
        if to_create:
            EntryVector.objects.for_tenant(tenant).bulk_create(to_create)
        if to_update:
            EntryVector.objects.for_tenant(tenant).bulk_update(to_update, fields=list(_VECTOR_FIELDS))
        _states_set(tenant, done, IndexingState.INDEXED)
    report.embedded.extend(done)


def _vectors_remove(tenant: Tenant, entry_ids: list[int]) -> None:
    EntryVector.objects.for_tenant(tenant).filter(entry_id__in=entry_ids).delete()
    # Not "indexed" (no vector) and not failed: pending, which the sweep skips for
    # disabled entries and which is true again once the entry is re-enabled.
    _states_set(tenant, entry_ids, IndexingState.PENDING)


def _states_set(tenant: Tenant, entry_ids: list[int], state: str) -> None:
    if entry_ids:
        # update(): indexing is not an edit, so updated_at and the book version stay.
        Entry.objects.for_tenant(tenant).filter(pk__in=entry_ids).exclude(indexing_state=state).update(
            indexing_state=state
        )


def _tenant_resolve(tenant: Tenant | int) -> Tenant | None:
    """The tenant itself, or loaded from its id (tasks carry ids); None when it is gone."""
    if isinstance(tenant, Tenant):
        return tenant
    return Tenant.objects.filter(pk=int(tenant)).first()


def _tenant_id(tenant: Tenant | int) -> int:
    return int(tenant.pk if isinstance(tenant, Tenant) else tenant)


# --- coverage (W-7) ---------------------------------------------------------------

# Coverage is asked for on every smart turn. Indexing keeps it as numbers
# (``BookIndexCoverage``); a turn reads them in one small query and counts a book
# itself only when its version is newer than the figures (an edit whose indexing
# has not run yet, or a book no indexing has touched), once per version per process:
# counting a 2,000-entry book costs 3-14 ms.
_COVERAGE_CACHE_BOOKS = 1024
_coverage_cache: OrderedDict[tuple[int, int, str], tuple[tuple[Any, ...], float]] = OrderedDict()
_coverage_lock = threading.Lock()


def coverage_cache_clear() -> None:
    with _coverage_lock:
        _coverage_cache.clear()


def _coverage_count(tenant: Tenant, book_ids: Collection[int], model_name: str) -> dict[int, tuple[int, int]]:
    """Per book: (enabled entries, of them with a vector of the model); books with none are (0, 0)."""
    counts = {int(book_id): (0, 0) for book_id in book_ids}
    rows = (
        Entry.objects.for_tenant(tenant)
        .filter(book_id__in=list(counts), enabled=True)
        .values("book_id")
        .annotate(total=Count("pk"), indexed=Count("pk", filter=Q(vector__model_name=model_name)))
        .values_list("book_id", "total", "indexed")
    )
    for book_id, total, indexed in rows:
        counts[book_id] = (total, indexed)
    return counts


def _share(enabled: int, indexed: int) -> float:
    return indexed / enabled if enabled else 1.0


def books_coverage_recount(tenant: Tenant, book_ids: Collection[int], *, model_name: str) -> None:
    """Count these books' coverage again and store it (``BookIndexCoverage``); indexing calls it.

    Every model's figures of these books are recounted, ``model_name``'s created if
    missing: an entry has one vector, so writing one of a new model takes it from
    the old one. The rows are locked first, so concurrent recounts of one book run
    one after the other and the last stored is the last counted; the version is
    read under the lock and before the entries, so figures are never newer than
    the version they claim.
    """
    wanted = sorted({int(b) for b in book_ids})
    coverage = BookIndexCoverage.objects.for_tenant(tenant)
    with transaction.atomic():
        present = list(Book.objects.for_tenant(tenant).filter(pk__in=wanted).values_list("pk", flat=True))
        coverage.bulk_create(
            [BookIndexCoverage(tenant=tenant, book_id=b, model_name=model_name) for b in present],
            ignore_conflicts=True,
        )
        rows = list(coverage.select_for_update().filter(book_id__in=present).order_by("book_id", "model_name"))
        versions = dict(Book.objects.for_tenant(tenant).filter(pk__in=present).values_list("pk", "version"))
        counts = {name: _coverage_count(tenant, versions, name) for name in sorted({r.model_name for r in rows})}
        now = timezone.now()
        for row in rows:
            row.book_version = versions[row.book_id]
            row.enabled, row.indexed = counts[row.model_name][row.book_id]
            row.counted_at = now
        coverage.bulk_update(rows, fields=["book_version", "enabled", "indexed", "counted_at"])


@dataclass(frozen=True, slots=True)
class _Figures:
    version: int  # the book's present version
    counted_version: int | None  # None: no indexing has counted this book for the model
    enabled: int
    indexed: int
    counted_at: Any

    @property
    def current(self) -> bool:
        return self.counted_version == self.version

    @property
    def stamp(self) -> tuple[Any, ...]:
        """Changes whenever the book's entries (its version) or its vectors (a recount) change."""
        return (self.version, self.counted_at)


def _figures(tenant: Tenant, book_ids: list[int], model_name: str) -> dict[int, _Figures]:
    """The stored figures with each book's present version: one query (two for a book never counted)."""
    found = {
        book_id: _Figures(version, counted, enabled, indexed, counted_at)
        for book_id, version, counted, enabled, indexed, counted_at
        in BookIndexCoverage.objects.for_tenant(tenant).filter(book_id__in=book_ids, model_name=model_name)
        .values_list("book_id", "book__version", "book_version", "enabled", "indexed", "counted_at")
    }
    missing = [b for b in book_ids if b not in found]
    if missing:
        for book_id, version in Book.objects.for_tenant(tenant).filter(pk__in=missing).values_list("pk", "version"):
            found[book_id] = _Figures(version, None, 0, 0, None)
    return found


def books_vector_stamps(tenant: Tenant, book_ids: Collection[int], *, model_name: str) -> dict[int, tuple[Any, ...]]:
    """Per book, a value that changes whenever its entries or its vectors of the model change.

    The book's version (every entry write bumps it, enabling and disabling
    included) and when indexing last counted it (every indexing run that writes
    or removes vectors recounts the books it touched). One small query.
    """
    return {book_id: f.stamp for book_id, f in _figures(tenant, [int(b) for b in book_ids], model_name).items()}


def books_index_coverage(
    tenant: Tenant, book_ids: Collection[int], *, model_name: str | None = None
) -> dict[int, float]:
    """Per book: the share of enabled entries that have a vector of the model (1.0 if none).

    Read from the figures indexing keeps (one query); a book whose version moved
    past them is counted here, once per version and figures per process.
    """
    name = model_name or embedder_configured_name()
    wanted = [int(b) for b in book_ids]
    coverage = {book_id: 1.0 for book_id in wanted}
    figures = _figures(tenant, wanted, name)
    stale: dict[int, tuple[Any, ...]] = {}
    with _coverage_lock:
        for book_id, found in figures.items():
            if found.current:
                coverage[book_id] = _share(found.enabled, found.indexed)
                continue
            stamp = found.stamp
            cached = _coverage_cache.get((tenant.pk, book_id, name))
            if cached is not None and cached[0] == stamp:
                coverage[book_id] = cached[1]
            else:
                stale[book_id] = stamp
    if not stale:
        return coverage
    counted = _coverage_count(tenant, stale, name)
    with _coverage_lock:
        for book_id, stamp in stale.items():
            coverage[book_id] = _share(*counted[book_id])
            _coverage_cache[(tenant.pk, book_id, name)] = (stamp, coverage[book_id])
            _coverage_cache.move_to_end((tenant.pk, book_id, name))
        while len(_coverage_cache) > _COVERAGE_CACHE_BOOKS:
            _coverage_cache.popitem(last=False)
    return coverage


def book_index_coverage(book: Book, *, model_name: str | None = None) -> float:
    """Share (0.0-1.0) of the book's enabled entries that have a vector of the configured model."""
    return books_index_coverage(book.tenant, [book.pk], model_name=model_name)[book.pk]


def book_is_mostly_indexed(book: Book, *, model_name: str | None = None) -> bool:
    """W-7: semantic matching is trusted once ≥ 90% of enabled entries have a vector."""
    return book_index_coverage(book, model_name=model_name) >= MOSTLY_INDEXED


def books_mostly_indexed(
    tenant: Tenant, book_ids: Collection[int], *, model_name: str | None = None
) -> dict[int, bool]:
    """:func:`book_is_mostly_indexed` for several books in one query (per turn)."""
    return {
        book_id: value >= MOSTLY_INDEXED
        for book_id, value in books_index_coverage(tenant, book_ids, model_name=model_name).items()
    }


# --- sweep ---------------------------------------------------------------------------


def entries_needing_index(
    tenant: Tenant, *, grace: timedelta = SWEEP_GRACE, model_name: str | None = None
) -> list[int]:
    """Enabled smart entries left behind: pending past the grace period, or with no
    vector of the configured model (a model change, a lost task). Entries pending
    for less than ``grace`` are left to the task their edit scheduled; failed ones
    to an explicit re-index."""
    name = model_name or embedder_configured_name()
    fresh = Q(indexing_state=IndexingState.PENDING, updated_at__gte=timezone.now() - grace)
    needs = Q(indexing_state=IndexingState.PENDING) | (
        ~Q(vector__model_name=name) & ~Q(indexing_state=IndexingState.FAILED)
    )
    return list(
        Entry.objects.for_tenant(tenant)
        .filter(enabled=True, book__profile__in=INDEXED_PROFILES)
        .filter(needs)
        .exclude(fresh)
        .order_by("pk")
        .values_list("pk", flat=True)[:SWEEP_LIMIT]
    )


def entries_pending_sweep(*, grace: timedelta = SWEEP_GRACE) -> int:
    """Schedule indexing for every tenant's left-behind entries; returns how many."""
    from retrieval.adapter.tasks import index_entries

    scheduled = 0
    for tenant in Tenant.objects.order_by("pk"):
        ids = entries_needing_index(tenant, grace=grace)
        for chunk in batched(ids, ENTRIES_PER_MESSAGE):
            task_publish(index_entries, tenant.pk, chunk)
        scheduled += len(ids)
    return scheduled
