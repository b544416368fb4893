"""The public library and book pages, readable without signing in (issue 15, point 2; P-4, P-5)."""
from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import get_language, gettext as _
from django.views.decorators.http import require_POST

from books.models import Book
from cast.attachments import book_attach
from lore_platform.errors import DomainError, ValidationFailed
from sharing import selectors as sharing, services as sharing_services
from web.selectors import TARGET_KINDS, attach_targets, book_canon_tokens
from web.session import actor_required, page_actor, web_actor
from web.views.common import page_of, query_without_page, refusals_as_pages

BOOKS_PER_PAGE = 20
ENTRIES_PER_PAGE = 50
SORTS = ("newest", "most_copied", "most_attached")


def _reader_language(request: HttpRequest) -> str:
    return (get_language() or "en").split("-")[0]


def _card(book: Book, display: sharing.Display) -> dict[str, Any]:
    translation = display.translation if display.translated else None
    return {
        "book": book,
        "title": translation.title if translation else book.title,
        "description": translation.description if translation else book.description,
        "display": display,
        "canon_tokens": book_canon_tokens(book),
    }


@refusals_as_pages
def library(request: HttpRequest) -> HttpResponse:
    """Search by words or meaning, filter by tag and language, sort, page (P-5)."""
    q = (request.GET.get("q") or "").strip()
    mode = request.GET.get("mode") or "text"
    tag = request.GET.get("tag") or None
    language = request.GET.get("language") or None
    sort = request.GET.get("sort") or None
    error = None
    books: Any = []
    try:
        if q:
            books = sharing.library_search(q=q, mode=mode, tag=tag, language=language, sort=sort,
                                           query_language=_reader_language(request))
        else:
            books = sharing.library_books(tag=tag, language=language, sort=sort)
    except DomainError as exc:  # a bad filter or search by meaning unavailable: say so, keep the page
        error = exc
    page = page_of(books, request, BOOKS_PER_PAGE)
    displays = sharing.books_display(list(page.object_list), _reader_language(request))
    # Books still being embedded cannot be found by meaning yet: the page says so, with the counts.
    indexing = (sharing.library_meaning_index_state(tag=tag, language=language)
                if q and mode == "meaning" and error is None else None)
    context = {
        "cards": [_card(b, displays[b.pk]) for b in page.object_list],
        "page": page,
        "query": query_without_page(request),
        "q": q, "mode": mode, "tag": tag or "", "language": language or "", "sort": sort or "",
        "sorts": SORTS,
        "error": error,
        "indexing": indexing if indexing is not None and indexing.incomplete else None,
    }
    return render(request, "web/library.html", context)


def _book_page(request: HttpRequest, book: Book, *, link_token: str | None) -> HttpResponse:
    sharing_services.shared_book_freshen(book)
    display = sharing.book_display(book, _reader_language(request))
    entries = page_of(sharing.shared_book_entries(book), request, ENTRIES_PER_PAGE)
    rows = []
    for entry in entries.object_list:
        text = display.translation.entry_text(entry.pk) if display.translated and display.translation else None
        rows.append({"entry": entry, "title": text["title"] if text else entry.title,
                     "content": text["content"] if text else entry.content})
    actor = web_actor(request)
    context = {
        "card": _card(book, display),
        "entries": entries,
        "rows": rows,
        "link_token": link_token,
        "targets": attach_targets(actor) if actor is not None else [],
        "signed_in": actor is not None,
    }
    return render(request, "web/library_book.html", context)


@refusals_as_pages
def library_book(request: HttpRequest, book_id: int) -> HttpResponse:
    return _book_page(request, sharing.library_book(book_id), link_token=None)


@refusals_as_pages
def link_book(request: HttpRequest, token: str) -> HttpResponse:
    """An unlisted (or public) book through its current link (P-1)."""
    return _book_page(request, sharing.library_book_by_link(token), link_token=token)


def _readable(book_id: int, token: str | None) -> Book:
    return sharing.library_book_by_link(token) if token else sharing.library_book(book_id)


@refusals_as_pages
def library_export(request: HttpRequest, book_id: int) -> HttpResponse:
    # The reader's export the API serves too (I-6: world info, no tenant-only settings; S-1).
    token = request.GET.get("link") or None
    payload, content_type, filename = sharing.shared_book_export(
        web_actor(request), "sillytavern", book_id=None if token else book_id, link_token=token
    )
    response = HttpResponse(payload, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_POST
@actor_required
@refusals_as_pages
def library_copy(request: HttpRequest, book_id: int) -> HttpResponse:
    """P-2: an editable private duplicate in my library."""
    token = request.POST.get("link") or None
    copy = sharing_services.book_copy(actor=page_actor(request), book_id=None if token else book_id,
                                      link_token=token)
    messages.success(request, _("Copied to your library."))
    return redirect("web-book", book_id=copy.pk)


@require_POST
@actor_required
@refusals_as_pages
def library_attach(request: HttpRequest, book_id: int) -> HttpResponse:
    """W-9: attach a readable book to one of my characters, stories or novels."""
    kind, _sep, target_id = (request.POST.get("target") or "").partition(":")
    if kind not in TARGET_KINDS or not target_id.isdigit():
        raise ValidationFailed(_("Choose a character, story or novel."), field="target")
    token = request.POST.get("link") or None
    book_attach(actor=page_actor(request), target=kind, target_id=int(target_id),
                book_id=None if token else book_id, link_token=token)
    messages.success(request, _("Attached."))
    back = request.POST.get("next") or ""
    return redirect(back if back.startswith("/") and not back.startswith("//") else "web-characters")
