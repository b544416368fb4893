"""Indexing services, tasks and the vector store on the configured database."""
from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.conf import settings
from django.utils import timezone

from books.events import entries_changed
from books.models import Entry, IndexingState
from books.services import book_create, entry_create, entry_update
from lore_platform.tenancy.actor import Actor
from retrieval.adapter.embedders import DEFAULT_EMBEDDER
from retrieval.adapter.indexing import (
    MOSTLY_INDEXED,
    book_index_coverage,
    book_is_mostly_indexed,
    book_reindex,
    books_mostly_indexed,
    entries_index,
    entries_needing_index,
    entries_pending_sweep,
    entry_index,
)
from retrieval.adapter.models import BookIndexCoverage, EntryVector
from retrieval.adapter.tasks import index_entries, index_pending_sweep, reindex_book
from retrieval.adapter.vector_store import (
    BookMeaningSearch,
    MemoryBookVectorIndex,
    memory_cache_clear,
    vector_index_get,
    window_weights,
)
from retrieval.engine.embeddings import MessageEmbeddingCache
from tests.retrieval.embedding_helpers import CountingEmbedder, real_embedder

pytestmark = pytest.mark.django_db

LORE = [
    ("Frostmere Lake",
     "Frostmere is a frozen lake high in the northern mountains. An ancient dragon sleeps beneath the ice."),
    ("The Gilded Tide",
     "A guild of sea merchants that controls the spice routes and secretly pays pirates to harass rivals."),
    ("Mirelda", "Mirelda is an old seer in the Sunken Marsh who gave up her eyes for visions of the future."),
    ("Gearhaven", "Gearhaven is a clockwork city where gnome engineers build mechanical golems and steam trams."),
    ("The Crimson Plague", "A disease that turns the skin red and brings fever, spread by rats from the port."),
]

BACKENDS = ["memory", "pgvector"] if settings.DATABASE_IS_POSTGRES else ["memory"]


@pytest.fixture(autouse=True)
def _fresh_memory_cache():
    memory_cache_clear()
    yield
    memory_cache_clear()


@pytest.fixture
def actor(tenant_a):
    return Actor(tenant=tenant_a.tenant, user=tenant_a.admin, role="admin")


@pytest.fixture
def book(actor):
    return book_create(actor=actor, title="The Northern Reaches", profile="smart")


@pytest.fixture
def entries(actor, book):
    return [entry_create(actor=actor, book=book, title=title, content=lore) for title, lore in LORE]


@pytest.fixture
def counting():
    return CountingEmbedder(real_embedder())


def _state(entry: Entry) -> str:
    return Entry.objects.for_tenant(entry.tenant_id).get(pk=entry.pk).indexing_state


def _vector(entry: Entry) -> EntryVector | None:
    return EntryVector.objects.for_tenant(entry.tenant_id).filter(entry_id=entry.pk).first()


# --- idempotent indexing -------------------------------------------------------------------


def test_index_an_entry_records_model_dimension_and_hash(entries, counting):
    entry = entries[0]
    assert _state(entry) == IndexingState.PENDING
    report = entry_index(entry.pk, tenant=entry.tenant_id, embedder=counting)
    assert report.embedded == [entry.pk]
    assert len(counting.texts) == 1 and counting.texts[0].startswith("Frostmere Lake\n")
    vector = _vector(entry)
    assert vector.model_name == DEFAULT_EMBEDDER and vector.dimension == 512
    assert vector.content_hash == Entry.objects.for_tenant(entry.tenant_id).get(pk=entry.pk).content_hash
    assert vector.book_id == entry.book_id and vector.tenant_id == entry.tenant_id
    assert vector.embedding.dtype == np.float32 and vector.embedding.shape == (512,)
    np.testing.assert_allclose(vector.embedding, real_embedder().embed_passages(counting.texts)[0], atol=1e-6)
    assert _state(entry) == IndexingState.INDEXED


def test_rerun_is_a_no_op(entries, counting):
    entry = entries[0]
    entry_index(entry.pk, tenant=entry.tenant_id, embedder=counting)
    first = _vector(entry)
    counting.reset()
    report = entry_index(entry.pk, tenant=entry.tenant_id, embedder=counting)
    assert counting.calls == []  # no second embed call
    assert report.current == [entry.pk] and report.embedded == []
    assert _vector(entry).created_at == first.created_at


