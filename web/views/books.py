"""My books: list, create, import with its receipt, the book page (editor, sharing, export) and
the preview box (issue 15, points 3–5; I-2..I-4, P-1, W-10)."""
from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import NON_FIELD_ERRORS
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _, gettext_lazy
from django.views.decorators.http import require_POST

from books import imports
from books.access import access_book, access_entry, book_can_edit
from books.exports import book_export
from books.formats import EXPORT_FORMATS
from books.living import living_world_off_notice
from books.models import Book, IndexingState, Profile, Scope
from books.selectors import ENTRY_SORTS, book_list, entries_notes, entry_list
from books.services import bulk
from books.services.book_write import book_create, book_set_active, book_update
from books.services.entry_write import (
    entry_create,
    entry_delete,
    entry_move,
    entry_update,
)
from cast import turns
from lore_platform.errors import ValidationFailed
from retrieval.engine import values as ev
from sharing import selectors as sharing, services as sharing_services
from web import selectors as web_selectors
from web.forms import (
    BookCreateForm,
    EntryForm,
    ImportIntoForm,
    ImportNewForm,
    PreviewForm,
    VisibilityForm,
)
from web.refusals import (
    Refused,
    form_page_status,
    receipt_said,
    refusal_as_message,
    refusal_on_form,
)
from web.session import actor_required, page_actor
from web.views.common import (
    is_htmx,
    page_of,
    query_without_page,
    refusals_as_pages,
)

# The page's words for a 412: a person, not a client, holds the stale version.
STALE_ENTRY_TEXT = gettext_lazy(
    "This entry was changed in another tab or by someone else after you opened this form, so your changes "
    "were not saved. Copy what you need, reload the entry, and make your change again."
)

ENTRIES_PER_PAGE = 50  # the editor pages a 2,000-entry book: server time and browser stay quick (point 8)


def _upload(form: Any) -> tuple[bytes, str]:
    upload = form.cleaned_data["file"]
    return upload.read(), upload.name


@actor_required
@refusals_as_pages
def my_books(request: HttpRequest) -> HttpResponse:
    actor = page_actor(request)
    create = BookCreateForm(request.POST if request.POST.get("action") == "create" else None)
    upload = ImportNewForm(request.POST if request.POST.get("action") == "import" else None,
                           request.FILES if request.POST.get("action") == "import" else None)
    receipt = None
    refused: Refused | None = None
    if request.method == "POST" and request.POST.get("action") == "create" and create.is_valid():
        data = create.cleaned_data
        with refusal_on_form(create) as refused:
            book = book_create(actor=actor, title=data["title"], profile=data["profile"],
                               language=data["language"], description=data["description"])
        if not refused:
            return redirect("web-book", book_id=book.pk)
    if request.method == "POST" and request.POST.get("action") == "import" and upload.is_valid():
        raw, filename = _upload(upload)
        with refusal_on_form(upload) as refused:
            result = imports.book_import_new(actor=actor, data=raw, filename=filename,
                                             profile=upload.cleaned_data["profile"],
                                             title=upload.cleaned_data["title"] or None)
        if not refused:
            receipt = receipt_said(result.receipt)
            language = upload.cleaned_data["language"]
            if result.book is not None and language and language != result.book.language:
                book_update(actor=actor, book=result.book, language=language)
            if result.book is not None:
                request.session["web_receipt"] = receipt
                return redirect("web-book", book_id=result.book.pk)
    page = page_of(book_list(actor=actor), request, 50)
    return render(request, "web/books.html", {"page": page, "create": create, "upload": upload, "receipt": receipt},
                  status=form_page_status(create, upload, refused=refused))


# What a row of the editor reads: the list page loads these columns only (no keys, settings or
# JSON it does not show), which halves the gathering on a 2,000-entry book (bench/pages_bench.py).
_ROW_COLUMNS = ("id", "title", "content", "position", "enabled", "constant", "usage_count", "indexing_state",
                "unresolved_channels", "regex_overruns")


