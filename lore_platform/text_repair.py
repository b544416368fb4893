"""Find and repair stored text that is not text: NUL and unpaired surrogates (issue 26, point 5).

Before the API's parser checked every string of a body, a lone surrogate could
be stored inside a JSON column (``extra`` of an entry or a book; SQLite keeps
the ``\\udc00`` escape) and NUL inside text or JSON; every later read of such a
row failed. This sweep reads every text and JSON column of the project's
models, tenant by tenant through the tenant-scoped manager, and writes back
``lore_platform.text.text_repair`` of each bad value (U+FFFD for an unpaired
surrogate, NUL dropped). It goes by the app registry, not by imports, so it
covers every app above this layer (books, chats, request logs, jobs …) and any
column added later.

PostgreSQL refuses both in ``text`` and ``jsonb``, so there the sweep normally
finds nothing; it is the embedded SQLite default that needs it.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from django.apps import apps
from django.db import models, transaction

from lore_platform.tenancy.models import Tenant
from lore_platform.tenancy.scoping import TenantScopedManager
from lore_platform.text import text_repair

# The project's apps, and the user accounts (names and emails are text a caller typed).
APP_LABELS = ("auth", "tenancy", "books", "cast", "retrieval", "sharing", "jobs", "demo", "web")
CHUNK = 500


@dataclass
class ModelRepair:
    """What the sweep found in one model: rows scanned, rows and values that held bad text."""

    label: str
    scanned: int = 0
    rows: int = 0
    values: int = 0
    fields: dict[str, int] = field(default_factory=dict)


def _text_fields(model: type[models.Model]) -> list[str]:
    names = []
    for item in model._meta.concrete_fields:
        if item.primary_key or item.is_relation:
            continue
        # CompressedJSONField (request logs) is a BinaryField that reads as JSON: it has from_db_value.
        if isinstance(item, (models.CharField, models.TextField, models.JSONField)) or (
            isinstance(item, models.BinaryField) and hasattr(item, "from_db_value")
        ):
            names.append(item.name)
    return names


def _querysets(model: type[models.Model]) -> Iterator[models.QuerySet]:
    manager = model._default_manager
    if isinstance(manager, TenantScopedManager):
        for tenant in Tenant.objects.order_by("pk"):
            yield manager.for_tenant(tenant)
    else:
        yield manager.all()


def repairable_models() -> list[tuple[type[models.Model], list[str]]]:
    found = []
    for model in apps.get_models():
        if model._meta.app_label not in APP_LABELS or model._meta.proxy or not model._meta.managed:
            continue
        names = _text_fields(model)
        if names:
            found.append((model, names))
    return found


def text_repair_rows(*, dry_run: bool = False) -> list[ModelRepair]:
    """Sweep every model; repair (unless ``dry_run``) and report each model where bad text was found."""
    reports = []
    for model, names in repairable_models():
        report = ModelRepair(label=model._meta.label)
        for queryset in _querysets(model):
            for row in queryset.order_by("pk").values_list("pk", *names).iterator(chunk_size=CHUNK):
                report.scanned += 1
                changes = {}
                for name, value in zip(names, row[1:], strict=True):
                    repaired = text_repair(value)
                    if repaired is not value:
                        changes[name] = repaired
                        report.fields[name] = report.fields.get(name, 0) + 1
                if not changes:
                    continue
                report.rows += 1
                report.values += len(changes)
                if not dry_run:
                    with transaction.atomic():
                        # update(), not save(): only the bad columns are written, no signal or timestamp moves.
                        queryset.filter(pk=row[0]).update(**changes)
        if report.rows:
            reports.append(report)
    return reports