def test_content_change_re_embeds(actor, entries, counting):
    entry = entries[0]
    entry_index(entry.pk, tenant=entry.tenant_id, embedder=counting)
    before = _vector(entry).embedding
    entry = entry_update(
        actor=actor, entry=entry, content="Frostmere is now a warm lake where pink flamingos nest in summer."
    )
    counting.reset()
    report = entry_index(entry.pk, tenant=entry.tenant_id, embedder=counting)
    assert report.embedded == [entry.pk] and len(counting.texts) == 1
    after = _vector(entry)
    assert after.content_hash == entry.content_hash
    assert not np.allclose(before, after.embedding)
    assert EntryVector.objects.for_tenant(entry.tenant_id).filter(entry_id=entry.pk).count() == 1


def test_alias_change_re_embeds_but_a_non_text_edit_does_not(actor, entries, counting):
    entry = entries[0]
    entry_index(entry.pk, tenant=entry.tenant_id, embedder=counting)
    entry = entry_update(actor=actor, entry=entry, priority=5)
    counting.reset()
    entry_index(entry.pk, tenant=entry.tenant_id, embedder=counting)
    assert counting.calls == []
    entry = entry_update(actor=actor, entry=entry, keys=["the Frozen Lake"])
    entry_index(entry.pk, tenant=entry.tenant_id, embedder=counting)
    assert counting.texts == ["Frostmere Lake (the Frozen Lake)\n" + LORE[0][1]]


def test_model_change_re_indexes(entries, counting):
    entry = entries[0]
    entry_index(entry.pk, tenant=entry.tenant_id, embedder=counting)
    other_model = CountingEmbedder(real_embedder(), name="use-multilingual-v3-retrained")
    report = entry_index(entry.pk, tenant=entry.tenant_id, embedder=other_model)
    assert report.embedded == [entry.pk] and len(other_model.texts) == 1
    assert _vector(entry).model_name == "use-multilingual-v3-retrained"
    # The configured model no longer has a vector for it: coverage drops, the sweep picks it up.
    assert book_index_coverage(entry.book) == 0.0
    assert entry.pk in entries_needing_index(entry.tenant)


def test_book_reindex_batches_and_embeds_only_stale_entries(book, entries, counting):
    report = book_reindex(book.pk, tenant=book.tenant_id, embedder=counting)
    assert sorted(report.embedded) == sorted(e.pk for e in entries)
    assert len(counting.calls) == 1  # one batch for the whole book
    counting.reset()
    assert book_reindex(book.pk, tenant=book.tenant_id, embedder=counting).embedded == []
    assert counting.calls == []
    forced = book_reindex(book.pk, tenant=book.tenant_id, embedder=counting, force=True)
    assert len(forced.embedded) == len(entries)


def test_other_tenant_ids_are_ignored(make_tenant, entries, counting):
    other = make_tenant("Gamma")
    report = entry_index(entries[0].pk, tenant=other.tenant.pk, embedder=counting)
    assert report.missing == [entries[0].pk] and counting.calls == []
    assert _vector(entries[0]) is None


def test_entries_of_every_profile_are_indexed(actor, counting):
    """A chat picks the profile, so a classic book may meet a smart turn: it has vectors beforehand."""
    classic = book_create(actor=actor, title="Keyword book", profile="classic")
    entry = entry_create(actor=actor, book=classic, title="Gate", content="The gate opens at dawn.", keys=["gate"])
    assert _state(entry) == IndexingState.PENDING
    report = entry_index(entry.pk, tenant=entry.tenant_id, embedder=counting)
    assert report.embedded == [entry.pk] and len(counting.calls) == 1
    assert _vector(entry) is not None and _state(entry) == IndexingState.INDEXED


# --- states ----------------------------------------------------------------------------------


