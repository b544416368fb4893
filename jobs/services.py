"""AI jobs (A-1..A-3): start, run, cancel, retry and accept.

A job is started by a service that checks the input limit (W-12) and the
tenant's job quotas (settings; refused with 429), writes the row and, after
commit, queues ``jobs.job_run`` with ids. The task calls :func:`job_execute`,
which stores every model answer on the job as it arrives (``chunks``, keyed by
split chunk or generate attempt) with a conditional update on the running
state: a retried or redelivered job reads the answers it has instead of asking
the model again, and a cancel between two calls stops the job at the next one.

Drafts are checked against W-12 (``books.limits.entry_fields_check``) before
they are shown. Accepting writes nothing itself: the chosen entries become a
native book file that goes through the importer (``books.imports``), so
append/replace, duplicates, every limit (all or nothing) and the receipt are
those of an import.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from books import limits
from books.access import access_book
from books.formats import ImportedBook, ImportedEntry, normalise_text, write_native
from books.imports import book_import_into, book_import_new
from books.models import Entry, Profile
from lore_platform import outbound
from lore_platform.errors import Conflict, DomainError, PermissionDenied, Term, ValidationFailed
from jobs import grounding, prompts, selectors, splitter
from jobs.llm import Completion, LlmClient, LlmConfig, LlmError, NotJson, OpenAICompatible, Usage, parse_json
from jobs.models import ACTIVE_STATES, FINAL_STATES, Job, JobKind, JobState, TenantModelSettings
from jobs.selectors import model_config_for
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Tenant
from lore_platform.text import text_clean, text_repair

DETERMINISTIC = "deterministic"


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
            details={"limit": concurrent, "actual": active, "unit": "jobs at once"},
        )
    per_day = settings.LOREWEAVE_JOBS_PER_DAY
    since = timezone.now() - timedelta(hours=24)
    today = jobs.filter(created_at__gt=since).count()
    if today >= per_day:
        oldest = jobs.filter(created_at__gt=since).order_by("created_at").values_list("created_at", flat=True).first()
        retry = int(((oldest or timezone.now()) + timedelta(hours=24) - timezone.now()).total_seconds()) + 1
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
    from jobs.tasks import job_run

    tenant_id, job_id = job.tenant_id, job.pk
    transaction.on_commit(lambda: job_run.delay(tenant_id, job_id))


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
    """Cancel a queued or running job; a running one stops before its next model call."""
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
    """Run a failed or cancelled job again; the model answers it already has are reused, not asked again."""
    _write_check(actor)
    with transaction.atomic():
        Tenant.objects.select_for_update().filter(pk=actor.tenant.pk).first()
        locked = Job.objects.for_tenant(job.tenant).select_for_update().get(pk=job.pk)
        if locked.state not in (JobState.FAILED, JobState.CANCELLED):
            raise Conflict("This job is {state}; only failed or cancelled jobs can be retried.",
                           values={"state": Term(locked.state)}, field="state")
        jobs = Job.objects.for_tenant(actor.tenant)
        active = jobs.filter(state__in=ACTIVE_STATES).count()
        if active >= settings.LOREWEAVE_JOBS_CONCURRENT:
            _quota_check(actor.tenant)  # raises the concurrency refusal
        locked.state = JobState.QUEUED
        locked.error = {}
        locked.finished_at = None
        locked.save(update_fields=["state", "error", "finished_at"])
        _enqueue(locked)
    return locked


# --- running (the task's body) -------------------------------------------------------------


def job_execute(*, tenant: int | Tenant, job_id: int, client_for: Callable[[LlmConfig], LlmClient] | None = None) -> str:
    """Run one job to its end; safe to call again (redelivery, retry): finished jobs are left alone."""
    tenant_obj = tenant if isinstance(tenant, Tenant) else Tenant.objects.get(pk=tenant)
    jobs = Job.objects.for_tenant(tenant_obj)
    job = jobs.filter(pk=job_id).first()
    if job is None or job.state in FINAL_STATES:
        return job.state if job else "missing"
    jobs.filter(pk=job.pk, state=JobState.QUEUED).update(state=JobState.RUNNING, started_at=timezone.now())
    job.refresh_from_db()
    if job.state != JobState.RUNNING:
        return job.state
    client_for = client_for or llm_client_for
    try:
        if job.kind == JobKind.GENERATE:
            draft, warnings = _generate(job, client_for)
        else:
            draft, warnings = _split(job, client_for)
    except _Cancelled:
        return JobState.CANCELLED
    except LlmError as error:
        return _finish(job, JobState.FAILED, error={"code": error.code, "message": error.message})
    except _JobFailed as error:
        return _finish(job, JobState.FAILED, error={"code": error.code, "message": error.message})
    return _finish(job, JobState.DONE, draft=draft, warnings=warnings)


def _finish(job: Job, state: str, **fields: Any) -> str:
    fields.setdefault("error", {})
    updated = Job.objects.for_tenant(job.tenant).filter(pk=job.pk, state=JobState.RUNNING).update(
        state=state, progress=100 if state == JobState.DONE else job.progress, finished_at=timezone.now(),
        usage=_usage(job.chunks).as_dict(), **fields,
    )
    return state if updated else JobState.CANCELLED


def _usage(chunks: Mapping[str, Any]) -> Usage:
    total = Usage()
    for stored in chunks.values():
        total = total + Usage.from_dict(stored.get("usage"))
    return total


def _ask(job: Job, client: LlmClient, key: str, messages: list[dict[str, str]], *, progress: int) -> dict[str, Any]:
    """The model's answer for ``key``: the stored one, else asked now and stored (unless the job was cancelled)."""
    stored = job.chunks.get(key)
    if stored is not None:
        return dict(stored)
    completion: Completion = client.complete(messages, schema=prompts.ENTRIES_SCHEMA, schema_name="entries")
    # What the model said is no caller's input to refuse: NUL or a lone surrogate in it is repaired
    # (U+FFFD), so the draft can be stored (PostgreSQL's jsonb takes neither) and accepted.
    stored = {"text": text_clean(completion.text), "finish_reason": completion.finish_reason, "usage": completion.usage.as_dict()}
    job.chunks = {**job.chunks, key: stored}
    job.progress = min(99, progress)
    updated = Job.objects.for_tenant(job.tenant).filter(pk=job.pk, state=JobState.RUNNING).update(
        chunks=job.chunks, progress=job.progress, usage=_usage(job.chunks).as_dict()
    )
    if not updated:
        raise _Cancelled()
    return stored


