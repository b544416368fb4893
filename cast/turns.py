"""The chat turn (P-7): the one home of every turn, for partner apps and for people.

``chat_turn`` (a stored chat), ``stateless_turn`` (books and/or a character,
story or novel named in the call), ``chat_preview`` and ``book_preview``
(W-10: the same selection, nothing written) all run :func:`turn_run`:

1. gather the books the turn reaches (``cast.selectors``: W-8, W-9, S-2);
2. load them as engine values (``retrieval.adapter.loading``, cached per book version);
3. run the engine under the profile (``retrieval.engine.assemble``: every
   profile, the ``sillytavern`` one included);
4. label group-chat lore with its character (W-8) and render the prompt
   template when asked (C-12, S-8).

Only ``chat_turn`` stores a turn. It reads its chat, gathers the chat's books, runs
from the chat's timed state, then stores the new state, the turn counter and
the request log (C-15) together, on the condition that no other turn of the
chat landed meanwhile (``cast.turn_store``: a compare-and-swap, no lock held
while the engine runs). When one did, nothing is stored and the turn runs
again from the newer state, this time holding the chat until it is stored.
The entries a turn injected are counted (W-11) off the request path. For the
smart profile the turn's last messages are embedded once, before the first
run.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from django.db import transaction

from books.models import Book
from books.services import entries_flag_regex_overruns
from cast.living import LivingWorld, living_world_for
from cast.models import Character, Chat, Novel, Story
from cast.selectors import GatheredBook, Gathering, chat_books_gather
from cast.turn_store import (
    ChatRow,
    RequestLogRow,
    TurnState,
    chat_read,
    turn_state_lock,
    turn_write,
)
from cast.usage import request_usage_sweep_soon
from lore_platform.errors import NotFound, ValidationFailed
from lore_platform.tenancy.actor import Actor
from retrieval.adapter.loading import engine_book
from retrieval.adapter.lookup import lookup_tool_schema
from retrieval.adapter.vector_store import ChatMeaningSearch
from retrieval.engine import ProfileUnavailableError, assemble, values as ev
from retrieval.engine.cases import injection_to_dict
from retrieval.engine.regex_budget import (
    is_overrun_warning,
    overrun_entries,
    regex_budget,
    selection_with_overruns,
)
from retrieval.engine.smart import meaning_window
from retrieval.engine.templates import TemplateError, prompt_render
from retrieval.engine.tokenizers import (
    Tokenizer,
    UnknownTokenizerError,
    model_lookup,
    tokenizer_for,
)
from sharing.selectors import book_for_attach

LogDetail = Literal["compact", "full"]


@dataclass(frozen=True, kw_only=True)
class TurnInput:
    """What a partner app (or a preview box) sends for one turn."""

    messages: tuple[ev.Message, ...]
    # Empty: the chat's profile, else the tenant's default.
    profile: str = ""
    names: ev.Names = field(default_factory=ev.Names)
    model_id: str | None = None
    tokenizer: str | None = None
    input_window: int | None = None
    # None: a stored chat's own channel applies (S-11).
    channel: ev.Channel | None = None
    template: tuple[str, ...] | None = None
    parts: Mapping[str, str] = field(default_factory=dict)
    render: bool = False
    # The model can call tools: a world index comes with the lookup tool (W-5).
    tools: bool = False
    # compact: entries simply not matched are counted, not listed (C-15).
    log: LogDetail = "compact"
    # What SillyTavern's activation reads beyond the messages (issue 31): the generation type, the
    # active character (None: the chat's or the named character's, if any) and the extra match texts.
    generation_type: ev.GenerationType = "normal"
    character: ev.ActiveCharacter | None = None
    match_texts: ev.MatchTexts = field(default_factory=ev.MatchTexts)


@dataclass(frozen=True, kw_only=True)
class ModelUsed:
    id: str | None
    tokenizer: str
    tokens_estimated: bool
    input_window: int


@dataclass(frozen=True, kw_only=True)
class LogSummary:
    """How many entries the turn considered, and how many were simply not matched (C-15)."""

    entries: int
    not_matched: int
    not_matched_listed: bool


@dataclass(frozen=True, kw_only=True)
class TurnAnswer:
    """One turn's answer: the engine's selection and what the platform adds around it."""

    profile: str
    turn: int
    model: ModelUsed
    selection: ev.Selection
    gathering: Gathering
    timed_state: dict[str, Any]
    tools: tuple[dict[str, Any], ...] = ()
    # A chat turn that reaches its owner's living book: its tools, or why there are none (L-1).
    living_world: LivingWorld | None = None
    # The full rendered message list, when a template was asked for.
    rendered: tuple[dict[str, Any], ...] | None = None
    log: LogDetail = "compact"
    request_log_id: int | None = None

    # Rows built once per answer and shared by the stored log and the body; ``replace()``
    # passes this same dict on (the copy that carries the request log id reuses them).
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def request_log(self, log: LogDetail | None = None) -> tuple[ev.LogRecord, ...]:
        """The log as answered: compact leaves out entries that were simply not matched
        (one whose regex key was skipped for time stays: the reason is in its warnings)."""
        records = self.selection.request_log
        if (log or self.log) == "full":
            if self.selection.not_matched_unlisted:
                # The engine listed only what a compact log shows: run the turn with log "full".
                raise ValueError("this answer's log is compact; the full log was not built")
            return records
        key = "compact_records"
        if key not in self.memo:
            kept, not_matched = [], 0
            for r in records:  # one pass for the compact log and the count (2,000 records a turn)
                if r.outcome != ev.Outcome.NOT_MATCHED:
                    kept.append(r)
                    continue
                not_matched += 1
                if r.warnings and any(map(is_overrun_warning, r.warnings)):
                    kept.append(r)
            self.memo[key] = tuple(kept)
            self.memo.setdefault("not_matched", not_matched)
        return self.memo[key]

    def log_rows(self, log: LogDetail | None = None) -> list[dict[str, Any]]:
        key = f"log_rows:{log or self.log}"
        if key not in self.memo:
            self.memo[key] = [log_row(r) for r in self.request_log(log)]
        return self.memo[key]

    def injection_rows(self) -> list[dict[str, Any]]:
        if "injection_rows" not in self.memo:
            self.memo["injection_rows"] = [injection_row(i) for i in self.selection.injections]
        return self.memo["injection_rows"]

    @property
    def request_log_summary(self) -> LogSummary:
        records = self.selection.request_log
        # A profile may have counted the simply not matched without listing them (compact log).
        unlisted = self.selection.not_matched_unlisted
        if "not_matched" not in self.memo:
            self.request_log("compact")  # counts them while it leaves them out
        return LogSummary(entries=len(records) + unlisted, not_matched=self.memo["not_matched"] + unlisted,
                          not_matched_listed=self.log == "full")


# --- rows stored in request logs and answered by the API (ids are integers) ----------------


_ids: dict[str, int] = {}


def _id(value: str | None) -> int | str | None:
    # Engine values name entries and books by their database id as text; ~1,000 a turn, so the
    # conversions are remembered (bounded: a process sees at most its books' entries, usually).
    if value is None:
        return None
    found = _ids.get(value)
    if found is None:
        if not value.isdigit():
            return value
        if len(_ids) > 200_000:
            _ids.clear()
        found = _ids[value] = int(value)
    return found


def injection_row(injection: ev.Injection) -> dict[str, Any]:
    """The engine's result shape (``engine.cases``, as the CLI writes it), with integer ids."""
    return {**injection_to_dict(injection), "entry": _id(injection.entry), "book": _id(injection.book)}


