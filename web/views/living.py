"""AI updates (the living world on pages, L-1..L-4): what the model wrote into my books during play,
with undo, the review of held writes (edit, accept, reject), the review-before-save option and the
revert of a reply. Every decision is the living-world services' (books.living, cast.living), as in
the API; their refusals show on the page with their rule."""
from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from books import living
from books.access import access_book
from books.models import Book, LoreWrite, Profile, Visibility
from books.services.book_write import book_update
from cast import living as cast_living
from lore_platform.errors import NotFound, ValidationFailed
from lore_platform.tenancy.actor import Actor
from web.forms import LoreWriteEditForm
from web.refusals import (
    domain_error_show,
    refusal_as_message,
    refusal_caught,
    refusal_text,
)
from web.selectors import (
    book_lore_write,
    book_writing_chats,
    living_books_of,
)
from web.session import actor_required, page_actor
from web.views.common import (
    page_of,
    query_without_page,
    refusals_as_pages,
)

WRITES_PER_PAGE = 50
ACTIONS = ("undo", "accept", "reject", "edit")


def living_off_text(book: Book) -> str:
    """The API's L-1 notice (the living world went off with the book's visibility), translated."""
    shown = {Visibility.UNLISTED.value: _("unlisted"), Visibility.PUBLIC.value: _("public")}.get(book.visibility)
    notice = living.living_world_off_notice(book, translate=_, visibility=shown)
    return f"{notice['message']} ({notice['rule']})"


def _living_state(actor: Actor, book: Book) -> str:
    """Why the model may or may not write into this book now (L-1), in the reader's words."""
    if book.profile != Profile.SMART:
        return _("The living world is a world-book feature: this book's profile does not take lore from the "
                 "model (L-1).")
    if book.visibility != Visibility.PRIVATE:
        return living_off_text(book)
    if not book.living_world:
        return _("The living world is off: the model does not write into this book.")
    if book.living_world_review:
        return _("The living world is on: the model's writes wait here for your review before they are saved.")
    return _("The living world is on: the model adds lore from your own chats, listed here with Undo.")


def _edit_form(write: LoreWrite, data: Any = None) -> LoreWriteEditForm:
    title = write.edit_title if write.edit_title is not None else write.title
    aliases = write.edit_aliases if write.edit_aliases is not None else write.aliases
    text = write.edit_text if write.edit_text is not None else write.text
    initial = {"title": title, "lore": text, "aliases": ", ".join(aliases), "text": text}
    return LoreWriteEditForm(data, kind=write.kind, prefix=f"w{write.pk}", initial=initial)


def _edits(form: LoreWriteEditForm, write: LoreWrite) -> dict[str, Any]:
    """What the owner changed, in the API's edit fields (a field left as it is is no edit)."""
    now = {"title": write.edit_title if write.edit_title is not None else write.title,
           "aliases": write.edit_aliases if write.edit_aliases is not None else write.aliases,
           "lore": write.edit_text if write.edit_text is not None else write.text}
    now["text"] = now["lore"]
    edits: dict[str, Any] = {}
    for name, value in form.cleaned_data.items():
        if name == "aliases":
            value = [a.strip() for a in value.split(",") if a.strip()]
        if value != now[name]:
            edits[name] = value
    return edits


def _row(book: Book, write: LoreWrite, chats: dict[int, str], form: LoreWriteEditForm | None,
         error: str | None) -> dict[str, Any]:
    held = write.state == LoreWrite.State.HELD
    return {
        "write": write,
        "chat": chats.get(write.chat_id, f"#{write.chat_id}"),
        "text": write.edit_text if write.edit_text is not None else write.text,
        "title": (write.edit_title if write.edit_title is not None else write.title) or _("(untitled)"),
        "state": _(write.get_state_display()),
        "edited": any(v is not None for v in (write.edit_title, write.edit_text, write.edit_aliases)),
        "form": form or (_edit_form(write) if held else None),
        "action": reverse("web-book-ai-update", args=[book.pk, write.pk]),
        "error": error,
    }


