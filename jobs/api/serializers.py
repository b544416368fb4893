"""Input and output shapes of the AI jobs API. Limits are the services' (W-12), not the serializers'."""
from __future__ import annotations

from typing import Any

from rest_framework import serializers

from jobs.models import Job, JobKind, JobState
from lore_platform.api.inputs import StrictInput


class GenerateIn(serializers.Serializer):
    description = serializers.CharField(trim_whitespace=False, help_text="The world, ≤4,000 characters (W-12, A-1).")
    language = serializers.CharField(required=False, allow_blank=True, help_text="Language of the entries, e.g. `es`.")
    titles = serializers.ListField(child=serializers.CharField(), required=False,
                                   help_text="Titles the book already has (not to be repeated).")
    book = serializers.IntegerField(required=False, allow_null=True,
                                    help_text="The target book: its language and titles are sent to the model.")


class SplitIn(serializers.Serializer):
    text = serializers.CharField(trim_whitespace=False, help_text="Notes, ≤40,000 characters (W-12, A-2).")


class DraftEntry(StrictInput):
    title = serializers.CharField(trim_whitespace=False, help_text="2–100 characters (W-12).")
    lore = serializers.CharField(trim_whitespace=False, help_text="20–20,000 characters (W-12).")
    aliases = serializers.ListField(child=serializers.CharField(trim_whitespace=False), required=False, default=list)
    canon = serializers.BooleanField(required=False, default=False)
    flags = serializers.ListField(
        child=serializers.CharField(), required=False,
        help_text="In a draft: why this entry needs a look (over a W-12 limit, lore not found in the notes, a "
                  "placeholder title). Accepting the whole draft leaves flagged entries out; send one back in "
                  "`entries` to keep it.")


class AcceptIn(StrictInput):
    entries = DraftEntry(many=True, required=False,
                         help_text="The entries kept (edited, unticked ones left out); omitted = the whole draft.")
    book = serializers.IntegerField(required=False, allow_null=True, help_text="Into this book; omitted = a new book.")
    mode = serializers.ChoiceField(choices=["append", "replace"], required=False, default="append")
    title = serializers.CharField(required=False, allow_blank=True, help_text="The new book's title.")


class ModelSettingsIn(serializers.Serializer):
    endpoint = serializers.CharField(
        required=False, allow_blank=True,
        help_text="One of the operator's model endpoints by name (see `endpoints`); blank = the operator's default.")
    base_url = serializers.CharField(
        required=False, allow_blank=True,
        help_text="A model server of the tenant's own, e.g. https://llm.example.com/v1: only when the operator "
                  "permits tenant endpoints (`tenant_endpoints`), and never a loopback, private, link-local or "
                  "metadata address the operator has not allow-listed (422 `address_not_allowed`, A-3). "
                  "The URL of one of the operator's endpoints chooses that endpoint.")
    api_key = serializers.CharField(required=False, allow_blank=True, write_only=True)
    model = serializers.CharField(required=False, allow_blank=True)


class EndpointOut(serializers.Serializer):
    name = serializers.CharField()
    model = serializers.CharField(help_text="Its default model; blank = the operator's LOREWEAVE_LLM_MODEL.")


class ModelSettingsOut(serializers.Serializer):
    configured = serializers.BooleanField()
    base_url = serializers.CharField()
    model = serializers.CharField()
    api_key_set = serializers.BooleanField()
    overridden = serializers.ListField(child=serializers.CharField())
    endpoint = serializers.CharField(help_text="The operator endpoint in force; blank = the tenant's own URL or none.")
    endpoints = EndpointOut(many=True, help_text="The operator's endpoints a tenant admin may choose.")
    tenant_endpoints = serializers.BooleanField(help_text="Whether the operator permits a `base_url` of the tenant's own.")


class UsageOut(serializers.Serializer):
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    calls = serializers.IntegerField()


class JobOut(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=JobKind.choices)
    state = serializers.ChoiceField(choices=JobState.choices)
    progress = serializers.IntegerField(help_text="Percent.")
    model = serializers.CharField(help_text="The model used; `deterministic` for the splitter without a model.")
    draft = DraftEntry(many=True)
    warnings = serializers.ListField(child=serializers.CharField())
    usage = UsageOut()
    error = serializers.DictField(allow_null=True, help_text="`{code, message}` when failed.")
    accepted = serializers.DictField(allow_null=True, help_text="The receipt of the last accept.")
    input = serializers.DictField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


def job_out(job: Job, *, with_input: bool = True) -> dict[str, Any]:
    data = dict(job.input)
    if "text" in data and not with_input:
        data = {"text_chars": len(data.pop("text"))}
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "calls": 0, **(job.usage or {})}
    return {
        "id": job.pk,
        "kind": job.kind,
        "state": job.state,
        "progress": job.progress,
        "model": job.model,
        "draft": job.draft,
        "warnings": job.warnings,
        "usage": usage,
        "error": job.error or None,
        "accepted": job.accepted,
        "input": data,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
    }
