# Lineages moved from cast to books, the layer of the books they own (S-2).
# The table stays ``cast_lineage``: only Django's state changes, no SQL runs.
import uuid

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("books", "0003_constraints_and_editor_indexes"),
        ("cast", "0004_request_log_compressed"),
        ("tenancy", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="Lineage",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("key", models.CharField(help_text="Stable identity, e.g. the card's name + creator", max_length=200)),
                        ("public_id", models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("tenant", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="lineages", to="tenancy.tenant")),
                    ],
                    options={"db_table": "cast_lineage"},
                ),
                migrations.AlterField(
                    model_name="book",
                    name="lineage",
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name="books", to="books.lineage"),
                ),
                migrations.AddConstraint(
                    model_name="lineage",
                    constraint=models.UniqueConstraint(fields=("tenant", "key"), name="lineage_unique_key_per_tenant"),
                ),
            ],
        ),
    ]