def _page(request: HttpRequest, book: Book, *, bound: tuple[int, LoreWriteEditForm | None, str] | None = None,
          status: int = 200) -> HttpResponse:
    actor = page_actor(request)
    state = request.GET.get("state") or None
    chat = request.GET.get("chat") or ""
    writes = living.lore_writes_list(actor=actor, book=book, state=state)
    if chat:
        if not chat.isdigit():
            raise ValidationFailed(_("Choose a chat from the list."), field="chat")
        writes = writes.filter(chat_id=int(chat))
    page = page_of(writes, request, WRITES_PER_PAGE)
    chats = book_writing_chats(actor, book)
    rows, unplaced = [], bound[2] if bound is not None else None
    for write in page.object_list:
        form, error = None, None
        if bound is not None and bound[0] == write.pk:
            form, error, unplaced = bound[1], bound[2], None
        rows.append(_row(book, write, chats, form, error))
    # A reply's writes revert together (L-4): one button per reply that still has some in force.
    replies = sorted({(w.chat_id, w.reply_id) for w in page.object_list
                      if w.state in (LoreWrite.State.APPLIED, LoreWrite.State.HELD)})
    context = {
        "book": book,
        "page": page,
        "rows": rows,
        "query": query_without_page(request),
        "states": LoreWrite.State.choices,
        "state": state or "",
        "chat": chat,
        "chats": sorted(chats.items()),
        "replies": [{"chat": c, "chat_label": chats.get(c, f"#{c}"), "reply": r} for c, r in replies],
        "living_state": _living_state(actor, book),
        "private": book.visibility == Visibility.PRIVATE,
        "smart": book.profile == Profile.SMART,
        "error": unplaced,  # a refusal not about a row on this page (a reply's revert)
    }
    return render(request, "web/ai_updates.html", context, status=status)


@actor_required
@refusals_as_pages
def ai_updates_overview(request: HttpRequest) -> HttpResponse:
    """My books the model writes (or wrote) into, with how many updates wait for review."""
    rows = living_books_of(page_actor(request))
    return render(request, "web/ai_updates_overview.html", {"rows": rows})


@actor_required
@refusals_as_pages
def book_ai_updates(request: HttpRequest, book_id: int) -> HttpResponse:
    book = access_book(page_actor(request), book_id)
    return _page(request, book)


@require_POST
@actor_required
@refusals_as_pages
def ai_update_act(request: HttpRequest, book_id: int, write_id: int) -> HttpResponse:
    """Undo an applied update; edit, accept (with the edits) or reject a held one."""
    actor = page_actor(request)
    book = access_book(actor, book_id)
    action = request.POST.get("action", "")
    if action not in ACTIONS:
        raise ValidationFailed(_("Choose undo, accept, reject or edit."), field="action")
    write = book_lore_write(actor, book, write_id)
    if write is None:
        raise NotFound(_("No such AI update."), field="write")
    form = _edit_form(write, request.POST) if action in ("accept", "edit") else None
    with refusal_caught(reraise=(404,)) as refused:
        if action == "undo":
            living.lore_write_undo(actor=actor, book=book, write_id=write_id)
            messages.success(request, _("Undone."))
        elif action == "reject":
            living.lore_write_reject(actor=actor, book=book, write_id=write_id)
            messages.success(request, _("Rejected: it stays listed and was not saved."))
        else:
            if form is None or not form.is_valid():
                raise ValidationFailed(_("Check the edits."), field="write")
            edits = _edits(form, write)
            if action == "edit":
                living.lore_write_edit(actor=actor, book=book, write_id=write_id, edits=edits)
                messages.success(request, _("Edits kept: they apply when you accept."))
            else:
                living.lore_write_accept(actor=actor, book=book, write_id=write_id, edits=edits)
                messages.success(request, _("Accepted and saved to the book."))
    if refused.error is not None:  # said on the update's row, the edits kept in its form
        if form is not None:
            domain_error_show(form, refused.error)
        return _page(request, book, bound=(write_id, form, refusal_text(refused.error)), status=refused.status)
    return redirect(request.POST.get("next") or reverse("web-book-ai-updates", args=[book.pk]))


@require_POST
@actor_required
@refusals_as_pages
def reply_revert_page(request: HttpRequest, book_id: int) -> HttpResponse:
    """A reply was regenerated or deleted: revert everything it wrote, together or not at all (L-4)."""
    actor = page_actor(request)
    book = access_book(actor, book_id)
    chat, reply = request.POST.get("chat", ""), request.POST.get("reply", "")
    if not chat.isdigit() or not reply:
        raise ValidationFailed(_("Name the chat and the reply to revert."), field="reply")
    with refusal_caught(reraise=(404,)) as refused:
        reverted = cast_living.reply_revert(actor=actor, chat_id=int(chat), reply_id=reply)
    if refused.error is not None:  # no row of its own: said on top of the list
        return _page(request, book, bound=(0, None, refusal_text(refused.error)), status=refused.status)
    messages.success(request, _("Reply reverted: %(n)s AI updates undone or rejected.") % {"n": len(reverted)})
    return redirect("web-book-ai-updates", book_id=book.pk)


@require_POST
@actor_required
@refusals_as_pages
def living_settings(request: HttpRequest, book_id: int) -> HttpResponse:
    """The living world and its review-before-save option (L-1, L-4), through the book's own update."""
    actor = page_actor(request)
    book = access_book(actor, book_id, need="edit")
    on = request.POST.get("living_world") == "on"
    with refusal_as_message(request, reraise=()) as refused:
        book_update(actor=actor, book=book, living_world=on, living_world_review=request.POST.get("review") == "on")
    if not refused:
        messages.success(request, _("Living world settings saved."))
    return redirect("web-book-ai-updates", book_id=book.pk)