def log_row(record: ev.LogRecord) -> dict[str, Any]:
    """``engine.cases.log_record_to_dict`` with integer ids, built in one go: ~300 rows a turn, where
    the copy-then-replace way cost ~0.3 ms (tests/platform/test_context_hot_path.py keeps them equal)."""
    ids = _ids
    entry, book = record.entry, record.book
    row: dict[str, Any] = {"entry": ids.get(entry) or _id(entry), "book": ids.get(book) or _id(book),
                           "outcome": record.outcome, "detail": record.detail}
    if record.key is not None:
        row["key"] = record.key
    if record.message is not None:
        row["message"] = record.message
    if record.via_entry is not None:
        row["via_entry"] = _id(record.via_entry)
    if record.warnings:
        row["warnings"] = list(record.warnings)
    return row


def world_index_row(line: ev.WorldIndexLine) -> dict[str, Any]:
    return {"entry": _id(line.entry), "line": line.line}


def stored_rows_normalise(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Request logs stored before ids were integers name them as text: answer integers."""
    out = []
    for row in rows:
        fixed = dict(row)
        for name in ("entry", "book", "via_entry"):
            value = fixed.get(name)
            if isinstance(value, str) and value.isdigit():
                fixed[name] = int(value)
        out.append(fixed)
    return out


# --- running a turn -------------------------------------------------------------------------


def _tokenizer(request: TurnInput) -> Tokenizer:
    try:
        return tokenizer_for(request.model_id, tokenizer=request.tokenizer)
    except UnknownTokenizerError as exc:
        raise ValidationFailed(str(exc), field="model.tokenizer", rule="C-14") from exc


def _timed_state(state: Mapping[str, Any]) -> ev.TimedState:
    try:
        return ev.TimedState.from_dict(state)
    except ValueError as exc:
        raise ValidationFailed(str(exc), field="timed_state") from exc


def _labelled(selection: ev.Selection, books: Sequence[GatheredBook]) -> ev.Selection:
    labels = {str(g.book.pk): g.label for g in books if g.label}
    if not labels:
        return selection
    injections = tuple(replace(i, label=labels.get(i.book, i.label)) for i in selection.injections)
    return replace(selection, injections=injections)


def _meaning_for(profile: str, gathering: Gathering, messages: Sequence[ev.Message]) -> ChatMeaningSearch | None:
    """The smart profile's meaning search, with the turn's window already embedded (W-4)."""
    if profile != "smart":
        return None
    meaning = ChatMeaningSearch([g.book for g in gathering.books])
    meaning.window_embed(meaning_window(messages))
    return meaning


def _overruns_flag(gathering: Gathering, flagged: Mapping[tuple[str, str], Mapping[str, str]]) -> None:
    """Flag the entries whose regex keys overran, for the editor (a preview flags them too)."""
    for gathered in gathering.books:
        per_entry = {int(entry): keys for (book, entry), keys in flagged.items() if book == str(gathered.book.pk)}
        if per_entry:
            entries_flag_regex_overruns(book=gathered.book, overruns=per_entry)


def turn_run(
    *,
    request: TurnInput,
    profile: str,
    gathering: Gathering,
    state: Mapping[str, Any],
    seed: str,
    turn: int | None = None,
    dry_run: bool = False,
    meaning: ChatMeaningSearch | None = None,
) -> TurnAnswer:
    """Run the engine over gathered books. Reads the database (book rows); writes only the flag
    of a regex key that overran its time budget (``regex_budget``).

    ``state`` is the chat's stored timed state (JSON); the answer carries the new one.
    """
    tokenizer = _tokenizer(request)
    input_window = request.input_window or model_lookup(request.model_id).input_window
    engine_request = ev.TurnRequest(
        profile=profile,  # type: ignore[arg-type]
        books=tuple(engine_book(g.book, profile=profile) for g in gathering.books),
        chat=request.messages,
        names=request.names,
        model=ev.Model(id=request.model_id, tokenizer=tokenizer.name, input_window=input_window),
        channel=request.channel,
        seed=seed,
        turn=turn,
        state=_timed_state(state),
        dry_run=dry_run,
        log_full=request.log == "full",
        generation_type=request.generation_type,
        character=request.character,
        match_texts=request.match_texts,
    )
    if meaning is None:
        meaning = _meaning_for(profile, gathering, request.messages)
    try:
        with regex_budget() as budget:
            selection = assemble(engine_request, tokenizer=tokenizer, meaning=meaning)
    except ProfileUnavailableError as exc:
        raise ValidationFailed(str(exc), field="profile") from exc
    if budget.overruns:
        flagged = overrun_entries(engine_request.books, budget.overruns)
        selection = selection_with_overruns(selection, flagged)
        _overruns_flag(gathering, flagged)
    selection = _labelled(selection, gathering.books)
    rendered = None
    if request.render or request.template:
        try:
            messages = prompt_render(profile=profile, selection=selection, history=request.messages,
                                     parts=dict(request.parts), template=request.template)
        except TemplateError as exc:
            raise ValidationFailed(str(exc), field="template", rule="C-12") from exc
        rendered = tuple(_rendered_row(m) for m in messages)
    return TurnAnswer(
        profile=profile,
        turn=engine_request.turn_number,
        model=ModelUsed(id=request.model_id, tokenizer=tokenizer.name, tokens_estimated=tokenizer.is_estimate,
                        input_window=input_window),
        selection=selection,
        gathering=gathering,
        timed_state=selection.state.to_dict(),
        tools=(lookup_tool_schema(),) if request.tools and selection.world_index else (),
        rendered=rendered,
        log=request.log,
    )


def _rendered_row(message: Any) -> dict[str, Any]:
    row = {name: getattr(message, name) for name in message.__slots__ if getattr(message, name) is not None}
    if "entry" in row:
        row["entry"] = _id(row["entry"])
    return row


def _profile(actor: Actor, requested: str, chat: Chat | None = None) -> str:
    return requested or (chat.profile if chat is not None else "") or actor.tenant.default_profile


def _chat_channel(request: TurnInput, chat: Chat) -> TurnInput:
    """S-11: the chat's stored channel (and a thread's parent) applies unless the call names one."""
    if request.channel is not None or not chat.channel_id:
        return request
    return replace(request, channel=ev.Channel(id=chat.channel_id, parent=chat.parent_channel_id or None))


def _with_character(request: TurnInput, actor: Actor, profile: str, *, character_id: int | None,
                    character: Character | None = None, group_chat: int | None = None) -> TurnInput:
    """The chat's (or named) character is the active one unless the call names its own.

    In a group chat it is the member who speaks: the one named as ``names.char``, as SillyTavern
    generates for one member at a time. Only the sillytavern profile reads it (``characterFilter``),
    so only its turns look the name up.
    """
    if request.character is not None or profile != "sillytavern":
        return request
    name: str | None = None
    if character is not None:
        name = character.name
    elif character_id is not None:
        name = (Character.objects.for_tenant(actor.tenant).filter(pk=character_id)
                .values_list("name", flat=True).first())
    elif group_chat is not None:
        name = (Character.objects.for_tenant(actor.tenant).filter(group_chats=group_chat, name=request.names.char)
                .values_list("name", flat=True).first())
    return request if name is None else replace(request, character=ev.ActiveCharacter(name=name))


def _chat_character(request: TurnInput, actor: Actor, chat: Chat, profile: str) -> TurnInput:
    return _with_character(request, actor, profile, character_id=chat.character_id,
                           group_chat=chat.pk if chat.kind == Chat.Kind.GROUP else None)


def _usage_of(answer: TurnAnswer) -> dict[str, list[int]]:
    """Injected entry ids per owning tenant (a public book may belong to another tenant)."""
    injected: dict[str, set[int]] = {}
    for injection in answer.selection.injections:
        if injection.entry.isdigit():
            injected.setdefault(injection.book, set()).add(int(injection.entry))
    usage: dict[str, set[int]] = {}
    for gathered in answer.gathering.books:
        ids = injected.get(str(gathered.book.pk))
        if ids:
            usage.setdefault(str(gathered.book.tenant_id), set()).update(ids)
    return {tenant: sorted(ids) for tenant, ids in usage.items()}


def _chat_row(actor: Actor, chat_id: int) -> ChatRow:
    row = chat_read(tenant=actor.tenant, chat_id=chat_id)
    if row is None:
        raise NotFound("No such chat.", field="id")
    return row


def _request_log_row(answer: TurnAnswer, request: TurnInput) -> RequestLogRow:
    """The turn's request log (C-15): full when asked, else compact with the count of entries simply not matched."""
    summary = answer.request_log_summary
    return RequestLogRow(
        turn=answer.turn,
        profile=answer.profile,
        model_id=request.model_id or "",
        injections=answer.injection_rows(),
        world_index=[world_index_row(line) for line in answer.selection.world_index],
        log=answer.log_rows(),
        log_detail=answer.log,
        entries_considered=summary.entries,
        not_matched=summary.not_matched,
        usage=_usage_of(answer),
    )


