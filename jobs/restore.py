"""Writing back the AI jobs of a tenant backup (``backup.services`` decides which and maps ids).

Only jobs that ended are restored: their outcome, warnings, usage, error and the
receipt of an accepted draft stay on record (and count toward the daily quota,
A-3, as they did), and a done draft nobody accepted yet can still be accepted.
"""
from __future__ import annotations

from typing import Any

from jobs.models import Job, TenantModelSettings
from lore_platform.tenancy.models import Tenant


def job_restore(*, tenant: Tenant, **fields: Any) -> Job:
    return Job.objects.create(tenant=tenant, **fields)


def model_settings_restore(*, tenant: Tenant, base_url: str, model: str) -> tuple[TenantModelSettings, list[str]]:
    """Fill the tenant's blank model settings from a backup; a value set here already is kept.

    The API key is never in a backup: it stays as it is (blank on a fresh tenant). Returns the
    row and the names of the fields it filled."""
    row = TenantModelSettings.objects.for_tenant(tenant).first() or TenantModelSettings(tenant=tenant)
    filled = []
    for name, value in (("base_url", base_url), ("model", model)):
        if value and not getattr(row, name):
            setattr(row, name, value)
            filled.append(name)
    if filled:
        row.save()
    return row, filled
