"""pgvector on real PostgreSQL: the HNSW index exists, is used, and finds the right entries."""
from __future__ import annotations

import pytest
from django.db import connection

from books.services import book_create, entry_create
from lore_platform.tenancy.actor import Actor
from retrieval.adapter.indexing import book_reindex
from retrieval.adapter.models import EntryVector
from retrieval.adapter.vector_store import PgVectorIndex, vector_index_get
from tests.retrieval.embedding_helpers import real_embedder

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

LORE = {
    "forge": ("Ashenveil Citadel", "A fortress city inside an extinct volcano whose forges are fed by lava."),
    "oracle": ("Mirelda", "An old seer of the Sunken Marsh who gave up her eyes for visions of the future."),
    "plague": ("The Crimson Plague", "A disease that turned the skin red, spread by rats from the port long ago."),
    "harbor": ("Zephyria", "A floating island port where airships dock and wind-mages control the breezes."),
}


@pytest.fixture
def indexed_book(tenant_a):
    actor = Actor(tenant=tenant_a.tenant, user=tenant_a.admin, role="admin")
    book = book_create(actor=actor, title="Atlas", profile="smart")
    ids = {key: entry_create(actor=actor, book=book, title=t, content=c).pk for key, (t, c) in LORE.items()}
    book_reindex(book.pk, tenant=book.tenant_id)
    return book, ids


def test_embedding_column_is_pgvector_with_hnsw_indexes():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'retrieval_entryvector'::regclass AND attname = 'embedding'"
        )
        assert cursor.fetchone()[0] == "vector"
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'retrieval_entryvector'")
        indexes = dict(cursor.fetchall())
    for dimension in (512, 384):
        definition = indexes[f"entryvector_hnsw_{dimension}"]
        assert "USING hnsw" in definition and "vector_cosine_ops" in definition
        assert f"vector({dimension})" in definition and f"dimension = {dimension}" in definition


def test_search_plan_uses_the_hnsw_index(indexed_book):
    book, _ = indexed_book
    index = PgVectorIndex(book.tenant, model_name="use-multilingual-v3", dimension=512)
    [query] = real_embedder().embed_queries(["volcano forge city"])
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + index.query_sql(), index.query_params([book.pk], query, 3))
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "entryvector_hnsw_512" in plan, plan
    assert "Index Scan" in plan, plan


def test_nearest_returns_the_right_entries_across_languages(indexed_book):
    book, ids = indexed_book
    index = vector_index_get(book.tenant)
    assert isinstance(index, PgVectorIndex)
    queries = {
        "forge": "¿Qué ciudad fortificada usa el calor de un volcán para sus herrerías?",
        "oracle": "¿Quién es la anciana que perdió la vista a cambio de ver el porvenir?",
        "plague": "¿Qué epidemia traída por roedores volvía roja la piel?",
        "harbor": "¿Dónde amarran las naves voladoras?",
    }
    for key, vector in zip(queries, real_embedder().embed_queries(list(queries.values()))):
        found = index.nearest([book.pk], vector, 2)
        assert found[0][0] == ids[key], (key, found)
        assert found[0][1] > found[1][1]
    # Scores are cosine similarities, the same figure the in-process index gives.
    stored = EntryVector.objects.for_tenant(book.tenant).get(entry_id=ids["forge"]).embedding
    [(entry_id, score)] = index.nearest([book.pk], stored, 1)
    assert entry_id == ids["forge"] and score == pytest.approx(1.0, abs=1e-5)


def _hnsw_session() -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('hnsw.iterative_scan', true), current_setting('hnsw.ef_search', true)")
        return cursor.fetchone()


@pytest.mark.django_db(transaction=True)
def test_every_search_runs_with_strict_order_and_ef_search_100_in_or_out_of_a_transaction(indexed_book):
    from django.db import transaction

    from retrieval.adapter.vector_store import HNSW_EF_SEARCH

    book, ids = indexed_book
    index = vector_index_get(book.tenant)
    [query] = real_embedder().embed_queries(["volcano forge city"])
    wanted = ("strict_order", str(HNSW_EF_SEARCH))
    connection.close()  # a fresh session, as a new worker connection
    assert index.nearest([book.pk], query, 1)[0][0] == ids["forge"]
    assert _hnsw_session() == wanted  # set once for the session: later searches are one statement
    connection.close()
    try:
        with transaction.atomic():
            assert index.nearest([book.pk], query, 1)[0][0] == ids["forge"]
            assert _hnsw_session() == wanted
            raise RuntimeError("rolled back")
    except RuntimeError:
        pass
    # A rollback undid the transaction's settings; the next search outside one sets them again.
    assert _hnsw_session() != wanted
    assert index.nearest([book.pk], query, 1)[0][0] == ids["forge"]
    assert _hnsw_session() == wanted
