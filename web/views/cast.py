"""Characters, stories and novels: create, attach and detach books, preview what a chat would get
(issue 15, point 6; W-8, W-9, W-10). The same services the API calls decide every refusal."""
from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _, gettext_lazy
from django.views.decorators.http import require_POST

from cast import chats as chat_services, turns
from cast.attachments import attachment_delete, book_attach
from cast.models import Character
from cast.personas import persona_groups
from cast.services import character_import
from lore_platform.errors import ValidationFailed
from lore_platform.tenancy.actor import Actor
from retrieval.engine import values as ev
from web.forms import (
    AttachForm,
    CharacterForm,
    PreviewForm,
    StoryForm,
)
from web.refusals import refusal_on_form
from web.selectors import (
    attachable_books,
    characters_of,
    world_owner_get,
    world_owners_with_attachments,
)
from web.session import actor_required, page_actor
from web.views.books import preview_rows
from web.views.common import is_htmx, refusals_as_pages

# What each page is called and where it lives: one table, three pages.
KINDS: dict[str, dict[str, Any]] = {
    "character": {"list": "web-characters", "preview": "web-character-preview", "attach": "web-character-attach",
                  "title": gettext_lazy("Characters"), "new": gettext_lazy("New character"),
                  "empty": gettext_lazy("No characters yet.")},
    "story": {"list": "web-stories", "preview": "web-story-preview", "attach": "web-story-attach",
              "title": gettext_lazy("Stories"), "new": gettext_lazy("New story"),
              "empty": gettext_lazy("No stories yet.")},
    "novel": {"list": "web-novels", "preview": "web-novel-preview", "attach": "web-novel-attach",
              "title": gettext_lazy("Novels"), "new": gettext_lazy("New novel"),
              "empty": gettext_lazy("No novels yet.")},
}


def _owner_name(owner: Any) -> str:
    return owner.name if isinstance(owner, Character) else owner.title


def _characters(actor: Actor) -> list[tuple[int, str]]:
    return [(c.pk, c.name) for c in characters_of(actor)]


def _attach_form(kind: str, owner_id: int, books: list[tuple[int, str]], data: Any = None) -> AttachForm:
    return AttachForm(data, books=books, prefix=f"{kind}{owner_id}")


def _owners_page(request: HttpRequest, kind: str, *, create: Any, bound_attach: AttachForm | None = None,
                 bound_owner: int | None = None, status: int = 200) -> HttpResponse:
    actor = page_actor(request)
    names = KINDS[kind]
    books = [(b.pk, b.title) for b in attachable_books(actor)]
    rows = []
    for row in world_owners_with_attachments(actor, kind):
        owner = row["owner"]
        attach = bound_attach if bound_owner == owner.pk and bound_attach is not None else \
            _attach_form(kind, owner.pk, books)
        rows.append({
            "owner": owner,
            "name": _owner_name(owner),
            "cast": [c.name for c in owner.cast.all()] if kind != "character" else [],
            "attachments": row["attachments"],
            "attach": attach,
            "attach_url": reverse(names["attach"], args=[owner.pk]),
            "preview_url": reverse(names["preview"], args=[owner.pk]),
        })
    # Lineages the API groups personas by (issue 14.10): shown where they tell something, that is
    # several personas sharing one lineage, or a lineage with its persona book.
    lineages = [g for g in persona_groups(actor=actor) if len(g.personas) > 1 or g.book is not None] \
        if kind == "character" else []
    context = {"kind": kind, "names": names, "form": create, "rows": rows, "next": reverse(names["list"]),
               "lineages": lineages}
    return render(request, "web/world_owners.html", context, status=status)


@actor_required
@refusals_as_pages
def characters(request: HttpRequest) -> HttpResponse:
    actor = page_actor(request)
    form = CharacterForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with refusal_on_form(form) as refused:
            character_import(tenant=actor.tenant, name=form.cleaned_data["name"], created_by=actor.user)
        if not refused:
            return redirect("web-characters")
    return _owners_page(request, "character", create=form, status=400 if form.errors else 200)