def test_indexing_state_transitions(actor, entries, counting):
    entry = entries[0]
    assert _state(entry) == IndexingState.PENDING  # a new entry is "indexing for smart retrieval…"
    entry_index(entry.pk, tenant=entry.tenant_id, embedder=counting)
    assert _state(entry) == IndexingState.INDEXED
    entry = entry_update(actor=actor, entry=entry, content="Frostmere's dragon has woken and flown south to the sea.")
    assert _state(entry) == IndexingState.PENDING  # edited: pending until its new vector exists
    entry_index(entry.pk, tenant=entry.tenant_id, embedder=CountingEmbedder(real_embedder(), fail=True))
    assert _state(entry) == IndexingState.FAILED
    assert _vector(entry).content_hash != entry.content_hash  # the old vector still serves meanwhile
    entry_index(entry.pk, tenant=entry.tenant_id, embedder=counting)
    assert _state(entry) == IndexingState.INDEXED


def test_scheduling_marks_pending_and_runs_after_commit(entries, django_capture_on_commit_callbacks):
    ids = [e.pk for e in entries]
    tenant_id = entries[0].tenant_id
    entries_index(tenant=tenant_id, entry_ids=ids[:1])
    assert _state(entries[0]) == IndexingState.INDEXED
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        entries_changed(book=entries[0].book, entry_ids=ids)
    assert len(callbacks) == 1  # one task for the batch, queued for after the commit
    assert all(_state(e) == IndexingState.PENDING for e in entries)
    assert EntryVector.objects.for_tenant(tenant_id).count() == 1  # nothing ran inside the transaction

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        entries_changed(book=entries[0].book, entry_ids=ids)
    assert len(callbacks) == 1
    assert all(_state(e) == IndexingState.INDEXED for e in entries)
    assert EntryVector.objects.for_tenant(tenant_id).count() == len(entries)


def test_tasks_take_ids_and_are_idempotent(book, entries):
    tenant_id = book.tenant_id
    ids = [e.pk for e in entries]
    first = index_entries.delay(tenant_id, ids).get()
    assert first["embedded"] == len(ids)
    again = index_entries.delay(tenant_id, ids).get()
    assert again["embedded"] == 0 and again["current"] == len(ids)
    assert reindex_book.delay(tenant_id, book.pk).get()["embedded"] == 0
    assert index_entries.acks_late and reindex_book.acks_late and index_pending_sweep.acks_late


def test_sweep_picks_up_entries_left_pending(entries):
    tenant_id = entries[0].tenant_id
    # Fresh pending entries belong to the task their edit scheduled.
    assert entries_needing_index(entries[0].tenant) == []
    Entry.objects.for_tenant(tenant_id).filter(pk__in=[e.pk for e in entries[:2]]).update(
        updated_at=timezone.now() - timedelta(hours=1)
    )
    assert sorted(entries_needing_index(entries[0].tenant)) == sorted(e.pk for e in entries[:2])
    assert index_pending_sweep.delay().get() >= 2
    assert _state(entries[0]) == IndexingState.INDEXED and _state(entries[1]) == IndexingState.INDEXED
    assert _state(entries[2]) == IndexingState.PENDING
    assert entries_pending_sweep() == 0


def test_a_worker_that_starts_indexes_what_a_dead_worker_left_pending_at_once(entries):
    """Issue 33: entries a killed worker or an outage left pending are indexed as soon as a worker is
    back, or the broker (its consumer's catch-up sweep, no grace), not at the beat's sweep after the
    2-minute grace."""
    from config.celery import _catch_up, _CatchUpOnConnect, app

    assert _CatchUpOnConnect in app.steps["consumer"]  # run on every (re)connection of a worker's consumer
    assert entries_needing_index(entries[0].tenant) == []  # fresh: the beat's sweep would leave them
    _catch_up()
    assert all(_state(e) == IndexingState.INDEXED for e in entries)