def _turn_store(actor: Actor, chat: Chat, answer: TurnAnswer, *, request: TurnInput, read: TurnState) -> int | None:
    """Store the turn over the state it started from (``turn_store.turn_write``): the new request log's id,
    or ``None``, nothing stored, when another turn of the chat landed first. Once stored, the entries it
    injected are counted off the request path, many turns at once (W-11, ``cast/usage.py``)."""
    log = _request_log_row(answer, request)
    log_id = turn_write(tenant=actor.tenant, chat_id=chat.pk, read=read, timed_state=answer.timed_state, log=log)
    if log_id is not None and log.usage:
        transaction.on_commit(request_usage_sweep_soon, robust=True)
    return log_id


def _turn_on(chat: Chat, gathering: Gathering, *, request: TurnInput, profile: str, state: Mapping[str, Any],
             meaning: ChatMeaningSearch | None) -> TurnAnswer:
    answer = turn_run(request=request, profile=profile, gathering=gathering, state=state, seed=f"chat-{chat.pk}",
                      meaning=meaning)
    living = living_world_tools(chat, gathering, request, profile)
    return replace(answer, tools=answer.tools + (living.tools if living else ()), living_world=living)


def chat_turn(*, actor: Actor, chat_id: int, request: TurnInput) -> TurnAnswer:
    """One turn of a stored chat (P-7): read the chat, gather its books, run from its state, store the turn.

    The timed state, the turn counter and the request log are stored together or not at all, and
    each turn starts from the state the previous one left: a turn whose chat moved on while it ran
    (another turn of the chat landed first) stores nothing and runs again from the newer state.
    """
    row = _chat_row(actor, chat_id)
    chat = row.chat
    profile = _profile(actor, request.profile, chat)
    request = _chat_character(_chat_channel(request, chat), actor, chat, profile)
    gathering = chat_books_gather(chat, actor=actor, profile=profile)
    meaning = _meaning_for(profile, gathering, request.messages)  # embedded once, for both runs if need be
    answer = _turn_on(chat, gathering, request=request, profile=profile, state=row.state.timed_state,
                      meaning=meaning)
    log_id = _turn_store(actor, chat, answer, request=request, read=row.state)
    if log_id is None:
        # Rare (a chat is one conversation): run again, this time holding the chat until the turn is stored.
        with transaction.atomic():
            state = turn_state_lock(tenant=actor.tenant, chat_id=chat.pk)
            if state is None:
                raise NotFound("No such chat.", field="id")
            answer = _turn_on(chat, gathering, request=request, profile=profile, state=state.timed_state,
                              meaning=meaning)
            log_id = _turn_store(actor, chat, answer, request=request, read=state)
            if log_id is None:
                raise RuntimeError("a held chat's turn counter moved")
    return replace(answer, request_log_id=log_id)


