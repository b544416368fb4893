"""Reads for AI jobs: a job as its caller may see it, the list, and the model settings in force."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Q, QuerySet

from jobs.llm import LlmConfig
from jobs.models import Job, JobState, TenantModelSettings
from lore_platform import outbound
from lore_platform.errors import NotFound
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Tenant


def jobs_visible(actor: Actor) -> QuerySet[Job]:
    """A member sees the jobs they started; admins see every job of the tenant."""
    jobs = Job.objects.for_tenant(actor.tenant)
    return jobs if actor.is_admin else jobs.filter(created_by=actor.user)


def access_job(actor: Actor, job_id: Any, *, for_update: bool = False) -> Job:
    """The job, or NotFound when it does not exist or is not the caller's (P-3: missing looks like forbidden)."""
    try:
        pk = int(job_id)
    except (TypeError, ValueError):
        raise NotFound("No such job.", field="job") from None
    jobs = jobs_visible(actor)
    if for_update:
        jobs = jobs.select_for_update()
    job = jobs.filter(pk=pk).first()
    if job is None:
        raise NotFound("No such job.", field="job")
    return job


@dataclass(frozen=True)
class Endpoint:
    """A model server the operator configured (A-3): a tenant admin may choose it by name."""

    name: str
    base_url: str
    model: str = ""
    api_key: str = ""


def _endpoints_parsed(raw: Any) -> list[dict[str, Any]]:
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            return []
        if text[0] in "[{":
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as error:
                raise ImproperlyConfigured(f"MODEL_ENDPOINTS is not valid JSON: {error}") from None
        else:  # "name=url, name=url"
            pairs = [item.strip() for item in text.split(",") if item.strip()]
            if not all("=" in pair for pair in pairs):
                raise ImproperlyConfigured("MODEL_ENDPOINTS: write name=url pairs separated by commas, or JSON.")
            return [{"name": n.strip(), "base_url": u.strip()} for n, u in (p.split("=", 1) for p in pairs)]
    if isinstance(raw, dict):
        raw = [{"name": name, **(value if isinstance(value, dict) else {"base_url": value})}
               for name, value in raw.items()]
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise ImproperlyConfigured("MODEL_ENDPOINTS must be a list of {name, base_url, model, api_key} objects.")
    return raw


def operator_endpoints() -> dict[str, Endpoint]:
    """The operator's model endpoints, by name, in the order given; the first is the tenants' default.

    ``LOREWEAVE_LLM_BASE_URL`` (with ``LOREWEAVE_LLM_MODEL``/``_API_KEY``) is the endpoint ``default``
    and comes first, unless ``MODEL_ENDPOINTS`` names one ``default`` itself.
    """
    found: dict[str, Endpoint] = {}
    for item in _endpoints_parsed(getattr(settings, "MODEL_ENDPOINTS", "")):
        name, base_url = str(item.get("name") or "").strip(), str(item.get("base_url") or "").strip()
        if not name or not base_url.startswith(("http://", "https://")):
            raise ImproperlyConfigured(f"MODEL_ENDPOINTS: each endpoint needs a name and an http(s) base_url ({item!r}).")
        found[name] = Endpoint(name=name, base_url=base_url.rstrip("/"), model=str(item.get("model") or "").strip(),
                               api_key=str(item.get("api_key") or "").strip())
    if settings.LOREWEAVE_LLM_BASE_URL and "default" not in found:
        default = Endpoint(name="default", base_url=settings.LOREWEAVE_LLM_BASE_URL.rstrip("/"),
                           model=settings.LOREWEAVE_LLM_MODEL, api_key=settings.LOREWEAVE_LLM_API_KEY)
        found = {"default": default, **found}
    return found


def operator_endpoint_for_url(base_url: str) -> Endpoint | None:
    """The operator's endpoint at exactly this URL (a tenant that types it in chooses it)."""
    wanted = base_url.strip().rstrip("/")
    return next((e for e in operator_endpoints().values() if e.base_url == wanted), None)


