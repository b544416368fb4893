"""The AI job pages (issue 16, point 5; A-1..A-3): start a job of each kind, follow it (a progress
bar that polls itself until the job ends), review its draft and accept all, some or none of it.

Every decision is the jobs services' (limits, quotas, W-12, the import on accept); these views
parse the form, call them and show their refusals inline with the rule ID.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _, gettext_lazy
from django.views.decorators.http import require_POST

from books.access import access_book, book_can_edit
from books.selectors import book_list
from jobs import selectors, services
from jobs.models import ACTIVE_STATES, Job, JobKind, JobState
from lore_platform.errors import DomainError, PermissionDenied, ValidationFailed
from web.forms import (
    GenerateForm,
    ModelSettingsForm,
    SplitForm,
)
from web.refusals import receipt_said, refusal_as_message, refusal_on_form, refusal_text
from web.session import actor_required, page_actor
from web.views.common import is_htmx, page_of, refusals_as_pages

JOBS_PER_PAGE = 50
POLL_SECONDS = 1
TARGET_BOOKS_MAX = 200  # the review's "existing book" list

STATE_LABELS: dict[str, Any] = {
    JobState.QUEUED: gettext_lazy("Queued"),
    JobState.RUNNING: gettext_lazy("Running"),
    JobState.DONE: gettext_lazy("Done"),
    JobState.FAILED: gettext_lazy("Failed"),
    JobState.CANCELLED: gettext_lazy("Cancelled"),
}
KIND_LABELS: dict[str, Any] = {
    JobKind.GENERATE: gettext_lazy("Generate with AI"),
    JobKind.SPLIT: gettext_lazy("Split text into entries"),
}
# What a failure means and what to do, by the job's error code; the service's message follows it.
FAILURE_HINTS = {
    "no_model_configured": gettext_lazy("No model is configured for this workspace. An admin can set one in the model settings."),
    "model_auth_failed": gettext_lazy("The model server did not accept the key. An admin should check the model settings."),
    "model_not_found": gettext_lazy("The model server does not know this model. An admin should check the model name."),
    "model_rate_limited": gettext_lazy("The model server is busy. Try again in a few minutes."),
    "model_timeout": gettext_lazy("The model server took too long to answer. Try again later."),
    "model_unreachable": gettext_lazy("The model server could not be reached. Try again later or ask an admin."),
    "model_server_error": gettext_lazy("The model server failed. Try again later."),
    "model_bad_request": gettext_lazy("The model server refused the request."),
    "model_bad_response": gettext_lazy("The model server's answer could not be read."),
    "model_not_json": gettext_lazy("The model did not answer in the format asked for, even when asked again."),
    "draft_not_usable": gettext_lazy("The model could not write a usable draft (4–16 valid entries)."),
    "nothing_found": gettext_lazy("No entries were found in the text."),
}


def _editable_books(actor: Any) -> list[Any]:
    return [book for book in book_list(actor=actor)[:TARGET_BOOKS_MAX] if book_can_edit(actor, book)]


def _target_book(actor: Any, raw: Any) -> Any:
    """The book named by ``?book=`` (a link from a book's page), if the actor may read it."""
    if not raw:
        return None
    return access_book(actor, raw)


def _start_page(request: HttpRequest, kind: str, form: Any, start: Callable[[dict[str, Any]], Job]) -> HttpResponse:
    """The start form of one job kind: on a valid post, start the job and go to its page; a refusal
    (limits W-12, quotas A-3, no model) stays on the form at the service's status."""
    actor = page_actor(request)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            with refusal_on_form(form) as refused:
                job = start(form.cleaned_data)
            if not refused:
                return redirect("web-job", job_id=job.pk)
            status = refused.status if refused.status != 404 else 400
    return render(request, "web/job_start.html", {
        "form": form, "kind": kind, "configured": selectors.model_config_for(actor.tenant).configured,
        "book": _target_book(actor, request.GET.get("book")),
    }, status=status)


@actor_required
@refusals_as_pages
def job_generate(request: HttpRequest) -> HttpResponse:
    """A-1: a description (≤4,000 characters) → a draft; with no model, the page says so (A-3)."""
    actor = page_actor(request)
    form = GenerateForm(request.POST or None, initial={"book": request.GET.get("book", "")},
                        books=book_list(actor=actor)[:TARGET_BOOKS_MAX])
    return _start_page(request, JobKind.GENERATE, form, lambda data: services.job_generate_start(
        actor=actor, description=data["description"], language=data["language"] or None, book_id=data["book"],
    ))


@actor_required
@refusals_as_pages
def job_split(request: HttpRequest) -> HttpResponse:
    """A-2: notes (≤40,000 characters) → entries; with no model, the deterministic splitter."""
    actor = page_actor(request)
    form = SplitForm(request.POST or None, initial={"book": request.GET.get("book", "")},
                     books=_editable_books(actor))
    return _start_page(request, JobKind.SPLIT, form, lambda data: services.job_split_start(
        actor=actor, text=data["text"], book_id=data["book"],
    ))


@actor_required
@refusals_as_pages
def job_list(request: HttpRequest) -> HttpResponse:
    actor = page_actor(request)
    page = page_of(selectors.jobs_visible(actor), request, JOBS_PER_PAGE)
    rows = [{"job": job, "state": STATE_LABELS.get(job.state, job.state), "kind": KIND_LABELS.get(job.kind, job.kind)}
            for job in page.object_list]
    return render(request, "web/jobs.html", {"page": page, "rows": rows})


def _review_rows(job: Job, posted: Any = None) -> list[dict[str, Any]]:
    """One row per draft entry: the draft's values, or what the person posted (kept on a refusal)."""
    rows = []
    for i, entry in enumerate(job.draft or []):
        row = {"i": i, "title": entry.get("title", ""), "lore": entry.get("lore", ""),
               "aliases": ", ".join(entry.get("aliases", [])), "canon": bool(entry.get("canon")),
               # A flagged entry (over a limit, or not found in the notes) waits for a person's tick.
               "keep": not entry.get("flags"), "flags": entry.get("flags", []), "error": None}
        if posted is not None:
            row.update(title=posted.get(f"title-{i}", ""), lore=posted.get(f"lore-{i}", ""),
                       aliases=posted.get(f"aliases-{i}", ""), canon=posted.get(f"canon-{i}") == "on",
                       keep=posted.get(f"keep-{i}") == "on")
        rows.append(row)
    return rows


def _job_context(request: HttpRequest, job: Job, *, rows: list[dict[str, Any]] | None = None,
                 review: dict[str, Any] | None = None, review_error: str | None = None) -> dict[str, Any]:
    actor = page_actor(request)
    error = job.error or {}
    done = job.state == JobState.DONE
    target = job.input.get("book")
    return {
        "job": job,
        "active": job.state in ACTIVE_STATES,
        "poll": POLL_SECONDS,
        "state": STATE_LABELS.get(job.state, job.state),
        "kind": KIND_LABELS.get(job.kind, job.kind),
        "failure": {"hint": FAILURE_HINTS.get(error.get("code", "")), "message": error.get("message", "")}
        if job.state == JobState.FAILED else None,
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "calls": 0, **(job.usage or {})},
        "can_cancel": actor.can_write and job.state in ACTIVE_STATES,
        "can_retry": actor.can_write and job.state in (JobState.FAILED, JobState.CANCELLED),
        "rows": (rows if rows is not None else _review_rows(job)) if done else [],
        "books": _editable_books(actor) if done else [],
        "review": review or {"target": "existing" if target else "new", "book": str(target or ""), "mode": "append",
                             "title": job.input.get("description", "")[:60].strip() or _("Entries from my notes")},
        "review_error": review_error,
        "receipt": job.accepted,
        "text_chars": len(job.input.get("text", "")),
    }


