"""HNSW indexes for entry vectors, PostgreSQL only (SQLite searches in process).

The ``embedding`` column is an untyped ``vector`` so several models can coexist
during a model change; pgvector indexes such a column with one partial
expression index per dimension. Queries must repeat the cast and the predicate
(``vector_store.PgVectorIndex`` does). Dimensions are written out here rather
than imported so this migration never changes after it ran.
"""
from django.db import migrations

DIMENSIONS = (512, 384)  # USE multilingual v3, multilingual-e5-small


def create_indexes(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return
    for dimension in DIMENSIONS:
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS entryvector_hnsw_{dimension} ON retrieval_entryvector "
            f"USING hnsw ((embedding::vector({dimension})) vector_cosine_ops) WHERE dimension = {dimension}"
        )


def drop_indexes(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return
    for dimension in DIMENSIONS:
        schema_editor.execute(f"DROP INDEX IF EXISTS entryvector_hnsw_{dimension}")


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0002_entry_vector")]
    operations = [migrations.RunPython(create_indexes, drop_indexes)]
