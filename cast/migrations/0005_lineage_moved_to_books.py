# Lineages moved to books (see books 0004); state only, the table is unchanged.
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("books", "0004_lineage_moved_from_cast"),
        ("cast", "0004_request_log_compressed"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name="character",
                    name="lineage",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="characters", to="books.lineage"),
                ),
                migrations.DeleteModel(name="Lineage"),
            ],
        ),
    ]