def _row_url(name: str, book: Book) -> tuple[str, str]:
    """An entry url of ``book`` split around the entry id: one reverse per page, not per row."""
    prefix, _zero, suffix = reverse(name, args=[book.pk, 0]).rpartition("/0")
    return f"{prefix}/", suffix


def _row(entry: Any, note: Any, urls: dict[str, tuple[str, str]], labels: dict[str, str], smart: bool) -> dict[str, Any]:
    # Everything a row shows is resolved here, flat: the template then does plain dict lookups
    # (a row of {% url %}, {% blocktranslate %} and entry.attribute chains costs more than the query).
    pk = entry.pk
    title = entry.title or labels["untitled"]
    if not entry.enabled:
        state, state_class = labels["disabled"], ""
    elif smart and entry.indexing_state == IndexingState.PENDING:
        state, state_class = labels["pending"], "pending"
    elif smart and entry.indexing_state == IndexingState.FAILED:
        state, state_class = labels["failed"], ""
    else:
        state, state_class = labels["enabled"], ""
    # Numbers as text: the template would localize each one (a few hundred calls a page).
    return {
        "pk": str(pk),
        "n": str(entry.position + 1),
        "position": str(entry.position),
        "title": title,
        "canon": entry.constant,
        "enabled": entry.enabled,
        "state": state,
        "state_class": state_class,
        "used": str(entry.usage_count),
        "warnings": note.warnings,
        "edit": f"{urls['edit'][0]}{pk}{urls['edit'][1]}",
        "move": f"{urls['move'][0]}{pk}{urls['move'][1]}",
        "select_label": labels["select"] % {"t": title},
        "top_label": labels["top"] % {"t": title},
        "bottom_label": labels["bottom"] % {"t": title},
    }


def _row_labels() -> dict[str, str]:
    return {
        "untitled": _("(untitled)"), "disabled": _("Disabled"), "enabled": _("Enabled"),
        "pending": _("Indexing for smart retrieval…"), "failed": _("Indexing failed"),
        "select": _("Select %(t)s"), "top": _("Move %(t)s to the top"), "bottom": _("Move %(t)s to the bottom"),
    }


def _editor_context(request: HttpRequest, book: Book) -> dict[str, Any]:
    actor = page_actor(request)
    get = request.GET
    flags = {"enabled": True, "disabled": False}
    enabled = flags.get(get.get("state", ""))
    canon = {"canon": True, "relevant": False}.get(get.get("kind", ""))
    never_used = True if get.get("never_used") else None
    sort = get.get("sort") or "position"
    sort = sort if sort in ENTRY_SORTS or sort == "title" else "position"
    entries = entry_list(book=book, enabled=enabled, canon=canon, never_used=never_used, q=get.get("q"),
                         sort="position" if sort == "title" else sort).only(*_ROW_COLUMNS)
    if sort == "title":
        entries = entries.order_by("title", "id")
    page = page_of(entries, request, ENTRIES_PER_PAGE)
    rows = list(page.object_list)
    model = get.get("model") or "gpt-4o"
    meter = web_selectors.book_canon_meter_of(book, model)
    share = sharing.book_sharing_state(actor, book)
    notes = entries_notes(book, rows, model_id=model)
    smart = book.profile == Profile.SMART
    can_edit = book_can_edit(actor, book)
    urls = {"edit": _row_url("web-entry", book), "move": _row_url("web-entry-move", book)}
    labels = _row_labels()
    return {
        "book": book,
        "page": page,
        "rows": [_row(entry, notes[entry.pk], urls, labels, smart) for entry in rows],
        "query": query_without_page(request),
        "filters": {"state": get.get("state", ""), "kind": get.get("kind", ""), "q": get.get("q", ""),
                    "never_used": bool(get.get("never_used")), "sort": sort, "model": model},
        "sorts": [("position", _("List order")), ("title", _("Display name")), ("most_used", _("Most used")),
                  ("recently_edited", _("Recently edited"))],
        "meter": meter,
        "pending": smart and any(r.enabled and r.indexing_state == IndexingState.PENDING for r in rows),
        "can_edit": can_edit,
        # Dragging means "put it here in the list": only the unfiltered list order shows that.
        "draggable": can_edit and sort == "position" and not any(
            get.get(name) for name in ("state", "kind", "never_used", "q")),
        "share": share,
        "link_path": reverse("web-link", args=[share.share.link_token]) if share.share and share.link_active else None,
        "visibility": VisibilityForm(initial={"visibility": book.visibility}),
        "import_into": ImportIntoForm(),
        "entry_form": EntryForm(book=book, is_admin=actor.is_admin),
        "export_formats": EXPORT_FORMATS,
        "receipt": request.session.pop("web_receipt", None),
        "models": [m for m, _label in PreviewForm.base_fields["model"].choices if m],  # type: ignore[attr-defined]
        "smart": smart,
        # S-12: the collection toggle, for the admins who edit server-wide collections.
        "collection": can_edit and book.profile == Profile.SERVER and book.scope == Scope.SERVER,
    }


