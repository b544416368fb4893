"""Native conformance cases (``conformance/README.md``) in and out of engine values.

:func:`run_case` reads a case dict, runs every turn through the same engine the
API uses (:func:`retrieval.engine.assemble`), carrying the timed state from one
turn to the next, and returns the result dict: ``injections``,
``world_index``, ``log``, ``state`` (or ``{"turns": [...]}`` for a multi-turn
case). A malformed case raises :class:`CaseError` naming the bad field.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar, cast

from .tokenizers import UnknownTokenizerError, tokenizer_for
from .values import (
    PLACEMENTS,
    ROLES,
    SECONDARY_LOGICS,
    Book,
    BookSettings,
    Channel,
    Entry,
    Injection,
    LogRecord,
    Message,
    Model,
    Names,
    Profile,
    Selection,
    TimedState,
    TurnRequest,
)

__all__ = [
    "CaseError",
    "books_from_case",
    "case_kind",
    "chat_from_case",
    "request_from_case",
    "run_case",
    "selection_to_dict",
]

NATIVE_PROFILES = frozenset({"classic", "server", "smart"})
T = TypeVar("T")


class CaseError(ValueError):
    """The case cannot be read; the message names the field."""


def case_kind(data: object) -> Literal["native", "sillytavern"] | None:
    """``native`` when the case has a ``profile``; ``sillytavern`` for top-level
    ``entries`` plus ``world_info_*`` settings; ``None`` otherwise."""
    if not isinstance(data, Mapping):
        return None
    if "profile" in data:
        return "native"
    settings = data.get("settings")
    if "entries" in data and isinstance(settings, Mapping) and any(str(k).startswith("world_info_") for k in settings):
        return "sillytavern"
    return None


# --- small typed readers -------------------------------------------------


def _get(data: Mapping[str, Any], key: str, kind: type[T] | tuple[type, ...], where: str, default: Any = None) -> Any:
    value = data.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) and kind in (int, float):
        raise CaseError(f"{where}.{key}: expected a number, got a boolean")
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise CaseError(f"{where}.{key}: expected {names}, got {type(value).__name__}")
    return value


def _int(data: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int | None:
    value = _get(data, key, (int, float), where)
    if value is None:
        return default
    if isinstance(value, float) and not value.is_integer():
        raise CaseError(f"{where}.{key}: expected a whole number, got {value}")
    return int(value)


def _bool(data: Mapping[str, Any], key: str, where: str, default: bool | None = None) -> bool | None:
    value = _get(data, key, bool, where)
    return default if value is None else bool(value)


def _strings(data: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = data.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        # Keys are comma-separated in the editors; accept that shape too.
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if not isinstance(value, list) or not all(isinstance(item, (str, int)) for item in value):
        raise CaseError(f"{where}.{key}: expected a list of strings")
    return tuple(str(item) for item in value)


def _choice(data: Mapping[str, Any], key: str, allowed: frozenset[str], where: str, default: str) -> str:
    value = _get(data, key, str, where)
    if value is None:
        return default
    if value not in allowed:
        raise CaseError(f"{where}.{key}: {value!r} is not one of {', '.join(sorted(allowed))}")
    return cast(str, value)


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise CaseError(f"{where}: expected an object")
    return value


def _entry(raw: object, where: str) -> Entry:
    data = _mapping(raw, where)
    entry_id = data.get("id")
    if not isinstance(entry_id, (str, int)) or isinstance(entry_id, bool) or str(entry_id) == "":
        raise CaseError(f"{where}.id: every entry needs an id")
    probability = _int(data, "probability", where)
    if probability is not None and not 0 <= probability <= 100:
        raise CaseError(f"{where}.probability: {probability} is outside 0-100")
    return Entry(
        id=str(entry_id),
        title=_get(data, "title", str, where, ""),
        content=_get(data, "content", str, where, ""),
        keys=_strings(data, "keys", where),
        secondary_keys=_strings(data, "secondary_keys", where),
        secondary_logic=cast(Any, _choice(data, "secondary_logic", SECONDARY_LOGICS, where, "and_any")),
        constant=bool(_bool(data, "constant", where, False)),
        canon=bool(_bool(data, "canon", where, False)),
        enabled=bool(_bool(data, "enabled", where, True)),
        order=cast(int, _int(data, "order", where, 100)),
        priority=cast(int, _int(data, "priority", where, 10)),
        probability=probability,
        scan_depth=_int(data, "scan_depth", where),
        case_sensitive=_bool(data, "case_sensitive", where),
        whole_words=_bool(data, "whole_words", where),
        role=cast(Any, _choice(data, "role", ROLES, where, "system")),
        placement=cast(Any, _choice(data, "placement", PLACEMENTS, where, "after_persona")),
        aliases=_strings(data, "aliases", where),
        channels=_strings(data, "channels", where),
        key_expression=_get(data, "key_expression", str, where, ""),
    )


def books_from_case(raw: object) -> tuple[Book, ...]:
    """The case's ``books`` list as engine values, in attachment order."""
    if not isinstance(raw, list):
        raise CaseError("books: expected a list of books")
    books: list[Book] = []
    for number, item in enumerate(raw):
        where = f"books[{number}]"
        data = _mapping(item, where)
        name = _get(data, "name", str, where, "")
        if not name:
            raise CaseError(f"{where}.name: every book needs a name")
        settings_raw = _mapping(data.get("settings") or {}, f"{where}.settings")
        swhere = f"{where}.settings"
        settings = BookSettings(
            scan_depth=_int(settings_raw, "scan_depth", swhere),
            token_budget=_int(settings_raw, "token_budget", swhere),
            recursive=bool(_bool(settings_raw, "recursive", swhere, False)),
            active=bool(_bool(settings_raw, "active", swhere, True)),
            channels=_strings(settings_raw, "channels", swhere),
            case_sensitive=bool(_bool(settings_raw, "case_sensitive", swhere, False)),
            whole_words=bool(_bool(settings_raw, "whole_words", swhere, True)),
        )
        entries_raw = data.get("entries") or []
        if not isinstance(entries_raw, list):
            raise CaseError(f"{where}.entries: expected a list")
        scope = data.get("scope")
        if scope not in (None, "server", "persona"):
            raise CaseError(f"{where}.scope: {scope!r} is not server or persona")
        books.append(
            Book(
                id=str(data.get("id") or name),
                name=name,
                entries=tuple(_entry(e, f"{where}.entries[{i}]") for i, e in enumerate(entries_raw)),
                settings=settings,
                scope=scope,
                version=_int(data, "version", where),
            )
        )
    return tuple(books)