# --- disabled entries (W-6) -------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_disabled_entry_has_no_vector_and_is_never_returned(actor, book, entries, backend):
    tenant_id = book.tenant_id
    book_reindex(book.pk, tenant=tenant_id)
    index = vector_index_get(book.tenant, backend=backend)
    [query] = real_embedder().embed_queries(["What sleeps under the ice of the mountain lake?"])
    assert index.nearest([book.pk], query, 1)[0][0] == entries[0].pk

    # Disabled but not yet re-indexed (its vector still exists): filtered on the live flag.
    entry_update(actor=actor, entry=entries[0], enabled=False)
    found = [i for i, _ in index.nearest([book.pk], query, 10)]
    assert entries[0].pk not in found and len(found) == len(entries) - 1
    assert entries[0].pk in [i for i, _ in index.nearest([book.pk], query, 10, exclude_disabled=False)]

    # Indexing removes its vector and never embeds it.
    counting = CountingEmbedder(real_embedder())
    report = entry_index(entries[0].pk, tenant=tenant_id, embedder=counting)
    assert report.removed == [entries[0].pk] and counting.calls == []
    assert _vector(entries[0]) is None
    assert entries[0].pk not in [i for i, _ in index.nearest([book.pk], query, 10, exclude_disabled=False)]
    assert entries[0].pk not in entries_needing_index(entries[0].tenant)

    # Re-enabled and scheduled: indexed again.
    entry_update(actor=actor, entry=entries[0], enabled=True)
    entry_index(entries[0].pk, tenant=tenant_id)
    assert index.nearest([book.pk], query, 1)[0][0] == entries[0].pk


@pytest.mark.parametrize("backend", BACKENDS)
def test_nearest_is_scoped_to_books_and_tenant(actor, book, entries, make_tenant, backend):
    other_book = book_create(actor=actor, title="Elsewhere", profile="smart")
    lake = entry_create(
        actor=actor, book=other_book, title="Mirror Lake",
        content="A frozen mountain lake where a dragon sleeps under the ice.",
    )
    book_reindex(book.pk, tenant=book.tenant_id)
    book_reindex(other_book.pk, tenant=book.tenant_id)
    [query] = real_embedder().embed_queries(["¿Qué duerme bajo el hielo del lago de montaña?"])
    index = vector_index_get(book.tenant, backend=backend)
    only_first = index.nearest([book.pk], query, 10)
    assert lake.pk not in [i for i, _ in only_first] and only_first[0][0] == entries[0].pk
    both = index.nearest([book.pk, other_book.pk], query, 2)
    assert {i for i, _ in both} == {entries[0].pk, lake.pk}
    assert both[0][1] >= both[1][1] and all(-1.0 <= s <= 1.0 for _, s in both)
    stranger = make_tenant("Gamma")
    assert vector_index_get(stranger.tenant, backend=backend).nearest([book.pk], query, 5) == []
    assert index.nearest([], query, 5) == [] and index.nearest([book.pk], query, 0) == []
    with pytest.raises(ValueError):
        index.nearest([book.pk], query[:100], 5)


def test_memory_index_sees_new_vectors_without_a_book_edit(book, entries):
    tenant_id = book.tenant_id
    entry_index(entries[1].pk, tenant=tenant_id)
    index = MemoryBookVectorIndex(book.tenant, model_name=DEFAULT_EMBEDDER, dimension=512)
    [query] = real_embedder().embed_queries(["dragon under a frozen lake"])
    assert [i for i, _ in index.nearest([book.pk], query, 5)] == [entries[1].pk]
    entry_index(entries[0].pk, tenant=tenant_id)  # a finished task, no book version bump
    assert index.nearest([book.pk], query, 1)[0][0] == entries[0].pk


# --- coverage (W-7) -------------------------------------------------------------------------------


def test_coverage_and_mostly_indexed(actor, book, counting):
    made = [
        entry_create(
            actor=actor, book=book, title=f"Place {i}", content=f"A village number {i} in the valley of mills."
        )
        for i in range(10)
    ]
    assert book_index_coverage(book) == 0.0 and not book_is_mostly_indexed(book)
    entries_index(tenant=book.tenant_id, entry_ids=[e.pk for e in made[:8]], embedder=counting)
    assert book_index_coverage(book) == pytest.approx(0.8)
    assert not book_is_mostly_indexed(book)
    entry_index(made[8].pk, tenant=book.tenant_id, embedder=counting)
    assert book_index_coverage(book) == pytest.approx(MOSTLY_INDEXED)
    assert book_is_mostly_indexed(book)  # 9 of 10: "mostly" is >= 90% of enabled entries
    # Disabled entries do not count either way.
    entry_update(actor=actor, entry=made[9], enabled=False)
    assert book_index_coverage(book) == 1.0
    # Vectors of another model do not count.
    assert book_index_coverage(book, model_name="another-model") == 0.0


