"""Characters: create, see attached books, preview what a chat would get (issue 15, point 6)."""
from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from lore_platform.cast import turns
from lore_platform.cast.services import character_import
from lore_platform.errors import DomainError
from lore_platform.web.forms import CharacterForm, PreviewForm, domain_error_show
from lore_platform.web.selectors import character_get, characters_with_books
from lore_platform.web.session import actor_required
from lore_platform.web.views.books import _preview_rows
from lore_platform.web.views.common import is_htmx, refusals_as_pages
from retrieval.engine import values as ev


@actor_required
@refusals_as_pages
def characters(request: HttpRequest) -> HttpResponse:
    actor = request.actor  # type: ignore[attr-defined]
    form = CharacterForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            character_import(tenant=actor.tenant, name=form.cleaned_data["name"])
        except DomainError as exc:
            domain_error_show(form, exc)
        else:
            return redirect("web-characters")
    return render(request, "web/characters.html", {"form": form, "rows": characters_with_books(actor)})


@actor_required
@refusals_as_pages
def character_preview(request: HttpRequest, character_id: int) -> HttpResponse:
    """What a chat with this character would get for a sample message (W-10, nothing written)."""
    actor = request.actor  # type: ignore[attr-defined]
    character = character_get(actor, character_id)
    if character is None:
        raise Http404
    form = PreviewForm(request.POST or None)
    context: dict[str, Any] = {"character": character, "form": form}
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            request_in = turns.TurnInput(messages=(ev.Message(role="user", text=data["message"]),),
                                         profile=data["profile"] or "", model_id=data["model"] or None, log="full")
            try:
                answer = turns.stateless_turn(actor=actor, request=request_in, target={"character_id": character.pk})
            except DomainError as exc:
                domain_error_show(form, exc)
                status = 400
            else:
                context.update(_preview_rows(answer))
        else:
            status = 400
    if is_htmx(request) and request.method == "POST":
        return render(request, "web/_preview.html", context, status=status)
    return render(request, "web/character_preview.html", context, status=status)