def chat_from_case(raw: object, where: str = "chat") -> tuple[Message, ...]:
    if not isinstance(raw, list):
        raise CaseError(f"{where}: expected a list of messages")
    messages: list[Message] = []
    for number, item in enumerate(raw):
        mwhere = f"{where}[{number}]"
        data = _mapping(item, mwhere)
        role = data.get("role")
        if role not in ("user", "assistant", "system"):
            raise CaseError(f"{mwhere}.role: expected user, assistant or system")
        text = data.get("text")
        if not isinstance(text, str):
            raise CaseError(f"{mwhere}.text: expected a string")
        messages.append(Message(role=role, text=text, name=_get(data, "name", str, mwhere, "")))
    return tuple(messages)


def request_from_case(
    case: Mapping[str, Any], chat: Sequence[Message], *, state: TimedState | None = None, books: tuple[Book, ...] | None = None
) -> TurnRequest:
    """One turn of a case as a :class:`TurnRequest`."""
    profile = case.get("profile")
    if profile not in NATIVE_PROFILES:
        raise CaseError(f"profile: {profile!r} is not one of {', '.join(sorted(NATIVE_PROFILES))}")
    names_raw = _mapping(case.get("names") or {}, "names")
    model_raw = _mapping(case.get("model") or {}, "model")
    channel_raw = case.get("channel")
    channel = None
    if channel_raw is not None:
        channel_data = _mapping(channel_raw, "channel")
        channel_id = channel_data.get("id")
        if not isinstance(channel_id, (str, int)) or isinstance(channel_id, bool):
            raise CaseError("channel.id: expected a channel id")
        parent = channel_data.get("parent")
        channel = Channel(id=str(channel_id), parent=None if parent is None else str(parent))
    seed = case.get("seed", case.get("name", ""))
    return TurnRequest(
        profile=cast(Profile, profile),
        books=books if books is not None else books_from_case(case.get("books")),
        chat=tuple(chat),
        names=Names(
            user=_get(names_raw, "user", str, "names", "User"),
            char=_get(names_raw, "char", str, "names", "Character"),
            bot=_get(names_raw, "bot", str, "names"),
        ),
        model=Model(
            id=_get(model_raw, "id", str, "model"),
            tokenizer=_get(model_raw, "tokenizer", str, "model"),
            input_window=_int(model_raw, "input_window", "model"),
        ),
        channel=channel,
        seed=str(seed),
        state=state or TimedState(),
    )