@actor_required
@refusals_as_pages
def book_page(request: HttpRequest, book_id: int) -> HttpResponse:
    book = access_book(page_actor(request), book_id)
    context = _editor_context(request, book)
    if is_htmx(request) and request.GET.get("part") == "entries":
        return render(request, "web/_entries.html", context)
    return render(request, "web/book.html", context)


@require_POST
@actor_required
@refusals_as_pages
def book_import_into(request: HttpRequest, book_id: int) -> HttpResponse:
    actor = page_actor(request)
    book = access_book(actor, book_id, need="edit")
    form = ImportIntoForm(request.POST, request.FILES)
    if not form.is_valid():
        raise ValidationFailed(_("Choose a file to import."), field="file")
    data, filename = _upload(form)
    result = imports.book_import_into(actor=actor, book=book, data=data, filename=filename,
                                      mode=form.cleaned_data["mode"])
    request.session["web_receipt"] = receipt_said(result.receipt)
    return redirect("web-book", book_id=book.pk)


@require_POST
@actor_required
@refusals_as_pages
def book_visibility(request: HttpRequest, book_id: int) -> HttpResponse:
    """P-1: private / unlisted / public (publishing needs ≥10 entries)."""
    actor = page_actor(request)
    book = access_book(actor, book_id, need="edit")
    was_living = book.living_world
    # P-1's floor and the like are said on the book page; only a book not mine is a page of its own.
    with refusal_as_message(request, reraise=(404,)) as refused:
        sharing_services.book_visibility_set(actor=actor, book=book, visibility=request.POST.get("visibility", ""))
    if not refused:
        messages.success(request, _("Visibility saved."))
        if was_living and not book.living_world:  # the API's notice, on the page (L-1)
            notice = living_world_off_notice(book)
            messages.warning(request, f"{notice['message']} ({notice['rule']})")
    return redirect("web-book", book_id=book.pk)


@require_POST
@actor_required
@refusals_as_pages
def book_link_rotate(request: HttpRequest, book_id: int) -> HttpResponse:
    actor = page_actor(request)
    sharing_services.book_link_rotate(actor=actor, book=access_book(actor, book_id, need="edit"))
    messages.success(request, _("New link made: the old link no longer opens the book."))
    return redirect("web-book", book_id=book_id)


@require_POST
@actor_required
@refusals_as_pages
def book_living_world(request: HttpRequest, book_id: int) -> HttpResponse:
    actor = page_actor(request)
    book = access_book(actor, book_id, need="edit")
    # Every refusal here (L-1: the living world is for private world books) is said on the book page.
    with refusal_as_message(request, reraise=()):
        book_update(actor=actor, book=book, living_world=request.POST.get("living_world") == "on")
    return redirect("web-book", book_id=book_id)