def _tenant_choice(tenant: Tenant) -> tuple[TenantModelSettings | None, Endpoint | None, str]:
    """The tenant's override row, the operator endpoint in force, and the tenant's own URL in force.

    A tenant URL counts only while the operator permits tenant endpoints: a URL stored
    before (or while) it was permitted is not connected to once the operator says no.
    """
    override = TenantModelSettings.objects.for_tenant(tenant).first()
    endpoints = operator_endpoints()
    if override is not None and override.endpoint:
        return override, endpoints.get(override.endpoint), ""
    if override is not None and override.base_url:
        if settings.MODEL_TENANT_ENDPOINTS:
            return override, None, override.base_url
        return override, operator_endpoint_for_url(override.base_url), ""
    return override, next(iter(endpoints.values()), None), ""


def model_config_for(tenant: Tenant) -> LlmConfig:
    """The model settings in force: the operator's endpoint the tenant chose (or the default), or the
    tenant's own URL when the operator permits it; the tenant's model name and key where set.

    The operator's key never goes to a tenant's URL; a tenant's key given with a URL that no longer
    counts goes nowhere.
    """
    override, endpoint, own_url = _tenant_choice(tenant)
    trusted: tuple[str, ...]
    tenant_key = override.api_key if override is not None else ""
    tenant_model = override.model if override is not None else ""
    if override is not None and override.base_url and not own_url and endpoint is None:
        tenant_key = ""  # its URL no longer counts: its key was meant for that URL only
    if own_url:
        base_url, api_key, trusted = own_url, tenant_key, ()
        model = tenant_model or settings.LOREWEAVE_LLM_MODEL
    elif endpoint is not None:
        base_url, api_key = endpoint.base_url, tenant_key or endpoint.api_key
        model = tenant_model or endpoint.model or settings.LOREWEAVE_LLM_MODEL
        trusted = (outbound.url_allow_entry(endpoint.base_url),)
    else:
        base_url, api_key, model, trusted = "", "", tenant_model or settings.LOREWEAVE_LLM_MODEL, ()
    return LlmConfig(
        base_url=base_url,
        api_key=api_key,
        model=model,
        timeout=settings.LOREWEAVE_LLM_TIMEOUT,
        max_retries=settings.LOREWEAVE_LLM_MAX_RETRIES,
        retry_after_max=settings.LOREWEAVE_LLM_RETRY_AFTER_MAX,
        structured=settings.LOREWEAVE_LLM_STRUCTURED,
        trusted=trusted,
        max_tokens=settings.LOREWEAVE_LLM_MAX_TOKENS,
    )


def model_settings_describe(tenant: Tenant) -> dict[str, Any]:
    """What an admin sees: the settings in force, where they come from, what may be chosen; never a key."""
    override, endpoint, own_url = _tenant_choice(tenant)
    config = model_config_for(tenant)
    overridden = {name for name in ("base_url", "api_key", "model", "endpoint")
                  if override is not None and getattr(override, name)}
    if override is not None and override.base_url and not own_url:
        overridden.discard("base_url")  # a URL that does not count (or is the operator's) is not an override
        if endpoint is None:
            overridden.discard("api_key")
    if override is not None and override.base_url and endpoint is not None:
        overridden.add("endpoint")
    return {
        "configured": config.configured,
        "base_url": config.base_url,
        "model": config.model,
        "api_key_set": bool(config.api_key),
        "overridden": sorted(overridden),
        "endpoint": endpoint.name if endpoint is not None else "",
        "endpoints": [{"name": e.name, "model": e.model} for e in operator_endpoints().values()],
        "tenant_endpoints": bool(settings.MODEL_TENANT_ENDPOINTS),
    }


# --- the jobs sweep's reads: across tenants on purpose (every write after them is the job's tenant's) ---


def jobs_lease_lapsed(*, now: datetime, lease: timedelta) -> list[Job]:
    """Running jobs whose worker stopped renewing its lease (or never took one)."""
    return list(
        Job.objects.unscoped()
        .filter(state=JobState.RUNNING)
        .filter(Q(lease_until__lt=now) | Q(lease_until__isnull=True, started_at__lt=now - lease)
                | Q(lease_until__isnull=True, started_at__isnull=True))
        .only("pk", "tenant_id", "kind", "chunks", "error", "lease_token", "lease_until", "runs")
    )


def jobs_queued_before(stale: datetime) -> list[tuple[int, int]]:
    """(job id, tenant id) of queued jobs whose message went out before ``stale`` (or never did)."""
    return list(
        Job.objects.unscoped()
        .filter(state=JobState.QUEUED)
        .filter(Q(queued_at__lt=stale) | Q(queued_at__isnull=True, created_at__lt=stale))
        .values_list("pk", "tenant_id")
    )
