"""The context call (P-7): the platform side of one chat turn.

Loads the chat's books from the database into engine values (cached per book
version, so a turn reads only the book rows), runs the engine under the chat's
profile, labels group-chat lore with its character (W-8), renders the prompt
template when asked (C-12, S-8), and persists what lives across turns: the
timed state, usage counts and the request log (C-15).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import transaction
from django.utils import timezone

from lore_platform.cast.attachments import GatheredBook, Gathering
from lore_platform.cast.models import Chat, RequestLog
from lore_platform.errors import ValidationFailed
from lore_platform.tenancy.models import Tenant
from retrieval.engine import ProfileUnavailableError, assemble
from retrieval.engine import values as ev
from retrieval.engine.cases import selection_to_dict
from retrieval.engine.templates import TemplateError, prompt_render
from retrieval.engine.tokenizers import UnknownTokenizerError, model_lookup, tokenizer_for
from retrieval.loading import engine_book
from retrieval.lookup import lookup_tool_schema

@dataclass(frozen=True, kw_only=True)
class ContextInput:
    """What a partner app sends for one turn."""

    profile: str
    messages: tuple[ev.Message, ...]
    names: ev.Names = field(default_factory=ev.Names)
    model_id: str | None = None
    tokenizer: str | None = None
    input_window: int | None = None
    channel: ev.Channel | None = None
    template: tuple[str, ...] | None = None
    parts: dict[str, str] = field(default_factory=dict)
    render: bool = False
    # The model can call tools: a world index comes with the lookup tool (W-5).
    tools: bool = False


@dataclass(frozen=True, kw_only=True)
class ContextResult:
    profile: str
    selection: ev.Selection
    gathering: Gathering
    rendered: list[dict[str, Any]] | None
    model: dict[str, Any]
    turn: int
    tools: list[dict[str, Any]] = field(default_factory=list)
    request_log_id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        body = selection_to_dict(self.selection)
        body["request_log"] = body.pop("log")
        body["timed_state"] = body.pop("state")
        body.update(
            {
                "profile": self.profile,
                "turn": self.turn,
                "model": self.model,
                "books": [
                    {"id": g.book.pk, "title": g.book.title, "label": g.label, "via": g.via}
                    for g in self.gathering.books
                ],
                "books_left_out": [
                    {"id": left.book_id, "title": left.title, "reason": left.reason} for left in self.gathering.left_out
                ],
                "tools": self.tools,
            }
        )
        if self.rendered is not None:
            body["messages"] = self.rendered
        if self.request_log_id is not None:
            body["request_log_id"] = self.request_log_id
        return body


def _label(selection: ev.Selection, books: Sequence[GatheredBook]) -> ev.Selection:
    labels = {str(g.book.pk): g.label for g in books if g.label}
    if not labels:
        return selection
    injections = tuple(replace(i, label=labels.get(i.book, i.label)) for i in selection.injections)
    return replace(selection, injections=injections)


def context_run(
    *,
    request: ContextInput,
    gathering: Gathering,
    state: ev.TimedState,
    seed: str,
    tenant: Tenant,
    turn: int | None = None,
) -> ContextResult:
    """Run the engine for gathered books. Pure with respect to the database (reads only)."""
    try:
        tokenizer = tokenizer_for(request.model_id, tokenizer=request.tokenizer)
    except UnknownTokenizerError as exc:
        raise ValidationFailed(str(exc), field="model.tokenizer", rule="C-14") from exc
    spec = model_lookup(request.model_id)
    input_window = request.input_window or spec.input_window
    engine_request = ev.TurnRequest(
        profile=request.profile,  # type: ignore[arg-type]
        books=tuple(engine_book(g.book) for g in gathering.books),
        chat=request.messages,
        names=request.names,
        model=ev.Model(id=request.model_id, tokenizer=tokenizer.name, input_window=input_window),
        channel=request.channel,
        seed=seed,
        turn=turn,
        state=state,
    )
    meaning = None
    if request.profile == "smart":
        from retrieval.vector_store import BookMeaningSearch

        meaning = BookMeaningSearch(tenant)
    try:
        selection = assemble(engine_request, tokenizer=tokenizer, meaning=meaning)
    except ProfileUnavailableError as exc:
        raise ValidationFailed(str(exc), field="profile") from exc
    selection = _label(selection, gathering.books)
    rendered = None
    if request.render or request.template:
        try:
            messages = prompt_render(
                profile=request.profile,
                selection=selection,
                history=request.messages,
                parts=request.parts,
                template=request.template,
            )
        except TemplateError as exc:
            raise ValidationFailed(str(exc), field="template", rule="C-12") from exc
        rendered = [
            {k: v for k, v in vars_of(m).items() if v is not None} for m in messages
        ]
    return ContextResult(
        profile=request.profile,
        selection=selection,
        gathering=gathering,
        rendered=rendered,
        model={
            "id": request.model_id,
            "tokenizer": tokenizer.name,
            "tokens_estimated": tokenizer.is_estimate,
            "input_window": input_window,
        },
        turn=engine_request.turn_number,
        tools=[lookup_tool_schema()] if request.tools and selection.world_index else [],
    )


def vars_of(message: Any) -> dict[str, Any]:
    return {name: getattr(message, name) for name in message.__slots__}


def _usage_record(result: ContextResult) -> None:
    from books.services import entries_record_usage

    injected = {int(i.entry) for i in result.selection.injections if i.entry.isdigit()}
    if not injected:
        return
    now = timezone.now()
    by_tenant: dict[int, tuple[Tenant, set[int]]] = {}
    for gathered in result.gathering.books:
        ids = injected & {int(e.id) for e in engine_book(gathered.book).entries}
        if ids:
            tenant, acc = by_tenant.setdefault(gathered.book.tenant_id, (gathered.book.tenant, set()))
            acc.update(ids)
    for tenant, ids in by_tenant.values():
        entries_record_usage(tenant=tenant, entry_ids=ids, used_at=now)


@transaction.atomic
def chat_context(*, chat: Chat, request: ContextInput, gathering: Gathering, persist: bool = True) -> ContextResult:
    """One live turn of a stored chat: run, then persist state, usage and the request log."""
    locked = Chat.objects.for_tenant(chat.tenant).select_for_update().get(pk=chat.pk) if persist else chat
    state = ev.TimedState.from_dict(locked.timed_state)
    result = context_run(request=request, gathering=gathering, state=state, seed=f"chat-{chat.pk}",
                         tenant=chat.tenant)
    if not persist:
        return result
    locked.timed_state = result.selection.state.to_dict()
    locked.turns = locked.turns + 1
    locked.save(update_fields=["timed_state", "turns"])
    body = result.as_dict()
    log = RequestLog.objects.create(
        tenant=chat.tenant,
        chat=locked,
        turn=result.turn,
        profile=result.profile,
        model_id=request.model_id or "",
        injections=body["injections"],
        world_index=body["world_index"],
        log=body["request_log"],
    )
    _usage_record(result)
    return replace(result, request_log_id=log.pk)