@actor_required
@refusals_as_pages
def book_export_page(request: HttpRequest, book_id: int) -> HttpResponse:
    actor = page_actor(request)
    payload, content_type, filename = book_export(actor=actor, book=access_book(actor, book_id),
                                                  to=request.GET.get("format", ""))
    response = HttpResponse(payload, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_POST
@actor_required
@refusals_as_pages
def entry_add(request: HttpRequest, book_id: int) -> HttpResponse:
    actor = page_actor(request)
    book = access_book(actor, book_id, need="edit")
    form = EntryForm(request.POST, book=book, is_admin=actor.is_admin)
    if form.is_valid():
        with refusal_on_form(form) as refused:
            entry_create(actor=actor, book=book, **form.fields_for_service())
        if not refused:
            messages.success(request, _("Entry added."))
            return redirect("web-book", book_id=book.pk)
    context = _editor_context(request, book)
    context["entry_form"] = form
    return render(request, "web/book.html", context, status=400)


def _back_to_list(request: HttpRequest, book: Book) -> str:
    """Where the entry form returns: the editor page it was opened from (same site only)."""
    back = request.POST.get("next") or request.GET.get("next") or ""
    return back if back.startswith("/") and not back.startswith("//") else reverse("web-book", args=[book.pk])


@actor_required
@refusals_as_pages
def entry_page(request: HttpRequest, book_id: int, entry_id: int) -> HttpResponse:
    """An entry's own form (per profile): readers see it, editors change it (the services decide)."""
    actor = page_actor(request)
    book = access_book(actor, book_id, need="edit" if request.method == "POST" else "read")
    entry = access_entry(actor, book, entry_id)
    can_edit = book_can_edit(actor, book)
    form = EntryForm(request.POST if request.method == "POST" else None, book=book, is_admin=actor.is_admin,
                     entry=entry)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            with refusal_on_form(form) as refused:
                entry_update(actor=actor, entry=entry, expected_version=form.expected_version(),
                             **form.fields_for_service())
            if refused.status == 412:
                # Changed in another tab (or by someone else) since this form was loaded: nothing was
                # saved; the person's text stays in the form, the hidden version stays the old one, so
                # saving again is refused again until they reload (and re-apply what they meant).
                status = 412
                form.errors[NON_FIELD_ERRORS] = form.error_class([str(STALE_ENTRY_TEXT)])
            if not refused:
                messages.success(request, _("Entry saved."))
                return redirect(_back_to_list(request, book))
    if not can_edit:
        for field in form.fields.values():
            field.disabled = True
    note = entries_notes(book, [entry])[entry.pk]
    return render(request, "web/entry.html", {
        "book": book, "entry": entry, "form": form, "can_edit": can_edit, "warnings": note.warnings,
        "decorators": note.decorators, "next": _back_to_list(request, book), "smart": book.profile == Profile.SMART,
    }, status=status)


@require_POST
@actor_required
@refusals_as_pages
def entry_delete_page(request: HttpRequest, book_id: int, entry_id: int) -> HttpResponse:
    actor = page_actor(request)
    book = access_book(actor, book_id, need="edit")
    entry = access_entry(actor, book, entry_id)
    with refusal_as_message(request, reraise=(404,)) as refused:
        entry_delete(actor=actor, entry=entry)
    if refused:
        return redirect("web-entry", book_id=book.pk, entry_id=entry.pk)
    messages.success(request, _("Entry deleted."))
    return redirect(_back_to_list(request, book))


@require_POST
@actor_required
@refusals_as_pages
def book_active_page(request: HttpRequest, book_id: int) -> HttpResponse:
    """S-12: the collection's active toggle (server-wide collections; admins, as the service says)."""
    actor = page_actor(request)
    book = access_book(actor, book_id, need="edit")
    book_set_active(actor=actor, book=book, active=request.POST.get("active") == "on")
    messages.success(request, _("Collection saved."))
    return redirect("web-book", book_id=book.pk)


@require_POST
@actor_required
@refusals_as_pages
def entry_move_page(request: HttpRequest, book_id: int, entry_id: int) -> HttpResponse:
    """Move to top / bottom, or to a position (the drag handle posts one)."""
    actor = page_actor(request)
    book = access_book(actor, book_id, need="edit")
    entry = access_entry(actor, book, entry_id)
    to = request.POST.get("to")
    if to in ("top", "bottom"):
        entry_move(actor=actor, entry=entry, to=to)  # type: ignore[arg-type]
    else:
        position = request.POST.get("position", "")
        if not position.isdigit():
            raise ValidationFailed(_("Drop the entry on a row of the list."), field="position")
        entry_move(actor=actor, entry=entry, position=int(position))
    back = request.POST.get("next") or ""
    return redirect(back if back.startswith("/") and not back.startswith("//") else reverse("web-book", args=[book.pk]))


@require_POST
@actor_required
@refusals_as_pages
def entries_bulk(request: HttpRequest, book_id: int) -> HttpResponse:
    """Bulk enable / disable / delete of the ticked entries (≤500, W-12)."""
    actor = page_actor(request)
    book = access_book(actor, book_id, need="edit")
    ids = [int(v) for v in request.POST.getlist("entry") if v.isdigit()]
    action = request.POST.get("bulk")
    # Refused whole (more than 500, P-1's floor …): the list stays as it was, the reason on top of it.
    with refusal_as_message(request) as refused:
        if action == "enable":
            result = bulk.entries_bulk_set_enabled(actor=actor, book=book, entry_ids=ids, enabled=True)
        elif action == "disable":
            result = bulk.entries_bulk_set_enabled(actor=actor, book=book, entry_ids=ids, enabled=False)
        elif action == "delete":
            result = bulk.entries_bulk_delete(actor=actor, book=book, entry_ids=ids)
        else:
            raise ValidationFailed(_("Choose enable, disable or delete."), field="bulk")
    if not refused:
        messages.success(request, _("%(n)s entries changed.") % {"n": result.changed})
    return redirect(_back_to_list(request, book))


def _entry_titles(answer: turns.TurnAnswer, ids: set[int]) -> dict[int, str]:
    """Entry titles for the tables (the engine names entries by id)."""
    titles: dict[int, str] = {}
    for gathered in answer.gathering.books:
        rows = sharing.shared_book_entries(gathered.book).filter(pk__in=ids).values_list("pk", "title")
        titles.update({pk: title or f"#{pk}" for pk, title in rows})
    return titles


def preview_rows(answer: turns.TurnAnswer) -> dict[str, Any]:
    log = answer.log_rows("full")
    injections = answer.injection_rows()
    ids = {r["entry"] for r in [*log, *injections] if isinstance(r.get("entry"), int)}
    return {
        "titles": _entry_titles(answer, ids),
        "answer": answer,
        "injections": injections,
        "indexed": [r for r in log if r["outcome"] == ev.Outcome.INDEXED_ONLY],
        "canon_over": [r for r in log if r["outcome"] == ev.Outcome.CANON_OVER_BUDGET],
        "log": log,
        "world_index": list(answer.selection.world_index),
    }


@actor_required
@refusals_as_pages
def book_preview(request: HttpRequest, book_id: int) -> HttpResponse:
    """W-10: a sample message, a profile and a model → what would be injected, and why."""
    actor = page_actor(request)
    book = sharing.book_for_attach(actor, book_id=book_id)
    form = PreviewForm(request.POST or None)
    context: dict[str, Any] = {"book": book, "form": form}
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            request_in = turns.TurnInput(messages=(ev.Message(role="user", text=data["message"]),),
                                         profile=data["profile"] or "", model_id=data["model"] or None, log="full")
            with refusal_on_form(form) as refused:
                context.update(preview_rows(turns.book_preview(actor=actor, book=book, request=request_in)))
            if refused:
                status = 400
        else:
            status = 400
    if is_htmx(request) and request.method == "POST":
        return render(request, "web/_preview.html", context, status=status)
    return render(request, "web/preview.html", context, status=status)
