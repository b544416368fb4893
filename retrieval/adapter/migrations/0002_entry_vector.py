"""One vector per entry (``EntryVector``); see retrieval/adapter/models.py for the column type."""
import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

import retrieval.adapter.models


class Migration(migrations.Migration):
    dependencies = [
        ("books", "0002_initial"),
        ("retrieval", "0001_vector_extension"),
        ("tenancy", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="EntryVector",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("model_name", models.CharField(max_length=100)),
                ("dimension", models.PositiveSmallIntegerField()),
                ("content_hash", models.CharField(max_length=64)),
                ("embedding", retrieval.adapter.models.EmbeddingField()),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "book",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="entry_vectors", to="books.book"
                    ),
                ),
                (
                    "entry",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="vector", to="books.entry"
                    ),
                ),
                (
                    "tenant",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="entry_vectors", to="tenancy.tenant"
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["book", "model_name", "created_at"], name="entryvector_book_model_at")
                ],
            },
        ),
    ]
