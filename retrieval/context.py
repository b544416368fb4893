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

from lore_platform.cast.attachments import GatheredBook, Gathering, chat_books_gather
from lore_platform.cast.models import Chat, RequestLog
from lore_platform.errors import NotFound, ValidationFailed
from lore_platform.tenancy.actor import Actor
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
    timed_state: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)
    request_log_id: int | None = None
    # Bodies already built, by log kind: a turn stores the compact one and answers with it.
    # ``replace()`` passes this same dict on, so the copy with the log id reuses them.
    bodies: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False, repr=False)

    def as_dict(self, *, log: str = "full") -> dict[str, Any]:
        """The API body. ``log="compact"`` leaves out entries that were simply not matched
        (most of a big book, every turn) and counts them instead (C-15)."""
        if log not in self.bodies:
            self.bodies[log] = self._body(log)
        body = dict(self.bodies[log])
        if self.request_log_id is not None:
            body["request_log_id"] = self.request_log_id
        return body

    def _body(self, log: str) -> dict[str, Any]:
        selection = self.selection
        if log == "compact":
            kept = tuple(r for r in selection.request_log if r.outcome != ev.Outcome.NOT_MATCHED)
            selection = replace(selection, request_log=kept)
        body = selection_to_dict(selection)
        rows = body.pop("log")
        body.pop("state")
        body["timed_state"] = self.timed_state
        if log == "compact":
            total = len(self.selection.request_log)
            body["request_log"] = rows
            body["request_log_summary"] = {"entries": total, "not_matched": total - len(rows),
                                           "not_matched_listed": False}
        else:
            body["request_log"] = rows
            body["request_log_summary"] = {
                "entries": len(rows),
                "not_matched": sum(row["outcome"] == ev.Outcome.NOT_MATCHED for row in rows),
                "not_matched_listed": True,
            }
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
    state: dict[str, Any],
    seed: str,
    turn: int | None = None,
    dry_run: bool = False,
) -> ContextResult:
    """Run the engine for gathered books. Reads the database, writes nothing.

    ``state`` is the chat's stored timed state (JSON); the result carries the new one.
    """
    try:
        tokenizer = tokenizer_for(request.model_id, tokenizer=request.tokenizer)
    except UnknownTokenizerError as exc:
        raise ValidationFailed(str(exc), field="model.tokenizer", rule="C-14") from exc
    spec = model_lookup(request.model_id)
    input_window = request.input_window or spec.input_window
    if request.profile == "sillytavern":
        from retrieval.sillytavern_turn import sillytavern_select

        selection, new_state = sillytavern_select(
            books=gathering.books, chat=request.messages, names=request.names, input_window=input_window,
            tokenizer=tokenizer, state=state, dry_run=dry_run,
        )
        return _result(request, _label(selection, gathering.books), gathering, tokenizer, input_window,
                       turn=len(request.messages) if turn is None else turn, timed_state=new_state)
    engine_request = ev.TurnRequest(
        profile=request.profile,  # type: ignore[arg-type]
        books=tuple(engine_book(g.book) for g in gathering.books),
        chat=request.messages,
        names=request.names,
        model=ev.Model(id=request.model_id, tokenizer=tokenizer.name, input_window=input_window),
        channel=request.channel,
        seed=seed,
        turn=turn,
        state=_timed_state(state),
    )
    meaning = None
    if request.profile == "smart":
        from retrieval.vector_store import ChatMeaningSearch

        meaning = ChatMeaningSearch([g.book for g in gathering.books])
    try:
        selection = assemble(engine_request, tokenizer=tokenizer, meaning=meaning)
    except ProfileUnavailableError as exc:
        raise ValidationFailed(str(exc), field="profile") from exc
    selection = _label(selection, gathering.books)
    return _result(request, selection, gathering, tokenizer, input_window, turn=engine_request.turn_number,
                   timed_state=selection.state.to_dict())


def _timed_state(state: dict[str, Any]) -> ev.TimedState:
    try:
        return ev.TimedState.from_dict(state)
    except ValueError as exc:
        raise ValidationFailed(str(exc), field="timed_state") from exc


def _result(
    request: ContextInput,
    selection: ev.Selection,
    gathering: Gathering,
    tokenizer: Any,
    input_window: int,
    *,
    turn: int,
    timed_state: dict[str, Any],
) -> ContextResult:
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
        rendered = [{k: v for k, v in vars_of(m).items() if v is not None} for m in messages]
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
        turn=turn,
        timed_state=timed_state,
        tools=[lookup_tool_schema()] if request.tools and selection.world_index else [],
    )


def vars_of(message: Any) -> dict[str, Any]:
    return {name: getattr(message, name) for name in message.__slots__}


def _usage_of(result: ContextResult) -> dict[str, list[int]]:
    """Injected entry ids per owning tenant (a public book may belong to another tenant)."""
    injected = {i.book: set() for i in result.selection.injections}
    for injection in result.selection.injections:
        if injection.entry.isdigit():
            injected[injection.book].add(int(injection.entry))
    usage: dict[str, set[int]] = {}
    for gathered in result.gathering.books:
        ids = injected.get(str(gathered.book.pk))
        if ids:
            usage.setdefault(str(gathered.book.tenant_id), set()).update(ids)
    return {tenant: sorted(ids) for tenant, ids in usage.items()}


def chat_turn(*, actor: Actor, chat_id: int, request: ContextInput, persist: bool = True) -> ContextResult:
    """One turn of a stored chat (P-7): lock it, gather its books, run, persist.

    ``request.profile`` may be empty: the chat's profile, else the tenant's,
    applies. ``persist=False`` is the chat preview (W-10): same selection,
    nothing written.
    """
    with transaction.atomic():
        # The tenant is the actor's (the filter says so), and gathering needs only the
        # character's id: one table, no join.
        chats = Chat.objects.for_tenant(actor.tenant)
        if persist:
            # Turns of one chat run one at a time: timed state is read, then written.
            chats = chats.select_for_update()
        chat = chats.filter(pk=chat_id).first()
        if chat is None:
            raise NotFound("No such chat.", field="id")
        chat.tenant = actor.tenant
        profile = request.profile or chat.profile or actor.tenant.default_profile
        request = replace(request, profile=profile)
        gathering = chat_books_gather(chat, profile=profile)
        result = context_run(request=request, gathering=gathering, state=chat.timed_state or {},
                             seed=f"chat-{chat.pk}", dry_run=not persist)
        if not persist:
            return result
        chat.timed_state = result.timed_state
        chat.turns += 1
        chat.save(update_fields=["timed_state", "turns"])
        # Persist what explains the turn; "not matched" is what every absent entry was.
        body = result.as_dict(log="compact")
        usage = _usage_of(result)
        log = RequestLog.objects.create(
            tenant=chat.tenant,
            chat=chat,
            turn=result.turn,
            profile=result.profile,
            model_id=request.model_id or "",
            injections=body["injections"],
            world_index=body["world_index"],
            log=body["request_log"],
            usage=usage,
            # Nothing injected, nothing to count: the usage sweep never needs to read it.
            usage_recorded_at=None if usage else timezone.now(),
        )
        if usage:
            # Counted off the request path, many turns at once (cast/usage.py).
            from lore_platform.cast.usage import request_usage_sweep_soon

            transaction.on_commit(request_usage_sweep_soon, robust=True)
        return replace(result, request_log_id=log.pk)
