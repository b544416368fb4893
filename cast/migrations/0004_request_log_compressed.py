"""Request logs stored zlib-compressed; usage recorded by a sweep (see cast/fields.py, cast/usage.py)."""
from django.db import migrations, models

import cast.fields

FIELDS = ("injections", "world_index", "log")


def compress_existing(apps, schema_editor):
    RequestLog = apps.get_model("cast", "RequestLog")
    batch = []
    for row in RequestLog.objects.all().only("id", *(f"{name}_json" for name in FIELDS)).iterator(chunk_size=500):
        for name in FIELDS:
            setattr(row, name, getattr(row, f"{name}_json"))
        batch.append(row)
        if len(batch) == 500:
            RequestLog.objects.bulk_update(batch, FIELDS)
            batch = []
    if batch:
        RequestLog.objects.bulk_update(batch, FIELDS)


def decompress_existing(apps, schema_editor):
    RequestLog = apps.get_model("cast", "RequestLog")
    for row in RequestLog.objects.all().iterator(chunk_size=500):
        for name in FIELDS:
            setattr(row, f"{name}_json", getattr(row, name))
        row.save(update_fields=[f"{name}_json" for name in FIELDS])


class Migration(migrations.Migration):

    dependencies = [
        ("cast", "0003_request_log_usage"),
    ]

    operations = [
        *[migrations.RenameField("requestlog", name, f"{name}_json") for name in FIELDS],
        *[
            migrations.AddField(
                model_name="requestlog",
                name=name,
                field=cast.fields.CompressedJSONField(default=list),
            )
            for name in FIELDS
        ],
        migrations.RunPython(compress_existing, decompress_existing),
        *[migrations.RemoveField("requestlog", f"{name}_json") for name in FIELDS],
        migrations.AddIndex(
            model_name="requestlog",
            index=models.Index(fields=["chat", "turn"], name="requestlog_chat_turn"),
        ),
        migrations.AddIndex(
            model_name="requestlog",
            index=models.Index(condition=models.Q(usage_recorded_at__isnull=True), fields=["id"],
                               name="requestlog_usage_pending"),
        ),
    ]
