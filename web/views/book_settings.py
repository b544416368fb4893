"""A book's own pages: its settings, delete (to the trash) and the trash with Restore (issue 28, point 1).

Thin: each view parses, calls one books service (the same as the API's) and renders.
Kept apart from ``web.views.books`` (the editor and the entries) so the two change independently.
"""
from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from books.access import access_book
from books.limits import TRASH_KEEP_DAYS
from books.selectors import book_entry_count, book_tags_known
from books.services import book_restore, book_trash, book_update, books_trashed, trash_purge_at
from sharing.selectors import library_tags
from web.forms import BookSettingsForm
from web.refusals import Refused, form_page_status, refusal_as_message, refusal_on_form
from web.session import actor_required
from web.views.common import page_of, refusals_as_pages


@actor_required
@refusals_as_pages
def book_settings(request: HttpRequest, book_id: int) -> HttpResponse:
    actor = request.actor  # type: ignore[attr-defined]
    book = access_book(actor, book_id, need="edit")
    form = BookSettingsForm(request.POST if request.method == "POST" else None, book=book)
    refused: Refused | None = None
    if request.method == "POST" and form.is_valid():
        with refusal_on_form(form) as refused:
            book_update(actor=actor, book=book, **form.fields_for_service())
        if not refused:
            messages.success(request, _("Book settings saved."))
            return redirect("web-book-settings", book_id=book.pk)
    mine = book_tags_known(actor)
    suggestions = mine + [t for t in library_tags() if t not in set(mine)]
    return render(request, "web/book_settings.html", {"book": book, "form": form, "suggestions": suggestions},
                  status=form_page_status(form, refused=refused))


@actor_required
@refusals_as_pages
def book_delete(request: HttpRequest, book_id: int) -> HttpResponse:
    """GET asks (what goes, for how long it can come back); POST moves the book to the trash."""
    actor = request.actor  # type: ignore[attr-defined]
    book = access_book(actor, book_id, need="edit")
    if request.method == "POST":
        book_trash(actor=actor, book=book)
        messages.success(request, _("“%(title)s” is in the trash. You can restore it there for %(days)s days.")
                         % {"title": book.title, "days": TRASH_KEEP_DAYS})
        return redirect("web-books")
    return render(request, "web/book_delete.html", {
        "book": book, "entry_count": book_entry_count(book), "days": TRASH_KEEP_DAYS,
    })


@actor_required
@refusals_as_pages
def trash(request: HttpRequest) -> HttpResponse:
    actor = request.actor  # type: ignore[attr-defined]
    page = page_of(books_trashed(actor), request, 50)
    rows = [{"book": b, "purge_at": trash_purge_at(b)} for b in page]
    return render(request, "web/trash.html", {"page": page, "rows": rows, "days": TRASH_KEEP_DAYS})


@require_POST
@actor_required
@refusals_as_pages
def book_restore_page(request: HttpRequest, book_id: int) -> HttpResponse:
    actor = request.actor  # type: ignore[attr-defined]
    with refusal_as_message(request, reraise=(404,)) as refused:
        book = book_restore(actor=actor, book_id=book_id)
    if refused:
        return redirect("web-trash")
    messages.success(request, _("“%(title)s” is restored.") % {"title": book.title})
    if book.visibility == "private" and request.POST.get("was") == "public":
        messages.warning(request, _("It came back private: public books need at least 10 entries (P-1)."))
    return redirect("web-book", book_id=book.pk)