@actor_required
@refusals_as_pages
def job_page(request: HttpRequest, job_id: int) -> HttpResponse:
    """The job: state and progress (the partial polls itself while the job is queued or running)."""
    job = selectors.access_job(page_actor(request), job_id)
    context = _job_context(request, job)
    if is_htmx(request) and request.GET.get("part") == "job":
        return render(request, "web/_job.html", context)
    return render(request, "web/job.html", context)


def _job_action(request: HttpRequest, job_id: int, action: Callable[..., Job], done: str) -> HttpResponse:
    """Cancel or retry, back to the job page; a refusal there (its state, a quota) is said on it."""
    actor = page_actor(request)
    with refusal_as_message(request) as refused:
        action(actor=actor, job=selectors.access_job(actor, job_id))
    if not refused:
        messages.success(request, done)
    return redirect("web-job", job_id=job_id)


@require_POST
@actor_required
@refusals_as_pages
def job_cancel(request: HttpRequest, job_id: int) -> HttpResponse:
    return _job_action(request, job_id, services.job_cancel, _("Job cancelled."))


@require_POST
@actor_required
@refusals_as_pages
def job_retry(request: HttpRequest, job_id: int) -> HttpResponse:
    return _job_action(request, job_id, services.job_retry, _("Job started again."))


