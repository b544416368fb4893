"""AI jobs (A-1..A-3): start, run, cancel, retry and accept.

A job is started by a service that checks the input limit (W-12) and the
tenant's job quotas (settings; refused with 429 and ``Retry-After``), writes the
row and, after commit, publishes ``jobs.job_run`` with ids on the bounded
publish path (``task_publish``; its own queue, ``loreweave.jobs``). The row is
the durable record: a broker that is down leaves it queued, and the jobs sweep
(:func:`jobs_sweep`, beat) sends it again.

The task calls :func:`job_execute`, which claims the queued job with a lease
(``lease_token``/``lease_until``) its worker renews while it works: every write
is conditional on that lease and the running state, and model calls ask
whether it still holds every half second, so a cancel abandons the call in
flight and its retries at once. A worker that dies stops renewing; the sweep
takes its job over (queued again: the model answers stored on the job,
``chunks`` keyed by split chunk or generate attempt, are reused) or, after
``LOREWEAVE_JOB_MAX_RUNS`` workers, fails it with the reason. Every request sent
to the model, failed ones included, is added to the job's ``usage``.

Retry runs a failed or cancelled job again as a new start (it counts toward the
quotas) and asks the model again for every answer that was not usable: only
answers that read as entries are kept.

Drafts are checked against W-12 (``books.limits.entry_fields_check``) before
they are shown. Accepting writes nothing itself: the chosen entries become a
native book file that goes through the importer (``books.imports``), so
append/replace, duplicates, every limit (all or nothing) and the receipt are
those of an import.
"""
from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from books import limits
from books.access import access_book
from books.formats import ImportedBook, ImportedEntry, normalise_text
from books.imports import book_import_into, book_import_new
from books.models import Entry, Profile
from jobs import grounding, prompts, selectors, splitter
from jobs.llm import (
    Completion,
    LlmCancelled,
    LlmClient,
    LlmConfig,
    LlmError,
    NotJson,
    OpenAICompatible,
    Usage,
    parse_json,
)
from jobs.models import ACTIVE_STATES, Job, JobKind, JobRetry, JobState, TenantModelSettings
from jobs.selectors import model_config_for
from lore_platform import outbound
from lore_platform.errors import Conflict, DomainError, PermissionDenied, Term, ValidationFailed
from lore_platform.tasks import task_publish
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Tenant
from lore_platform.text import text_clean, text_repair

DETERMINISTIC = "deterministic"
# What a refusal for "too many jobs at once" tells the caller to wait (seconds): jobs take minutes,
# a slot frees when one ends; about as often as a page polls a job.
CONCURRENT_RETRY_AFTER = 30
logger = logging.getLogger(__name__)


class TooManyJobs(DomainError):
    status = 429
    code = "too_many_jobs"


class NoModelConfigured(DomainError):
    status = 409
    code = "no_model_configured"


class _Cancelled(Exception):
    pass


class _JobFailed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# The port's one implementation; tests point it at their own server through the settings.
def llm_client_for(config: LlmConfig) -> LlmClient:
    return OpenAICompatible(config)


# --- starting ---------------------------------------------------------------------------


def _write_check(actor: Actor) -> None:
    if not actor.can_write:
        raise PermissionDenied("This API key may only read; starting a job needs the write scope.", rule="S-1")