def living_world_tools(chat: Chat, gathering: Gathering, request: TurnInput, profile: str) -> LivingWorld | None:
    """L-1/L-2: ``lore_create`` / ``lore_append`` for a tool-capable model in the owner's smart chat of a living
    book; elsewhere the reason there are none (``cast.living.living_world_for``)."""
    return living_world_for(chat, [g.book for g in gathering.books], profile=profile, tools=request.tools)


def chat_preview(*, actor: Actor, chat_id: int, request: TurnInput) -> TurnAnswer:
    """What a sample message would bring in this chat (W-10): the same selection, nothing written."""
    row = _chat_row(actor, chat_id)
    chat = row.chat
    profile = _profile(actor, request.profile, chat)
    request = _chat_character(_chat_channel(request, chat), actor, chat, profile)
    return turn_run(request=request, profile=profile, gathering=chat_books_gather(chat, actor=actor, profile=profile),
                    state=row.state.timed_state, seed=f"chat-{chat.pk}", dry_run=True)


def _transient_chat(actor: Actor, target: Mapping[str, int]) -> Chat:
    """An unsaved chat of a character, story or novel, for gathering its books."""
    chat = Chat(tenant=actor.tenant)
    found: object
    if "character_id" in target:
        chat.kind = Chat.Kind.CHARACTER
        chat.character = Character.objects.for_tenant(actor.tenant).filter(pk=target["character_id"]).first()
        found = chat.character
    elif "story_id" in target:
        chat.kind = Chat.Kind.STORY
        chat.story = Story.objects.for_tenant(actor.tenant).filter(pk=target["story_id"]).first()
        found = chat.story
    else:
        chat.kind = Chat.Kind.NOVEL
        chat.novel = Novel.objects.for_tenant(actor.tenant).filter(pk=target["novel_id"]).first()
        found = chat.novel
    if found is None:
        raise NotFound("No such character, story or novel.", field=next(iter(target)))
    return chat