def _kept_entries(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    kept = [row for row in rows if row["keep"]]
    entries = [{"title": row["title"], "lore": row["lore"], "canon": row["canon"],
                "aliases": [a.strip() for a in row["aliases"].split(",") if a.strip()]} for row in kept]
    return entries, [row["i"] for row in kept]


def _entry_index(field: str | None) -> int | None:
    """``entries[3]`` → 3: which kept entry the service refused."""
    if field and field.startswith("entries[") and field.endswith("]") and field[8:-1].isdigit():
        return int(field[8:-1])
    return None


@require_POST
@actor_required
@refusals_as_pages
def job_accept(request: HttpRequest, job_id: int) -> HttpResponse:
    """Accept the ticked, edited entries into a new book or an existing one: an import, all or nothing."""
    actor = page_actor(request)
    job = selectors.access_job(actor, job_id)
    rows = _review_rows(job, request.POST)
    review = {key: request.POST.get(key, "") for key in ("target", "book", "title")}
    review["mode"] = request.POST.get("mode") or "append"  # no mode choice is shown when there is no book to go into
    entries, kept = _kept_entries(rows)
    into_existing = review["target"] == "existing"
    try:
        if into_existing and not review["book"]:  # the form's own choice, read before the service runs
            raise ValidationFailed(_("Choose the book the entries go into."), field="book")
        receipt = services.job_accept(actor=actor, job=job, entries=entries,
                                      book=review["book"] if into_existing else None,
                                      title=review["title"], mode=review["mode"])
    except DomainError as exc:
        if exc.status == 404 and exc.field != "book":
            raise
        text = refusal_text(exc)
        index = _entry_index(exc.field)
        if index is not None and index < len(kept):
            rows[kept[index]]["error"] = text
            text = _("Entry %(n)s cannot be accepted as it is: see its message below.") % {"n": kept[index] + 1}
        context = _job_context(request, job, rows=rows, review=review, review_error=text)
        return render(request, "web/job.html", context, status=exc.status if exc.status != 404 else 400)
    book = receipt.get("book", {}).get("id")
    request.session["web_receipt"] = receipt_said(receipt)
    messages.success(request, _("%(n)s entries accepted from the draft.") % {"n": receipt.get("added", 0)})
    return redirect("web-book", book_id=book) if book else redirect("web-job", job_id=job.pk)


@actor_required
@refusals_as_pages
def job_model_settings(request: HttpRequest) -> HttpResponse:
    """The tenant's model (base URL, model, key) — admins only; the key is never shown back."""
    actor = page_actor(request)
    if not actor.is_admin:
        raise PermissionDenied(_("Only workspace admins see and change the model settings."), field="model")
    current = selectors.model_settings_describe(actor.tenant)
    choices = {"endpoints": [e["name"] for e in current["endpoints"]], "tenant_endpoints": current["tenant_endpoints"]}
    form = ModelSettingsForm(request.POST or None, **choices)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            # A URL of the workspace's own replaces the endpoint chosen; without one the choice counts.
            if data.get("base_url"):
                fields = {"base_url": data["base_url"], "model": data["model"]}
            else:
                fields = {"endpoint": data["endpoint"], "base_url": "", "model": data["model"]}
            if data["clear_key"]:
                fields["api_key"] = ""
            elif data["api_key"]:
                fields["api_key"] = data["api_key"]
            with refusal_on_form(form) as refused:
                services.model_settings_set(actor=actor, **fields)
            if not refused:
                messages.success(request, _("Model settings saved."))
                return redirect("web-job-model")
            status = refused.status
        else:
            status = 400
    if request.method != "POST":
        own = "base_url" in current["overridden"]
        form = ModelSettingsForm(initial={"base_url": current["base_url"] if own else "",
                                          "endpoint": current["endpoint"] if "endpoint" in current["overridden"] else "",
                                          "model": current["model"] if "model" in current["overridden"] else ""},
                                 **choices)
    return render(request, "web/job_model.html", {"form": form, "current": current}, status=status)