def _quota_check(tenant: Tenant) -> None:
    """Per tenant: jobs queued or running at once, and jobs started in the last 24 hours (A-3)."""
    jobs = Job.objects.for_tenant(tenant)
    concurrent = settings.LOREWEAVE_JOBS_CONCURRENT
    active = jobs.filter(state__in=ACTIVE_STATES).count()
    if active >= concurrent:
        raise TooManyJobs(
            "{active} AI job(s) of this tenant are queued or running; at most {concurrent} run at once. "
            "Wait for one to finish or cancel one.",
            values={"active": active, "concurrent": concurrent},
            field="jobs",
            rule="A-3",
            details={"limit": concurrent, "actual": active, "unit": "jobs at once",
                     "retry_after": CONCURRENT_RETRY_AFTER},
        )
    per_day = settings.LOREWEAVE_JOBS_PER_DAY
    since = timezone.now() - timedelta(hours=24)
    # A start is a new job or a retry of one (each asks the model again).
    started = [*jobs.filter(created_at__gt=since).values_list("created_at", flat=True),
               *JobRetry.objects.for_tenant(tenant).filter(created_at__gt=since).values_list("created_at", flat=True)]
    today = len(started)
    if today >= per_day:
        oldest = min(started)
        retry = int((oldest + timedelta(hours=24) - timezone.now()).total_seconds()) + 1
        raise TooManyJobs(
            "This tenant started {today} AI jobs in the last 24 hours; the limit is {per_day}. "
            "The next one can start in about {minutes} minute(s).",
            values={"today": today, "per_day": per_day, "minutes": max(1, retry // 60)},
            field="jobs",
            rule="A-3",
            details={"limit": per_day, "actual": today, "unit": "jobs per 24 hours", "retry_after": retry},
        )


def _job_create(actor: Actor, *, kind: str, data: dict[str, Any], model: str) -> Job:
    with transaction.atomic():
        # One start at a time per tenant, so two requests cannot both take the last slot.
        Tenant.objects.select_for_update().filter(pk=actor.tenant.pk).first()
        _quota_check(actor.tenant)
        job = Job.objects.create(
            tenant=actor.tenant, created_by=actor.user, kind=kind, input=data, model=model
        )
        _enqueue(job)
    return job


def _enqueue(job: Job) -> None:
    """Publish the job's task after commit on the bounded publish path: a broker that is down costs
    the request ~100 ms, not a 500, and the row stays queued for the jobs sweep to send again."""
    Job.objects.for_tenant(job.tenant).filter(pk=job.pk).update(queued_at=timezone.now())
    tenant_id, job_id = job.tenant_id, job.pk
    transaction.on_commit(lambda: _publish(tenant_id, job_id), robust=True)


def _publish(tenant_id: int, job_id: int) -> bool:
    from jobs.tasks import job_run

    return task_publish(job_run, tenant_id, job_id)


def _text(value: Any, field: str, what: Term) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailed("{what} is empty.", values={"what": what}, field=field, code="required")
    return value


def job_generate_start(
    *,
    actor: Actor,
    description: str,
    language: str | None = None,
    titles: Sequence[str] | None = None,
    book_id: int | None = None,
) -> Job:
    """A-1: a world description (≤4,000 characters) → a draft of 4–16 entries. Needs a model (A-3).

    ``book_id`` names the target book: its language and entry titles go to the
    model (so the draft does not repeat them) unless ``language``/``titles`` are given.
    """
    _write_check(actor)
    description = _text(description, "description", Term("The description"))
    limits.count_check(len(description), limits.GENERATE_PROMPT, field="description", what=Term("The description"))
    config = model_config_for(actor.tenant)
    if not config.configured:
        raise NoModelConfigured(
            "No model is configured, so Generate with AI cannot run. An operator sets LOREWEAVE_LLM_BASE_URL and "
            "LOREWEAVE_LLM_MODEL, or a tenant admin sets them at /api/v1/jobs/model (A-3). "
            "Split text into entries works without a model.",
            field="model",
            rule="A-3",
        )
    existing: list[str] = [t for t in (titles or []) if isinstance(t, str) and t.strip()]
    target: dict[str, Any] = {}
    if book_id is not None:
        book = access_book(actor, book_id, need="read")
        language = language or book.language
        target = {"book": book.pk}  # the review offers it as where the draft goes
        if not titles:
            existing = list(Entry.objects.for_tenant(actor.tenant).filter(book=book).values_list("title", flat=True))
    limits.text_check(language or "", limits.BOOK_LANGUAGE, field="language", what=Term("The language code"))
    data = {"description": description, "language": language or "",
            "titles": existing[: limits.SMART_ENTRIES_PER_BOOK.value], **target}
    return _job_create(actor, kind=JobKind.GENERATE, data=data, model=config.model)


def job_split_start(*, actor: Actor, text: str, book_id: int | None = None) -> Job:
    """A-2: notes (≤40,000 characters) → entries; with no model, the deterministic splitter (A-3).

    ``book_id`` names the book the entries are meant for (kept on the job for the review).
    """
    _write_check(actor)
    text = _text(text, "text", Term("The text"))
    limits.count_check(len(text), limits.SPLIT_TEXT_INPUT, field="text", what=Term("The text"))
    data: dict[str, Any] = {"text": text}
    if book_id is not None:
        data["book"] = access_book(actor, book_id, need="edit").pk
    config = model_config_for(actor.tenant)
    return _job_create(actor, kind=JobKind.SPLIT, data=data, model=config.model if config.configured else DETERMINISTIC)


def job_cancel(*, actor: Actor, job: Job) -> Job:
    """Cancel a queued or running job; a running one abandons its model call within half a second
    and sends no further request (its worker asks on every poll, see :class:`_Run`)."""
    _write_check(actor)
    changed = Job.objects.for_tenant(job.tenant).filter(pk=job.pk, state__in=ACTIVE_STATES).update(
        state=JobState.CANCELLED, finished_at=timezone.now()
    )
    job.refresh_from_db()
    if not changed:
        raise Conflict("This job is {state} already; only queued or running jobs can be cancelled.",
                       values={"state": Term(job.state)}, field="state")
    return job


def job_retry(*, actor: Actor, job: Job) -> Job:
    """Run a failed or cancelled job again: a new start (the quotas count it) that asks the model again
    for every answer that was not usable; the usable ones it has are reused, not asked again."""
    _write_check(actor)
    with transaction.atomic():
        Tenant.objects.select_for_update().filter(pk=actor.tenant.pk).first()
        locked = Job.objects.for_tenant(job.tenant).select_for_update().get(pk=job.pk)
        if locked.state not in (JobState.FAILED, JobState.CANCELLED):
            raise Conflict("This job is {state}; only failed or cancelled jobs can be retried.",
                           values={"state": Term(locked.state)}, field="state")
        _quota_check(actor.tenant)
        JobRetry.objects.create(tenant=actor.tenant, job=locked)
        locked.state = JobState.QUEUED
        locked.error = {}
        locked.finished_at = None
        locked.progress = 0
        locked.runs = 0
        locked.chunks = {} if locked.kind == JobKind.GENERATE else _usable_chunks(locked)
        locked.save(update_fields=["state", "error", "finished_at", "progress", "runs", "chunks"])
        _enqueue(locked)
    return locked


def _usable_chunks(job: Job) -> dict[str, Any]:
    """The stored split answers a retry or a takeover may reuse: never one that did not read as entries
    (a refusal, prose, a wrong schema), nor the re-ask that followed it. A retry of generate keeps none:
    its attempts are one conversation, and a job that failed had no usable draft in any of them."""
    if job.error.get("code") == "nothing_found":
        return {}
    kept: dict[str, Any] = {}
    for key, stored in job.chunks.items():
        if key.endswith("-again"):
            continue
        try:
            _read_entries(stored)
        except NotJson:
            continue
        kept[key] = stored
    return kept


# --- running (the task's body) -------------------------------------------------------------


def _lease() -> timedelta:
    return timedelta(seconds=settings.LOREWEAVE_JOB_LEASE_SECONDS)


class _Run:
    """One worker's hold on a running job: its lease token, and the calls it has paid for.

    Every write is conditional on the job still running under this token, and renews the lease; a
    job cancelled, or taken over after this worker was thought dead, is written no more.
    """

    def __init__(self, job: Job, token: str) -> None:
        self.job = job
        self.token = token
        self.usage = Usage.from_dict(job.usage)
        self._renewed = time.monotonic()

    def mine(self) -> Any:
        return Job.objects.for_tenant(self.job.tenant).filter(
            pk=self.job.pk, state=JobState.RUNNING, lease_token=self.token
        )

    def write(self, **fields: Any) -> bool:
        """Write ``fields`` and renew the lease, if the job is still this worker's; else False."""
        updated = self.mine().update(lease_until=timezone.now() + _lease(), **fields)
        self._renewed = time.monotonic()
        return bool(updated)

    def cancelled(self) -> bool:
        """Is the job no longer this worker's to run (cancelled, or taken over)? Model calls ask it every
        half second while a call or a wait between tries runs; it renews the lease a third of the way
        through, so a lease lapses only when its worker has stopped."""
        if time.monotonic() - self._renewed >= settings.LOREWEAVE_JOB_LEASE_SECONDS / 3:
            return not self.write()
        return not self.mine().exists()

    def check(self) -> None:
        if self.cancelled():
            raise _Cancelled()

    def spent(self, usage: Usage) -> None:
        self.usage = self.usage + usage

    def usage_keep(self) -> None:
        """A cancelled run's calls still count: written whatever the state, unless another worker holds it."""
        Job.objects.for_tenant(self.job.tenant).filter(pk=self.job.pk, lease_token=self.token).update(
            usage=self.usage.as_dict()
        )


def job_execute(*, tenant: int | Tenant, job_id: int, client_for: Callable[[LlmConfig], LlmClient] | None = None) -> str:
    """Run one queued job to its end; safe to call again (redelivery, a message sent twice by the sweep):
    only the worker that claims the queued job runs it, others leave it alone."""
    tenant_obj = tenant if isinstance(tenant, Tenant) else Tenant.objects.get(pk=tenant)
    jobs = Job.objects.for_tenant(tenant_obj)
    token = uuid.uuid4().hex
    now = timezone.now()
    claimed = jobs.filter(pk=job_id, state=JobState.QUEUED).update(
        state=JobState.RUNNING, started_at=now, lease_until=now + _lease(), lease_token=token, runs=F("runs") + 1
    )
    job = jobs.filter(pk=job_id).first()
    if job is None:
        return "missing"
    if not claimed:
        return job.state  # finished, or running under another worker's lease (the sweep watches it)
    run = _Run(job, token)
    client_for = client_for or llm_client_for
    try:
        if job.kind == JobKind.GENERATE:
            draft, warnings = _generate(run, client_for)
        else:
            draft, warnings = _split(run, client_for)
    except _Cancelled:
        run.usage_keep()
        return _state_of(job)
    except LlmCancelled as error:
        run.spent(error.usage)
        run.usage_keep()
        return _state_of(job)
    except LlmError as error:
        run.spent(error.usage)
        return _finish(run, JobState.FAILED, error={"code": error.code, "message": error.message})
    except _JobFailed as error:
        return _finish(run, JobState.FAILED, error={"code": error.code, "message": error.message})
    return _finish(run, JobState.DONE, draft=draft, warnings=warnings)


def _state_of(job: Job) -> str:
    return Job.objects.for_tenant(job.tenant).filter(pk=job.pk).values_list("state", flat=True).first() or "missing"


def _finish(run: _Run, state: str, **fields: Any) -> str:
    fields.setdefault("error", {})
    job = run.job
    # The lease ends with the job: a final state holds no slot and nothing for the sweep.
    updated = run.mine().update(
        state=state, progress=100 if state == JobState.DONE else job.progress, finished_at=timezone.now(),
        usage=run.usage.as_dict(), lease_until=None, **fields,
    )
    if not updated:
        run.usage_keep()
        return _state_of(job)
    return state


def _ask(run: _Run, client: LlmClient, key: str, messages: list[dict[str, str]], *, progress: int) -> dict[str, Any]:
    """The model's answer for ``key``: the stored one, else asked now and stored (unless the job was cancelled)."""
    job = run.job
    stored = job.chunks.get(key)
    if stored is not None:
        return dict(stored)
    completion: Completion = client.complete(messages, schema=prompts.ENTRIES_SCHEMA, schema_name="entries",
                                             cancelled=run.cancelled)
    run.spent(completion.usage)
    # What the model said is no caller's input to refuse: NUL or a lone surrogate in it is repaired
    # (U+FFFD), so the draft can be stored (PostgreSQL's jsonb takes neither) and accepted.
    stored = {"text": text_clean(completion.text), "finish_reason": completion.finish_reason,
              "usage": completion.usage.as_dict()}
    job.chunks = {**job.chunks, key: stored}
    job.progress = min(99, progress)
    if not run.write(chunks=job.chunks, progress=job.progress, usage=run.usage.as_dict()):
        raise _Cancelled()
    return stored


def draft_entry_check(raw: Any, index: int) -> tuple[dict[str, Any] | None, str | None]:
    """One model entry as a draft entry, or why it cannot be one (W-12, as the books services check it)."""
    entry, refusal = draft_entry_refusal(raw, index)
    return entry, refusal.message if refusal is not None else None


def _lore_said(error: DomainError) -> DomainError:
    """The entry limits' refusal of the content, said of the draft's lore (its template and values kept)."""
    values = {name: Term("The lore") if value == "The entry content" else value
              for name, value in error.values.items()}
    return type(error)(error.template.replace("The entry content", "The lore"), values=values, field=error.field,
                       rule=error.rule, code=error.code, details=error.details)


def draft_entry_refusal(raw: Any, index: int) -> tuple[dict[str, Any] | None, ValidationFailed | None]:
    """:func:`draft_entry_check` with the reason as the refusal of ``entries[index]`` (W-12)."""
    field = f"entries[{index}]"
    number = index + 1
    if not isinstance(raw, Mapping):
        return None, ValidationFailed("entry {number} is not an object", values={"number": number}, field=field,
                                      rule="W-12")
    title = raw.get("title")
    lore = raw.get("lore", raw.get("content"))
    aliases = raw.get("aliases", [])
    if not isinstance(title, str) or not isinstance(lore, str):
        return None, ValidationFailed("entry {number} has no title or no lore", values={"number": number},
                                      field=field, rule="W-12")
    if isinstance(aliases, str):
        aliases = [aliases]
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        return None, ValidationFailed("entry {number} ({title}): aliases must be a list of strings",
                                      values={"number": number, "title": repr(title[:40])}, field=field, rule="W-12")
    entry: dict[str, Any] = {
        "title": re.sub(r"\s+", " ", title).strip(),
        "lore": lore.strip(),
        "aliases": [a.strip() for a in aliases if a.strip()],
        "canon": raw.get("canon") is True,
    }
    try:
        limits.entry_fields_check(
            Profile.SMART, {"title": entry["title"], "content": entry["lore"], "keys": entry["aliases"]}
        )
    except DomainError as error:
        # The limit's own refusal is a value: it reads as its English message (a refusal's str), and keeps
        # its template and values for a page.
        problem = _lore_said(error)
        return None, ValidationFailed("entry {number} ({title}): {problem}",
                                      values={"number": number, "title": repr(entry["title"][:40]), "problem": problem},
                                      field=field, rule="W-12")
    return entry, None


def draft_entry_kept(raw: Any, index: int) -> tuple[dict[str, Any] | None, str | None]:
    """:func:`draft_entry_check`, but an entry with a title and lore that breaks a W-12 limit is kept, flagged
    with the reason (a person fixes or leaves it in the review; accepting the whole draft leaves it out).
    None only when there is nothing to keep (not an object, no title or no lore)."""
    entry, problem = draft_entry_check(raw, index)
    if problem is None or not isinstance(raw, Mapping):
        return entry, problem
    title, lore, aliases = raw.get("title"), raw.get("lore", raw.get("content")), raw.get("aliases", [])
    if not isinstance(title, str) or not isinstance(lore, str):
        return None, problem
    aliases = [aliases] if isinstance(aliases, str) else aliases if isinstance(aliases, list) else []
    return {"title": re.sub(r"\s+", " ", title).strip(), "lore": lore.strip(),
            "aliases": [a.strip() for a in aliases if isinstance(a, str) and a.strip()], "canon": False,
            "flags": [problem]}, problem


def _fit(entries: list[dict[str, Any]], most: int) -> tuple[list[dict[str, Any]], list[str]]:
    """At most ``most`` entries: the unflagged ones first, in the model's order (A-1: a draft holds 4–16)."""
    if len(entries) <= most:
        return entries, []
    ranked = sorted(range(len(entries)), key=lambda i: (bool(entries[i].get("flags")), i))
    kept = sorted(ranked[:most])
    left = [entries[i]["title"][:40] for i in ranked[most:]]
    return [entries[i] for i in kept], [
        f"the model gave {len(entries)} entries; the draft keeps {most}, the most it holds (A-1); left out: "
        + ", ".join(repr(t) for t in left[:10]) + (f" and {len(left) - 10} more" if len(left) > 10 else "")
    ]


def _read_entries(stored: Mapping[str, Any]) -> tuple[list[Any], list[str]]:
    """The raw entries of an answer, and remarks (a cut-off last item)."""
    value, cut = parse_json(stored.get("text") or "", truncated=stored.get("finish_reason") == "length")
    value = text_repair(value)  # the answer's own JSON escapes can carry NUL or a lone surrogate too
    items = value.get("entries") if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise NotJson('The model\'s JSON has no "entries" list.')
    return items, (["the answer was cut off; its last, incomplete entry was dropped"] if cut else [])


def _canon_few(entries: list[dict[str, Any]]) -> list[str]:
    """A-1: "a few marked canon" — at least one, at most a quarter (rounded up) of the draft."""
    cap = max(1, -(-len(entries) // 4))
    marked = [e for e in entries if e["canon"]]
    first = next((e for e in entries if not e.get("flags")), None)  # a flagged entry waits for a person's look
    if not marked and first is not None:
        first["canon"] = True
        return ["no entry was marked canon; the first one is"]
    if len(marked) > cap:
        for extra in marked[cap:]:
            extra["canon"] = False
        return [f"{len(marked)} entries were marked canon; only the first {cap} stay canon"]
    return []


def _generate(run: _Run, client_for: Callable[[LlmConfig], LlmClient]) -> tuple[list[dict[str, Any]], list[str]]:
    job = run.job
    config = model_config_for(job.tenant)
    if not config.configured:
        raise _JobFailed("no_model_configured", "No model is configured, so Generate with AI cannot run (A-3).")
    client = client_for(config)
    low, high = limits.GENERATE_ENTRIES_MIN.value, limits.GENERATE_ENTRIES_MAX.value
    existing = {normalise_text(t) for t in job.input.get("titles", [])}
    messages = prompts.generate_messages(job.input["description"], job.input.get("language", ""),
                                         job.input.get("titles", []), low=low, high=high)
    attempts = max(1, settings.LOREWEAVE_GENERATE_ATTEMPTS)
    best: tuple[list[dict[str, Any]], list[str]] | None = None
    problems: list[str] = []
    for attempt in range(attempts):
        stored = _ask(run, client, f"attempt-{attempt}", messages, progress=int(90 * (attempt + 1) / attempts))
        problems = []
        entries: list[dict[str, Any]] = []
        remarks: list[str] = []
        readable = True
        try:
            items, remarks = _read_entries(stored)
        except NotJson as error:
            problems, items, readable = [str(error)], [], False
        seen: set[str] = set()
        flagged: list[str] = []
        for index, raw in enumerate(items):
            entry, problem = draft_entry_kept(raw, index)
            if entry is None:
                problems.append(problem or f"entry {index + 1} is not usable")
                continue
            title_key = normalise_text(entry["title"])
            if title_key in seen or title_key in existing:
                problems.append(f"entry {index + 1} ({entry['title'][:40]!r}) repeats a title")
                continue
            if problem:
                problems.append(problem)
                flagged.append(f"flagged: {problem}")
            seen.add(title_key)
            entries.append(entry)
        valid = sum(1 for e in entries if not e.get("flags"))
        if readable and valid < low:
            problems.insert(0, f"it gave {valid} usable entries; the draft needs {low}–{high} (W-12)")
        # Usable (enough valid entries): kept as it is, a bad entry flagged and too many cut to the best
        # ``high``; asking again would cost a whole call for what a person fixes in the review.
        if valid >= low:
            entries, cut = _fit(entries, high)
            kept = [p for p in problems if p not in {f[len("flagged: "):] for f in flagged}]
            best = (entries, [*remarks, *kept, *flagged, *cut])
            break
        run.check()
        messages = [*messages, {"role": "assistant", "content": stored.get("text") or ""},
                    {"role": "user", "content": prompts.generate_feedback(problems, low=low, high=high)}]
    if best is None:
        raise _JobFailed(
            "draft_not_usable",
            f"The model did not produce a usable draft in {attempts} attempt(s): " + "; ".join(problems[:5]) + ".",
        )
    entries, notes = best
    warnings = [f"dropped: {p}" for p in notes if p.startswith("entry")] + [p for p in notes if not p.startswith(("entry", "it gave"))]
    return entries, [*warnings, *_canon_few(entries), *grounding.draft_placeholders(entries)]


def chunks_of(text: str, max_chars: int) -> list[str]:
    """The notes cut at section boundaries into pieces of at most ``max_chars`` (a longer section alone, by paragraphs)."""
    pieces: list[str] = []
    for title, body in splitter.sections(text):
        section = f"## {title}\n\n{body}" if title else body
        if len(section) <= max_chars:
            pieces.append(section)
            continue
        current = ""
        for paragraph in re.split(r"\n[ \t]*\n", section):
            if current and len(current) + 2 + len(paragraph) > max_chars:
                pieces.append(current)
                current = paragraph
            else:
                current = f"{current}\n\n{paragraph}" if current else paragraph
        if current:
            pieces.append(current)
    chunks: list[str] = []
    for piece in pieces:
        if chunks and len(chunks[-1]) + 2 + len(piece) <= max_chars:
            chunks[-1] = f"{chunks[-1]}\n\n{piece}"
        else:
            chunks.append(piece)
    return chunks


def _merge(drafts: list[dict[str, Any]], entry: dict[str, Any]) -> bool:
    """Add ``entry`` unless an entry with its title exists; then its new lore joins that one (within W-12)."""
    key = normalise_text(entry["title"])
    for held in drafts:
        if normalise_text(held["title"]) == key:
            if normalise_text(entry["lore"]) not in normalise_text(held["lore"]):
                joined = f"{held['lore']}\n\n{entry['lore']}"
                if len(joined) <= limits.SMART_ENTRY_CONTENT.max:  # type: ignore[operator]
                    held["lore"] = joined
            held["aliases"] = list(dict.fromkeys([*held["aliases"], *entry["aliases"]]))[: limits.SMART_ALIASES.max_items]
            held["canon"] = held["canon"] or entry["canon"]
            return False
    drafts.append(entry)
    return True


def _split(run: _Run, client_for: Callable[[LlmConfig], LlmClient]) -> tuple[list[dict[str, Any]], list[str]]:
    job = run.job
    text = job.input["text"]
    if job.model == DETERMINISTIC:
        found = splitter.split_text(text)
        drafts: list[dict[str, Any]] = []
        for item in found:
            _merge(drafts, {"title": item.title, "lore": item.content, "aliases": [], "canon": False})
        if not drafts:
            raise _JobFailed("nothing_found", "No entries were found: each topic needs a title and at least 20 "
                                              "characters of lore (W-12).")
        run.check()
        return drafts, []
    config = model_config_for(job.tenant)
    if not config.configured:
        raise _JobFailed("no_model_configured", "The model this job was started with is no longer configured.")
    client = client_for(config)
    chunks = chunks_of(text, settings.LOREWEAVE_SPLIT_CHUNK_CHARS)
    drafts = []
    warnings: list[str] = []
    for n, chunk in enumerate(chunks):
        base = prompts.split_messages(chunk, part=n + 1, parts=len(chunks))
        stored = _ask(run, client, f"chunk-{n}", base, progress=int(100 * (n + 1) / len(chunks)))
        try:
            items, remarks = _read_entries(stored)
        except NotJson:
            # One bounded re-ask for this chunk, stored under its own key.
            again = [*base, {"role": "assistant", "content": stored.get("text") or ""},
                     {"role": "user", "content": prompts.JSON_ONLY}]
            stored = _ask(run, client, f"chunk-{n}-again", again, progress=int(100 * (n + 1) / len(chunks)))
            try:
                items, remarks = _read_entries(stored)
            except NotJson as error:
                raise _JobFailed("model_not_json", f"Part {n + 1} of {len(chunks)}: {error} Asked twice.") from None
        warnings.extend(f"part {n + 1}: {r}" for r in remarks)
        for index, raw in enumerate(items):
            entry, problem = draft_entry_kept(raw, index)
            if entry is None:
                warnings.append(f"part {n + 1}: dropped {problem}")
            elif problem:
                drafts.append(entry)  # flagged: kept apart, never merged into a valid entry
                warnings.append(f"part {n + 1}: flagged {problem}")
            else:
                _merge(drafts, entry)
    if not drafts:
        raise _JobFailed("nothing_found", "The model found no entries in these notes.")
    return drafts, [*warnings, *grounding.draft_ground(drafts, text)]


# --- the sweep (beat, every 15 s; and once when a worker starts) ---------------------------------


def jobs_sweep(*, now: Any = None) -> dict[str, int]:
    """Jobs nobody is working on: a queued job whose message was sent over
    ``LOREWEAVE_JOB_REQUEUE_SECONDS`` ago is sent again (a broker outage, a lost message); a running job
    whose lease lapsed (its worker died) is queued again for another worker (the answers it stored
    are reused), or failed with the reason once ``LOREWEAVE_JOB_MAX_RUNS`` workers have stopped on it.
    Sending a job twice is harmless: only one worker claims it. Returns the counts."""
    now = now or timezone.now()
    counts = {"requeued": 0, "taken_over": 0, "failed": 0}
    # The sweep serves every tenant: its two reads start unscoped; every write is the job's tenant's.
    for job in selectors.jobs_lease_lapsed(now=now, lease=_lease()):
        pk, tenant_id, token, lease_until, runs = job.pk, job.tenant_id, job.lease_token, job.lease_until, job.runs
        held = Job.objects.for_tenant(tenant_id).filter(pk=pk, state=JobState.RUNNING, lease_token=token,
                                                        lease_until=lease_until)
        if runs >= settings.LOREWEAVE_JOB_MAX_RUNS:
            message = (f"The worker running this job stopped before it finished ({runs} time(s)); "
                       "retry it to run it again.")
            if held.update(state=JobState.FAILED, finished_at=now, lease_until=None,
                           error={"code": "worker_lost", "message": message}):
                counts["failed"] += 1
                logger.warning("job %s failed: its worker stopped %s time(s)", pk, runs)
        elif held.update(state=JobState.QUEUED, lease_until=None, queued_at=now,
                         # The next worker reuses the answers stored, the valid ones only (a generate
                         # job's attempts are one conversation: kept as they are).
                         chunks=job.chunks if job.kind == JobKind.GENERATE else _usable_chunks(job)):
            counts["taken_over"] += 1
            logger.warning("job %s: its worker stopped (lease lapsed); queued for another", pk)
            _publish(tenant_id, pk)
    stale = now - timedelta(seconds=settings.LOREWEAVE_JOB_REQUEUE_SECONDS)
    for pk, tenant_id in selectors.jobs_queued_before(stale):
        # Marked first: the message may run at once (eager), and a broker still down is tried next grace.
        if Job.objects.for_tenant(tenant_id).filter(pk=pk, state=JobState.QUEUED).update(queued_at=now):
            counts["requeued"] += 1
            _publish(tenant_id, pk)
    return counts


# --- accepting ------------------------------------------------------------------------------


def _chosen(job: Job, entries: Sequence[Mapping[str, Any]] | None) -> list[ImportedEntry]:
    # The whole draft means its entries that need no look: a flagged one is accepted only when sent back.
    picked = [e for e in job.draft if not e.get("flags")] if entries is None else list(entries)
    if not isinstance(picked, list) or not picked:
        raise ValidationFailed("Tick at least one entry to accept, or leave the draft as it is.", field="entries")
    out: list[ImportedEntry] = []
    for index, raw in enumerate(picked):
        entry, refusal = draft_entry_refusal(raw, index)
        if refusal is not None:
            raise refusal
        assert entry is not None  # an entry, or the refusal of it
        out.append(ImportedEntry(title=entry["title"], content=entry["lore"], keys=tuple(entry["aliases"]),
                                 constant=entry["canon"], position=index))
    return out


def job_accept(
    *,
    actor: Actor,
    job: Job,
    entries: Sequence[Mapping[str, Any]] | None = None,
    book: Any = None,
    title: str | None = None,
    mode: str = "append",
    profile: str = Profile.SMART,
) -> dict[str, Any]:
    """Put a done job's draft (all of it, or the edited ``entries`` a person kept) into a book.

    ``book`` set: into that book (``mode`` append or replace); else a new book
    named ``title``. It is an import (``books.imports``): all or nothing, and
    the answer is its receipt, also kept on the job.
    """
    if job.state != JobState.DONE:
        raise Conflict("This job is {state}; only a done job's draft can be accepted.",
                       values={"state": Term(job.state)}, field="state")
    chosen = _chosen(job, entries)
    name = (title or "").strip() or (job.input.get("description", "")[:60].strip() or "Split notes")
    # The draft's values go straight into the importer (its plan, limits and receipt), not through a file.
    imported = ImportedBook(name=name, entries=tuple(chosen), source_format="native")
    if book is not None:
        target = access_book(actor, book, need="edit")
        result = book_import_into(actor=actor, book=target, imported=imported, mode=mode)  # type: ignore[arg-type]
    else:
        result = book_import_new(actor=actor, imported=imported, profile=profile, title=name)
    receipt = {**result.receipt, "job": job.pk}
    Job.objects.for_tenant(job.tenant).filter(pk=job.pk).update(accepted=receipt)
    return receipt


# --- model settings -------------------------------------------------------------------------


class AddressNotAllowed(DomainError):
    """A model server the operator does not let this tenant use (A-3, issue 26)."""

    status = 422
    code = "address_not_allowed"


# Why the outbound rule refused an address, as a page says it (lore_platform.outbound's reasons).
_ADDRESS_KINDS = {
    "metadata": Term("a cloud metadata address"),
    "loopback": Term("a loopback address"),
    "private": Term("a private network address"),
    "link-local": Term("a link-local address"),
    "unique-local": Term("a unique-local address"),
    "multicast": Term("a multicast address"),
    "unspecified": Term("the unspecified address"),
    "reserved": Term("not a public internet address"),
}


def _tenant_url_check(value: str) -> str | None:
    """An operator endpoint's name when ``value`` is its URL; else None once the URL passed the rule; else 422."""
    endpoint = selectors.operator_endpoint_for_url(value)
    if endpoint is not None:
        return endpoint.name
    if not settings.MODEL_TENANT_ENDPOINTS:
        raise AddressNotAllowed(
            "The operator does not let a workspace use a model server of its own; choose one of the "
            "operator's endpoints: {names}.",
            values={"names": ", ".join(selectors.operator_endpoints()) or "—"}, field="base_url", rule="A-3",
        )
    try:
        outbound.url_check(value)
    except outbound.OutboundRefused as refused:
        if refused.reason == "scheme":
            raise ValidationFailed("The base URL needs a host name or address.", field="base_url") from None
        if refused.reason == "unresolvable":
            raise AddressNotAllowed("The base URL's host {host} could not be resolved to an address.",
                                    values={"host": refused.host}, field="base_url", rule="A-3",
                                    details={"reason": refused.reason}) from None
        raise AddressNotAllowed(
            "The base URL's host {host} is {kind} ({address}); the server connects there only if the operator "
            "allow-lists it.",
            values={"host": refused.host, "kind": _ADDRESS_KINDS.get(refused.reason, _ADDRESS_KINDS["reserved"]),
                    "address": refused.address},
            field="base_url", rule="A-3", details={"reason": refused.reason},
        ) from None
    return None


def model_settings_set(*, actor: Actor, **fields: str) -> TenantModelSettings:
    """A tenant admin chooses the tenant's model: an operator endpoint (``endpoint``) or, where the operator
    permits it, a URL of its own (``base_url``, checked against the outbound rule), and the model name and
    key (blank = inherit). Nothing is stored when any field is refused.
    """
    if not actor.is_admin or not actor.can_write:
        raise PermissionDenied("Only tenant admins (with a write key) change the model settings.", field="model")
    row = TenantModelSettings.objects.for_tenant(actor.tenant).first() or TenantModelSettings(tenant=actor.tenant)
    values = {name: str(fields[name]).strip() for name in ("base_url", "api_key", "model", "endpoint")
              if fields.get(name) is not None}
    base_url, endpoint = values.get("base_url"), values.get("endpoint")
    if base_url and endpoint:
        raise ValidationFailed("Give either an operator endpoint or a base URL, not both.", field="base_url",
                               rule="A-3")
    if endpoint and endpoint not in selectors.operator_endpoints():
        raise AddressNotAllowed("The operator has no model endpoint “{name}”; the endpoints are: {names}.",
                                values={"name": endpoint, "names": ", ".join(selectors.operator_endpoints()) or "—"},
                                field="endpoint", rule="A-3", code="no_such_endpoint")
    if base_url:
        if not base_url.startswith(("http://", "https://")):
            raise ValidationFailed("The base URL starts with http:// or https://.", field="base_url")
        named = _tenant_url_check(base_url)
        if named is not None:  # the operator's own URL typed in: that is choosing its endpoint
            values["endpoint"], values["base_url"] = named, ""
        else:
            values["endpoint"] = ""
    elif endpoint:
        values["base_url"] = ""
    for name, value in values.items():
        setattr(row, name, value)
    row.updated_at = timezone.now()
    row.save()
    return row