def test_mostly_indexed_for_several_books_and_empty_books(actor, book, entries):
    empty = book_create(actor=actor, title="Empty", profile="smart")
    assert book_index_coverage(empty) == 1.0
    assert books_mostly_indexed(book.tenant, [book.pk, empty.pk]) == {book.pk: False, empty.pk: True}
    book_reindex(book.pk, tenant=book.tenant_id)
    assert books_mostly_indexed(book.tenant, [book.pk, empty.pk]) == {book.pk: True, empty.pk: True}



def test_indexing_keeps_the_figures_a_turn_reads_and_a_newer_version_is_counted(
    actor, book, counting, django_assert_num_queries
):
    made = [entry_create(actor=actor, book=book, title=f"Mill {i}", content=f"Mill number {i} grinds salt.")
            for i in range(10)]
    entries_index(tenant=book.tenant_id, entry_ids=[e.pk for e in made[:9]], embedder=counting)
    book.refresh_from_db()
    row = BookIndexCoverage.objects.for_tenant(book.tenant).get(book=book, model_name=counting.name)
    assert (row.enabled, row.indexed, row.book_version) == (10, 9, book.version)
    # Every turn asks: the stored figures answer in one small query, nothing is counted.
    with django_assert_num_queries(1):
        assert books_mostly_indexed(book.tenant, [book.pk], model_name=counting.name) == {book.pk: True}
    # Written after the figures (a new version whose indexing has not run): counted, never trusted.
    more = [entry_create(actor=actor, book=book, title=f"Well {i}", content=f"Well {i} is deep and its water is cold.") for i in range(5)]
    assert book_index_coverage(book, model_name=counting.name) == pytest.approx(9 / 15)
    assert not book_is_mostly_indexed(book, model_name=counting.name)
    entries_index(tenant=book.tenant_id, entry_ids=[e.pk for e in more], embedder=counting)
    row.refresh_from_db()
    assert (row.enabled, row.indexed) == (15, 14)
    with django_assert_num_queries(1):
        assert book_index_coverage(book, model_name=counting.name) == pytest.approx(14 / 15)



# --- the smart selection's MeaningSearch port ------------------------------------------------------


def test_meaning_search_mostly_indexed_and_rank(book, entries):
    """W-7's signal and W-4's ranking as the smart selection consumes them (string ids)."""
    tenant = book.tenant
    entry_index(entries[3].pk, tenant=tenant)
    window = [
        "We left the city at dawn.",
        "The road north climbs into the mountains.",
        "Is it true something sleeps under the ice of the lake up there?",
    ]
    early = BookMeaningSearch(tenant)
    assert early.mostly_indexed(str(book.pk)) is False  # 1 of 5: the selection falls back to list order
    assert early.rank(book_ids=[str(book.pk)], messages=window, limit=3) == [str(entries[3].pk)]

    book_reindex(book.pk, tenant=tenant)
    late = BookMeaningSearch(tenant)
    assert late.mostly_indexed(str(book.pk)) is True
    ranked = late.rank(book_ids=[str(book.pk)], messages=window, limit=3)
    assert ranked[0] == str(entries[0].pk) and len(ranked) == 3
    assert late.rank(book_ids=[str(book.pk)], messages=["", "  "], limit=3) == []


def test_meaning_search_embeds_only_new_messages(book, entries):
    book_reindex(book.pk, tenant=book.tenant)
    counting = CountingEmbedder(real_embedder())
    cache = MessageEmbeddingCache()
    chat = [f"turn {i}: we talk about the frozen lake and its dragon" for i in range(8)]
    search = BookMeaningSearch(book.tenant, embedder=counting, cache=cache)
    search.rank(book_ids=[str(book.pk)], messages=chat[0:6], limit=5)
    assert len(counting.texts) == 6
    counting.reset()
    search.rank(book_ids=[str(book.pk)], messages=chat[1:7], limit=5)
    search.rank(book_ids=[str(book.pk)], messages=chat[2:8], limit=5)
    assert counting.texts == [chat[6], chat[7]]  # one new message per turn
    assert (cache.hits, cache.misses) == (10, 8)


def test_window_weights_favour_the_newest_message():
    assert window_weights(0) == [] and window_weights(1) == [1.0]
    weights = window_weights(6)
    assert weights[0] == 0.5 and weights[-1] == 1.0 and weights == sorted(weights)
