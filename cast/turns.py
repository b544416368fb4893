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

Only ``chat_turn`` writes, and this module is the only code that locks a
chat: its timed state is read and written under the lock, then the request log
(C-15) is stored and the usage count (W-11) is scheduled off the request path.
For the smart profile the turn's last messages are embedded *before* the chat
row is locked; inside the lock the message-embedding cache answers.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from django.db import connection, transaction
from django.db.models.sql import InsertQuery, UpdateQuery
from django.utils import timezone

from books.models import Book
from books.services import entries_flag_regex_overruns
from cast.living import LivingWorld, living_world_for
from cast.models import Character, Chat, Novel, RequestLog, Story
from cast.selectors import GatheredBook, Gathering, chat_books_gather, chat_read, chat_state_lock
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


def _chat_read(actor: Actor, chat_id: int) -> Chat:
    # The tenant is the actor's (the filter says so), and gathering needs only the
    # character's id: one table, no join.
    chat = chat_read(tenant=actor.tenant, chat_id=chat_id)
    if chat is None:
        raise NotFound("No such chat.", field="id")
    return chat


# --- the turn's writes, as SQL the ORM compiled once ------------------------------------------
# The ORM's update() and create() spend more time building the statement than the database
# spends running it (measured ~0.3 and ~0.5 ms a turn); the values change every turn, the
# statement never does.
#
# A turn starts from the chat as it was read and lands only if no other turn of that chat landed
# in between: the UPDATE names the turn counter it read (only a turn writes the timed state, and
# every turn counts itself). On PostgreSQL the UPDATE and the request log's INSERT are one
# statement (``WITH ... INSERT``: both or neither), so a turn is three round trips (chat, books,
# write) instead of eight (with BEGIN, the row lock, COMMIT and a health check). A turn that
# finds its chat moved on runs again under the chat's lock, as every turn used to.

_TURNS_READ = 2_147_000_001  # a value no chat reaches: marks the counter's place among the parameters
_chat_writes: dict[tuple[int, int], tuple[str, tuple[Any, ...]]] = {}
_log_insert: dict[str, tuple[str, tuple[Any, ...]]] = {}
_turn_writes: dict[tuple[str, str], str] = {}


def _chat_state_update(actor: Actor, chat_id: int) -> tuple[str, tuple[Any, ...]]:
    """``UPDATE chat SET timed_state, turns WHERE <tenant> AND id AND turns = <read>`` (the tenant-scoped
    manager's statement) and its fixed parameters (tenant, id); the counter read comes last."""
    key = (actor.tenant.pk, chat_id)
    compiled = _chat_writes.get(key)
    if compiled is None:
        query = Chat.objects.for_tenant(actor.tenant).filter(pk=chat_id).filter(turns=_TURNS_READ).query.chain(UpdateQuery)
        query.add_update_values({"timed_state": {}, "turns": 0})  # type: ignore[attr-defined]  # an UpdateQuery
        sql, params = query.get_compiler(connection.alias).as_sql()
        if params[-1] != _TURNS_READ:
            raise RuntimeError("the chat update's parameters are not in the expected order")
        if len(_chat_writes) > 100_000:
            _chat_writes.clear()
        compiled = _chat_writes[key] = (sql, tuple(params[2:-1]))  # SET values first, then the filter's
    return compiled


def _request_log_statement() -> tuple[str, tuple[Any, ...]]:
    """``INSERT INTO request log (...) VALUES (...)`` as ``RequestLog.objects.create()`` would run it,
    returning the id where the database can, and its fields in parameter order."""
    compiled = _log_insert.get(connection.vendor)
    if compiled is None:
        fields = tuple(f for f in RequestLog._meta.local_concrete_fields if f is not RequestLog._meta.pk)
        query = InsertQuery(RequestLog)
        query.insert_values(fields, [RequestLog(tenant_id=0, chat_id=0)])
        compiler = query.get_compiler(connection.alias)
        if connection.features.can_return_columns_from_insert:
            compiler.returning_fields = [RequestLog._meta.pk]
        [(sql, _)] = compiler.as_sql()
        compiled = _log_insert[connection.vendor] = (sql, fields)
    return compiled


def _turn_write_statement(update_sql: str, insert_sql: str) -> str:
    """PostgreSQL: the chat's update and the request log's insert as one statement; the log row is
    inserted only when the update found the chat at the counter read. The same text for every chat."""
    found = _turn_writes.get((update_sql, insert_sql))
    if found is None:
        head, values_marker, rest = insert_sql.partition(" VALUES (")
        values, closing, returning = rest.rpartition(") RETURNING ")
        if not (values_marker and closing):
            raise RuntimeError("unexpected INSERT statement shape")
        found = _turn_writes[(update_sql, insert_sql)] = (
            f"WITH updated AS ({update_sql} RETURNING 1) {head} SELECT {values} FROM updated RETURNING {returning}"
        )
    return found


