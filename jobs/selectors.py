"""Reads for AI jobs: a job as its caller may see it, the list, and the model settings in force."""
from __future__ import annotations

from typing import Any

from django.conf import settings

from lore_platform.errors import NotFound
from jobs.llm import LlmConfig
from jobs.models import Job, TenantModelSettings
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Tenant


def jobs_visible(actor: Actor) -> Any:
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


def model_config_for(tenant: Tenant) -> LlmConfig:
    """The operator's settings, with the tenant admin's override where one is set."""
    override = TenantModelSettings.objects.for_tenant(tenant).first()
    return LlmConfig(
        base_url=(override.base_url if override and override.base_url else settings.LOREWEAVE_LLM_BASE_URL),
        api_key=(override.api_key if override and override.api_key else settings.LOREWEAVE_LLM_API_KEY),
        model=(override.model if override and override.model else settings.LOREWEAVE_LLM_MODEL),
        timeout=settings.LOREWEAVE_LLM_TIMEOUT,
        max_retries=settings.LOREWEAVE_LLM_MAX_RETRIES,
        retry_after_max=settings.LOREWEAVE_LLM_RETRY_AFTER_MAX,
        structured=settings.LOREWEAVE_LLM_STRUCTURED,
        max_tokens=settings.LOREWEAVE_LLM_MAX_TOKENS,
    )


def model_settings_describe(tenant: Tenant) -> dict[str, Any]:
    """What an admin sees: the settings in force and where they come from; never the key itself."""
    override = TenantModelSettings.objects.for_tenant(tenant).first()
    config = model_config_for(tenant)
    return {
        "configured": config.configured,
        "base_url": config.base_url,
        "model": config.model,
        "api_key_set": bool(config.api_key),
        "overridden": sorted(
            name for name in ("base_url", "api_key", "model") if override is not None and getattr(override, name)
        ),
    }
