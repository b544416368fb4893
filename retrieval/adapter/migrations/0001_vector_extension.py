"""Enable pgvector on PostgreSQL; nothing to do on SQLite (in-process vectors)."""
from django.db import migrations


def create_extension(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("CREATE EXTENSION IF NOT EXISTS vector")


class Migration(migrations.Migration):
    initial = True
    dependencies: list[tuple[str, str]] = []
    operations = [migrations.RunPython(create_extension, migrations.RunPython.noop)]