def _turn_store(actor: Actor, chat: Chat, answer: TurnAnswer, *, request: TurnInput, turns_read: int) -> int | None:
    """Write the turn: the chat's new timed state and counter, and its request log (C-15: full when
    asked, else compact with the count of entries simply not matched). The log's id, or ``None``
    (nothing written) when another turn of this chat landed since ``turns_read`` was read."""
    summary = answer.request_log_summary
    usage = _usage_of(answer)
    log = RequestLog(
        tenant=actor.tenant,
        chat=chat,
        turn=answer.turn,
        profile=answer.profile,
        model_id=request.model_id or "",
        injections=answer.injection_rows(),
        world_index=[world_index_row(line) for line in answer.selection.world_index],
        log=answer.log_rows(),
        log_detail=answer.log,
        entries_considered=summary.entries,
        not_matched=summary.not_matched,
        usage=usage,
        # Nothing injected, nothing to count: the usage sweep never needs to read it.
        usage_recorded_at=None if usage else timezone.now(),
    )
    insert_sql, fields = _request_log_statement()
    log_values = [f.get_db_prep_save(getattr(log, f.attname), connection) for f in fields]
    update_sql, where = _chat_state_update(actor, chat.pk)
    state = Chat._meta.get_field("timed_state").get_db_prep_save(answer.timed_state, connection)
    update_values = (state, turns_read + 1, *where, turns_read)
    log_id: int | None = None
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_turn_write_statement(update_sql, insert_sql), (*update_values, *log_values))
            row = cursor.fetchone()
        log_id = None if row is None else int(row[0])
    else:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(update_sql, update_values)
            if cursor.rowcount == 1:
                cursor.execute(insert_sql, log_values)
                if connection.features.can_return_columns_from_insert:
                    log_id = int(cursor.fetchone()[0])
                else:
                    log_id = int(connection.ops.last_insert_id(cursor, RequestLog._meta.db_table,
                                                               RequestLog._meta.pk.column))  # type: ignore[arg-type]
    if log_id is not None and usage:
        # Counted off the request path, many turns at once (cast/usage.py).
        transaction.on_commit(request_usage_sweep_soon, robust=True)
    return log_id


def _turn_on(chat: Chat, gathering: Gathering, *, request: TurnInput, profile: str, state: Mapping[str, Any],
             meaning: ChatMeaningSearch | None) -> TurnAnswer:
    answer = turn_run(request=request, profile=profile, gathering=gathering, state=state, seed=f"chat-{chat.pk}",
                      meaning=meaning)
    living = living_world_tools(chat, gathering, request, profile)
    return replace(answer, tools=answer.tools + (living.tools if living else ()), living_world=living)


def chat_turn(*, actor: Actor, chat_id: int, request: TurnInput) -> TurnAnswer:
    """One turn of a stored chat (P-7): gather, run from the chat's state, persist.

    The timed state, the turn counter and the request log are written together or not at all;
    each turn of a chat starts from the state the previous one left.
    """
    chat = _chat_read(actor, chat_id)
    profile = _profile(actor, request.profile, chat)
    request = _chat_character(_chat_channel(request, chat), actor, chat, profile)
    gathering = chat_books_gather(chat, actor=actor, profile=profile)
    meaning = _meaning_for(profile, gathering, request.messages)  # embeds before any lock
    answer = _turn_on(chat, gathering, request=request, profile=profile, state=chat.timed_state or {},
                      meaning=meaning)
    log_id = _turn_store(actor, chat, answer, request=request, turns_read=chat.turns)
    if log_id is None:
        # Another turn of this chat landed first: this one runs again from its state, under the lock.
        with transaction.atomic():
            locked = chat_state_lock(tenant=actor.tenant, chat_id=chat.pk)
            if locked is None:
                raise NotFound("No such chat.", field="id")
            state, turns_done = locked
            answer = _turn_on(chat, gathering, request=request, profile=profile, state=state, meaning=meaning)
            log_id = _turn_store(actor, chat, answer, request=request, turns_read=turns_done)
            if log_id is None:
                raise RuntimeError("a locked chat's turn counter moved")
    return replace(answer, request_log_id=log_id)


def living_world_tools(chat: Chat, gathering: Gathering, request: TurnInput, profile: str) -> LivingWorld | None:
    """L-1/L-2: ``lore_create`` / ``lore_append`` for a tool-capable model in the owner's smart chat of a living
    book; elsewhere the reason there are none (``cast.living.living_world_for``)."""
    return living_world_for(chat, [g.book for g in gathering.books], profile=profile, tools=request.tools)


def chat_preview(*, actor: Actor, chat_id: int, request: TurnInput) -> TurnAnswer:
    """What a sample message would bring in this chat (W-10): the same selection, nothing written."""
    chat = _chat_read(actor, chat_id)
    profile = _profile(actor, request.profile, chat)
    request = _chat_character(_chat_channel(request, chat), actor, chat, profile)
    return turn_run(request=request, profile=profile, gathering=chat_books_gather(chat, actor=actor, profile=profile),
                    state=chat.timed_state or {}, seed=f"chat-{chat.pk}", dry_run=True)


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
