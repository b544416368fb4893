"""AI jobs (A-1..A-3): one row per job, with its input, per-chunk results, draft, usage and outcome.

``chunks`` holds what each model call returned, keyed by chunk (split) or
attempt (generate): a retried job reads them instead of calling the model
again. ``draft`` is the result a person reviews; nothing reaches a book until
they accept it (``accepted`` holds the import receipt).
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_noop

from lore_platform.tenancy.models import Tenant
from lore_platform.tenancy.scoping import TenantScopedManager


class JobKind(models.TextChoices):
    GENERATE = "generate", "Generate a book with AI (A-1)"
    SPLIT = "split", "Split text into entries (A-2)"


class JobState(models.TextChoices):
    # The values are msgids as well (gettext_noop: the same text): a refusal names the state as a Term.
    QUEUED = gettext_noop("queued"), "Queued"
    RUNNING = gettext_noop("running"), "Running"
    DONE = gettext_noop("done"), "Done"
    FAILED = gettext_noop("failed"), "Failed"
    CANCELLED = gettext_noop("cancelled"), "Cancelled"


ACTIVE_STATES = (JobState.QUEUED, JobState.RUNNING)
FINAL_STATES = (JobState.DONE, JobState.FAILED, JobState.CANCELLED)


class Job(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="ai_jobs")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="ai_jobs"
    )
    kind = models.CharField(max_length=16, choices=JobKind.choices)
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0)  # percent
    input = models.JSONField(default=dict)
    # "deterministic" when split ran without a model; the model's name otherwise.
    model = models.CharField(max_length=200, blank=True, default="")
    chunks = models.JSONField(default=dict)
    draft = models.JSONField(default=list)
    warnings = models.JSONField(default=list)
    usage = models.JSONField(default=dict)
    error = models.JSONField(default=dict)  # {"code", "message"} when failed
    accepted = models.JSONField(null=True, blank=True)  # the receipt of the accept
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The row is the durable record of a job, not its broker message: ``queued_at`` is when its
    # message was last sent (the sweep sends it again when it is older than a short grace), and a
    # running job is held by the worker whose ``lease_token`` it carries until ``lease_until``,
    # which that worker renews while it works. A lapsed lease means the worker died: the sweep
    # hands the job to another one (``runs`` counts the workers that took it) or fails it.
    queued_at = models.DateTimeField(null=True, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    lease_token = models.CharField(max_length=32, blank=True, default="")
    runs = models.PositiveSmallIntegerField(default=0)

    objects = TenantScopedManager["Job"]()

    class Meta:
        indexes = [models.Index(fields=["tenant", "state"]), models.Index(fields=["tenant", "created_at"]),
                   models.Index(fields=["state", "lease_until"])]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.kind} job {self.pk} ({self.state})"


class JobRetry(models.Model):
    """A retried job is a new start: it counts toward the tenant's jobs per 24 hours (A-3)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="ai_job_retries")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="retries")
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedManager["JobRetry"]()

    class Meta:
        indexes = [models.Index(fields=["tenant", "created_at"])]


class TenantModelSettings(models.Model):
    """An admin's choice among the operator's model settings for one tenant; blank fields inherit."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="model_settings")
    base_url = models.CharField(max_length=500, blank=True, default="")
    api_key = models.CharField(max_length=500, blank=True, default="")
    model = models.CharField(max_length=200, blank=True, default="")
    # The name of one of the operator's endpoints (MODEL_ENDPOINTS, A-3); blank = the operator's default
    # or, where the operator permits tenant endpoints, ``base_url``.
    endpoint = models.CharField(max_length=100, blank=True, default="")
    updated_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedManager["TenantModelSettings"]()