def _stories_or_novels(request: HttpRequest, kind: str) -> HttpResponse:
    actor = page_actor(request)
    form = StoryForm(request.POST or None, characters=_characters(actor))
    if request.method == "POST" and form.is_valid():
        create = chat_services.story_create if kind == "story" else chat_services.novel_create
        with refusal_on_form(form) as refused:
            create(actor=actor, title=form.cleaned_data["title"],
                   cast_ids=[int(pk) for pk in form.cleaned_data["cast_ids"]])
        if not refused:
            return redirect(KINDS[kind]["list"])
    return _owners_page(request, kind, create=form, status=400 if form.errors else 200)


@actor_required
@refusals_as_pages
def stories(request: HttpRequest) -> HttpResponse:
    return _stories_or_novels(request, "story")


@actor_required
@refusals_as_pages
def novels(request: HttpRequest) -> HttpResponse:
    return _stories_or_novels(request, "novel")


@require_POST
@actor_required
@refusals_as_pages
def owner_attach(request: HttpRequest, kind: str, owner_id: int) -> HttpResponse:
    """W-9: attach one of my books, or an unlisted book by its current link, to this character,
    story or novel. A refusal (a book I may not read, a rotated link) shows on the form."""
    actor = page_actor(request)
    if world_owner_get(actor, kind, owner_id) is None:
        raise Http404
    books = [(b.pk, b.title) for b in attachable_books(actor)]
    form = _attach_form(kind, owner_id, books, data=request.POST)
    status = 400
    if form.is_valid():
        token = form.cleaned_data["link_token"] or None
        book_id = form.cleaned_data["book_id"]
        with refusal_on_form(form) as refused:
            if book_id is None and token is None:
                raise ValidationFailed(_("Choose one of your books or paste a book's link."), field="book_id")
            book_attach(actor=actor, target=kind, target_id=owner_id, book_id=book_id, link_token=token)
        if not refused:
            messages.success(request, _("Attached."))
            return redirect(KINDS[kind]["list"])
        status = refused.status  # as the API answers: 404 for a book not readable or a stale link
    create = CharacterForm() if kind == "character" else StoryForm(characters=_characters(actor))
    return _owners_page(request, kind, create=create, bound_attach=form, bound_owner=owner_id, status=status)


@require_POST
@actor_required
@refusals_as_pages
def attachment_detach(request: HttpRequest, attachment_id: int) -> HttpResponse:
    attachment_delete(actor=page_actor(request), attachment_id=attachment_id)
    messages.success(request, _("Detached: its chats no longer get this book."))
    back = request.POST.get("next") or ""
    return redirect(back if back.startswith("/") and not back.startswith("//") else "web-characters")


@actor_required
@refusals_as_pages
def owner_preview(request: HttpRequest, kind: str, owner_id: int) -> HttpResponse:
    """What a chat with this character, story or novel would get for a sample message (W-10, nothing
    written): the same stateless turn the API's context call runs with its target."""
    actor = page_actor(request)
    owner = world_owner_get(actor, kind, owner_id)
    if owner is None:
        raise Http404
    form = PreviewForm(request.POST or None)
    context: dict[str, Any] = {"owner": owner, "name": _owner_name(owner), "kind": kind, "form": form,
                               "back": reverse(KINDS[kind]["list"])}
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            request_in = turns.TurnInput(messages=(ev.Message(role="user", text=data["message"]),),
                                         profile=data["profile"] or "", model_id=data["model"] or None, log="full")
            with refusal_on_form(form) as refused:
                answer = turns.stateless_turn(actor=actor, request=request_in, target={f"{kind}_id": owner.pk})
            if refused:
                status = 400
            else:
                context.update(preview_rows(answer))
        else:
            status = 400
    if is_htmx(request) and request.method == "POST":
        return render(request, "web/_preview.html", context, status=status)
    return render(request, "web/owner_preview.html", context, status=status)