def stateless_turn(
    *,
    actor: Actor,
    request: TurnInput,
    book_ids: Sequence[int] = (),
    target: Mapping[str, int] | None = None,
    timed_state: Mapping[str, Any] | None = None,
) -> TurnAnswer:
    """A turn with no stored chat: books by id and/or a character, story or novel's books (P-7).

    The caller may hand back the timed state of its previous turn.
    """
    target = dict(target or {})
    if len(target) > 1:
        raise ValidationFailed("Name at most one of character_id, story_id, novel_id.", field="character_id")
    profile = _profile(actor, request.profile)
    books = [GatheredBook(book=book_for_attach(actor, book_id=i), label=None, via="request") for i in book_ids]
    left_out = []
    if target:
        transient = _transient_chat(actor, target)
        request = _with_character(request, actor, profile, character_id=transient.character_id,
                                  character=transient.character)
        gathered = chat_books_gather(transient, actor=actor, profile=profile)
        seen = {g.book.pk for g in books}
        books += [g for g in gathered.books if g.book.pk not in seen]
        left_out = gathered.left_out
    return turn_run(request=request, profile=profile, gathering=Gathering(books=books, left_out=left_out),
                    state=timed_state or {}, seed=f"tenant-{actor.tenant.pk}")


def book_preview(*, actor: Actor, book: Book, request: TurnInput) -> TurnAnswer:
    """What a sample message would bring from one book (W-10); changes nothing.

    ``book`` is one the actor may read (``sharing.selectors.book_for_attach``).
    """
    profile = request.profile or book.profile
    gathering = Gathering(books=[GatheredBook(book=book, label=None, via="preview")], left_out=[])
    return turn_run(request=request, profile=profile, gathering=gathering, state={}, seed=f"preview-{book.pk}",
                    dry_run=True)