def injection_to_dict(injection: Injection) -> dict[str, Any]:
    """One injection in the result shape (the platform's answer reuses it, with integer ids)."""
    item: dict[str, Any] = {
        "entry": injection.entry,
        "book": injection.book,
        "slot": injection.slot,
        "role": injection.role,
        "content": injection.content,
        "tokens": injection.tokens,
        "label": injection.label,
        "cache_stable": injection.cache_stable,
    }
    if injection.placement is not None:
        item["placement"] = injection.placement
    return item


def log_record_to_dict(record: LogRecord) -> dict[str, Any]:
    """One request-log record in the result shape; optional fields only when set."""
    row: dict[str, Any] = {
        "entry": record.entry,
        "book": record.book,
        "outcome": record.outcome,
        "detail": record.detail,
    }
    if record.key is not None:
        row["key"] = record.key
    if record.message is not None:
        row["message"] = record.message
    if record.via_entry is not None:
        row["via_entry"] = record.via_entry
    if record.warnings:
        row["warnings"] = list(record.warnings)
    return row


def selection_to_dict(selection: Selection) -> dict[str, Any]:
    """The result shape of ``conformance/README.md`` (extra keys are informative)."""
    injections = [injection_to_dict(i) for i in selection.injections]
    log = [log_record_to_dict(r) for r in selection.request_log]
    result: dict[str, Any] = {
        "injections": injections,
        "world_index": [{"entry": line.entry, "line": line.line} for line in selection.world_index],
        "log": log,
        "state": selection.state.to_dict(),
        "tokenizer": {"name": selection.tokenizer, "estimate": selection.tokens_estimated},
    }
    if selection.warnings:
        result["warnings"] = list(selection.warnings)
    return result


def run_case(case: Mapping[str, Any]) -> dict[str, Any]:
    """Run a native case (one ``chat`` or several ``turns``) and return its result dict."""
    from . import ProfileUnavailableError, assemble

    if not isinstance(case, Mapping):
        raise CaseError("a case is a JSON object")
    if case_kind(case) != "native":
        raise CaseError("profile: a native case names its profile")
    books = books_from_case(case.get("books"))
    model_raw = _mapping(case.get("model") or {}, "model")
    try:
        tokenizer = tokenizer_for(
            _get(model_raw, "id", str, "model"), tokenizer=_get(model_raw, "tokenizer", str, "model")
        )
    except UnknownTokenizerError as error:
        raise CaseError(f"model.tokenizer: {error}") from error
    state = TimedState.from_dict(_mapping(case.get("state") or {}, "state"))

    if "turns" in case:
        turns = case["turns"]
        if not isinstance(turns, list) or not turns:
            raise CaseError("turns: expected a non-empty list of {chat: [...]}")
        results = []
        for number, turn in enumerate(turns):
            chat = chat_from_case(_mapping(turn, f"turns[{number}]").get("chat"), f"turns[{number}].chat")
            request = request_from_case(case, chat, state=state, books=books)
            try:
                selection = assemble(request, tokenizer=tokenizer)
            except ProfileUnavailableError as error:
                raise CaseError(str(error)) from error
            state = selection.state
            results.append(selection_to_dict(selection))
        return {"turns": results}

    chat = chat_from_case(case.get("chat"))
    request = request_from_case(case, chat, state=state, books=books)
    try:
        selection = assemble(request, tokenizer=tokenizer)
    except ProfileUnavailableError as error:
        raise CaseError(str(error)) from error
    return selection_to_dict(selection)