def _cancelled_check(job: Job) -> None:
    if not Job.objects.for_tenant(job.tenant).filter(pk=job.pk, state=JobState.RUNNING).exists():
        raise _Cancelled()


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


def _generate(job: Job, client_for: Callable[[LlmConfig], LlmClient]) -> tuple[list[dict[str, Any]], list[str]]:
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
        stored = _ask(job, client, f"attempt-{attempt}", messages, progress=int(90 * (attempt + 1) / attempts))
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
        _cancelled_check(job)
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


def _split(job: Job, client_for: Callable[[LlmConfig], LlmClient]) -> tuple[list[dict[str, Any]], list[str]]:
    text = job.input["text"]
    if job.model == DETERMINISTIC:
        found = splitter.split_text(text)
        drafts: list[dict[str, Any]] = []
        for item in found:
            _merge(drafts, {"title": item.title, "lore": item.content, "aliases": [], "canon": False})
        if not drafts:
            raise _JobFailed("nothing_found", "No entries were found: each topic needs a title and at least 20 "
                                              "characters of lore (W-12).")
        _cancelled_check(job)
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
        stored = _ask(job, client, f"chunk-{n}", base, progress=int(100 * (n + 1) / len(chunks)))
        try:
            items, remarks = _read_entries(stored)
        except NotJson:
            # One bounded re-ask for this chunk, stored under its own key.
            again = [*base, {"role": "assistant", "content": stored.get("text") or ""},
                     {"role": "user", "content": prompts.JSON_ONLY}]
            stored = _ask(job, client, f"chunk-{n}-again", again, progress=int(100 * (n + 1) / len(chunks)))
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


# --- accepting ------------------------------------------------------------------------------


def _chosen(job: Job, entries: Sequence[Mapping[str, Any]] | None) -> list[ImportedEntry]:
    # The whole draft means its entries that need no look: a flagged one is accepted only when sent back.
    picked = [e for e in job.draft if not e.get("flags")] if entries is None else list(entries)
    if not isinstance(picked, list) or not picked:
        raise ValidationFailed("Pick at least one entry to accept.", field="entries")
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
    data = write_native([ImportedBook(name=name, entries=tuple(chosen), source_format="native")])
    if book is not None:
        target = access_book(actor, book, need="edit")
        result = book_import_into(actor=actor, book=target, data=data, filename="draft.json", mode=mode)  # type: ignore[arg-type]
    else:
        result = book_import_new(actor=actor, data=data, filename="draft.json", profile=profile, title=name)
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
