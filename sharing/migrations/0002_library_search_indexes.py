"""Library search indexes, PostgreSQL only (SQLite searches with icontains and in process).

- GIN over ``BookShare.search_vector`` (full-text search, P-5).
- One partial expression HNSW index per known embedding dimension over
  ``BookVector.embedding`` (an untyped ``vector`` column, as in retrieval 0003);
  ``sharing.selectors`` repeats the cast and the predicate so the planner can
  use it. Dimensions are written out so this migration never changes.
"""
from django.db import migrations

DIMENSIONS = (512, 384)  # USE multilingual v3, multilingual-e5-small


def create_indexes(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        "CREATE INDEX IF NOT EXISTS sharing_bookshare_search_gin ON sharing_bookshare USING gin (search_vector)"
    )
    for dimension in DIMENSIONS:
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS sharing_bookvector_hnsw_{dimension} ON sharing_bookvector "
            f"USING hnsw ((embedding::vector({dimension})) vector_cosine_ops) WHERE dimension = {dimension}"
        )


def drop_indexes(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("DROP INDEX IF EXISTS sharing_bookshare_search_gin")
    for dimension in DIMENSIONS:
        schema_editor.execute(f"DROP INDEX IF EXISTS sharing_bookvector_hnsw_{dimension}")


class Migration(migrations.Migration):
    dependencies = [("sharing", "0001_initial")]
    operations = [migrations.RunPython(create_indexes, drop_indexes)]
