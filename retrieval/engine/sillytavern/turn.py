"""The ``sillytavern`` profile as one engine turn: :class:`TurnRequest` in, :class:`Selection` out.

Each book arrives with its SillyTavern entry values (``Book.world_info``: every
World Info setting an entry carries, groups, sticky/cooldown/delay, positions,
recursion flags). The book set is compiled once per combination of book
versions and scanned by :func:`scan_world_info`; SillyTavern's timers travel in
``TimedState.sillytavern``. Results name entries by their uid, which the
platform sets to the entry's id, as every profile does.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ..rules import SILLYTAVERN
from ..tokenizers import UNKNOWN_MODEL, Tokenizer
from ..values import Book, Injection, LogRecord, Outcome, Role, Selection, TimedState, TurnRequest
from .cases import chat_for_world_info
from .entries import WorldInfoBooks, WorldInfoSettings
from .macros import MacroEnvironment
from .placement import PlacedEntry
from .scan import CompileCache, ScanRequest, scan_world_info
from .timed_effects import TimedEffectsState

ROLE_NAMES: dict[int, Role] = {0: "system", 1: "user", 2: "assistant"}

_compiled = CompileCache(max_size=64)


def settings_for(books: Sequence[Book]) -> WorldInfoSettings:
    """SillyTavern's globals from the books: the deepest scan, any recursion, the largest budget cap."""
    settings = [b.settings for b in books]
    depths = [s.scan_depth for s in settings if s.scan_depth is not None]
    budgets = [s.token_budget for s in settings if s.token_budget]
    return WorldInfoSettings(
        depth=max(depths) if depths else SILLYTAVERN.default_scan_depth,
        budget=SILLYTAVERN.default_budget_percent if not budgets else 100,
        budget_cap=max(budgets) if budgets else 0,
        recursive=any(s.recursive for s in settings),
        case_sensitive=all(s.case_sensitive for s in settings) if settings else False,
        match_whole_words=all(s.whole_words for s in settings) if settings else True,
        include_names=True,
    )


def _book_set_key(books: Sequence[Book]) -> str:
    parts = [f"{b.id}:{b.version if b.version is not None else id(b)}" for b in books]
    return hashlib.blake2b("|".join(parts).encode(), digest_size=12).hexdigest()


def sillytavern_assemble(request: TurnRequest, *, tokenizer: Tokenizer) -> Selection:
    """One SillyTavern World Info generation over the request's books."""
    books = request.books
    names = request.names
    world = WorldInfoBooks(global_lore=tuple(e for book in books for e in book.world_info))
    settings = settings_for(books)
    macros = MacroEnvironment(user=names.user, char=names.char)
    compiled = _compiled.get_or_compile(_book_set_key(books), world, settings=settings, macros=macros)
    messages = [
        {"name": m.name or (names.user if m.role == "user" else names.char), "is_user": m.role == "user",
         "is_system": m.role == "system", "mes": m.text}
        for m in request.chat
    ]
    scan = ScanRequest(
        chat=chat_for_world_info(messages, include_names=settings.include_names, user_name=names.user),
        max_context=request.model.input_window or UNKNOWN_MODEL.input_window,
        dry_run=request.dry_run,
    )
    stored = request.state.sillytavern
    timed = TimedEffectsState.from_json(stored) if stored else TimedEffectsState()
    result = scan_world_info(compiled, scan, timed, count_tokens=tokenizer.count)

    injections: list[Injection] = []

    def place(placed: PlacedEntry, slot: str, role: Role = "system") -> None:
        injections.append(Injection(entry=str(placed.uid), book=placed.world, slot=slot, role=role,
                                    content=placed.content, tokens=tokenizer.count(placed.content)))

    prompt = result.prompt
    for placed in prompt.before:
        place(placed, "before_char")
    for placed in prompt.after:
        place(placed, "after_char")
    for placed in prompt.an_top:
        place(placed, "authors_note_top")
    for placed in prompt.an_bottom:
        place(placed, "authors_note_bottom")
    for example in prompt.examples:
        place(example.entry, f"examples_{example.position}")
    for group in prompt.depth:
        for placed in group.entries:
            place(placed, f"depth_{group.depth}", ROLE_NAMES.get(group.role, "system"))

    activated = {(e.world, str(e.uid)) for e in result.activated}
    placed_ids = {(i.book, i.entry) for i in injections}
    log = []
    for book in books:
        for entry in book.world_info:
            key = (entry.world, str(entry.uid))
            if key in placed_ids:
                outcome, detail = Outcome.INJECTED, "activated by SillyTavern World Info"
            elif key in activated:
                outcome, detail = Outcome.INJECTED, "activated, nothing to place (empty content)"
            elif entry.disable:
                outcome, detail = Outcome.DISABLED, "disabled"
            else:
                outcome, detail = Outcome.NOT_MATCHED, "not activated"
            log.append(LogRecord(entry=str(entry.uid), book=entry.world, outcome=outcome, detail=detail))
    return Selection(
        injections=tuple(injections),
        request_log=tuple(log),
        state=TimedState(kept=request.state.kept, spent=request.state.spent,
                         sillytavern=result.timed_effects.to_json()),
        tokenizer=tokenizer.name,
        tokens_estimated=tokenizer.is_estimate,
    )
