"""The ``sillytavern`` profile as one engine turn: :class:`TurnRequest` in, :class:`Selection` out.

Each book arrives with its SillyTavern entry values (``Book.world_info``: every
World Info setting an entry carries, groups, sticky/cooldown/delay, positions,
recursion flags). The book set is compiled once per combination of book
versions and scanned by :func:`scan_world_info`; SillyTavern's timers travel in
``TimedState.sillytavern``. Results name entries by their uid, which the
platform sets to the entry's id, as every profile does.

The request's generation type, active character and match texts feed
``triggers``, ``characterFilter`` and the extra match sources. Outlet entries
come back as injections in the slot ``outlet_<name>``, in outlet order, and a
``{{outlet::name}}`` macro in any injected text is replaced by that outlet's
text (empty when the outlet has none), so it never reaches the prompt as written.
"""
from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence

from ..rules import SILLYTAVERN
from ..tokenizers import UNKNOWN_MODEL, Tokenizer
from ..values import Book, Injection, LogRecord, Outcome, Role, Selection, TimedState, TurnRequest
from .cases import chat_for_world_info
from .entries import CharacterIdentity, MatchSource, Position, WorldInfoBooks, WorldInfoSettings, generation_trigger
from .macros import MacroEnvironment
from .placement import PlacedEntry
from .scan import CompileCache, ScanRequest, scan_world_info
from .timed_effects import TimedEffectsState

ROLE_NAMES: dict[int, Role] = {0: "system", 1: "user", 2: "assistant"}
OUTLET_SLOT = "outlet_"
# SillyTavern's macro: {{outlet::name}}, any case, the name trimmed.
_OUTLET_MACRO = re.compile(r"\{\{outlet::(.+?)\}\}", re.IGNORECASE)

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
    texts = request.match_texts
    sources = {
        MatchSource.PERSONA_DESCRIPTION: texts.persona_description,
        MatchSource.CHARACTER_DESCRIPTION: texts.character_description,
        MatchSource.CHARACTER_PERSONALITY: texts.character_personality,
        MatchSource.CHARACTER_DEPTH_PROMPT: texts.character_depth_prompt,
        MatchSource.SCENARIO: texts.scenario,
        MatchSource.CREATOR_NOTES: texts.creator_notes,
    }
    # Card macros ({{description}}...) stay empty here: the compiled book set is cached per macro
    # environment, and a 2,000-entry book must not recompile for every character's card text.
    macros = MacroEnvironment(user=names.user, char=names.char)
    compiled = _compiled.get_or_compile(_book_set_key(books), world, settings=settings, macros=macros)
    messages = [
        {"name": m.name or (names.user if m.role == "user" else names.char), "is_user": m.role == "user",
         "is_system": m.role == "system", "mes": m.text}
        for m in request.chat
    ]
    trigger = generation_trigger(request.generation_type)
    active = request.character
    scan = ScanRequest(
        chat=chat_for_world_info(messages, include_names=settings.include_names, user_name=names.user,
                                 swipe=trigger == "swipe"),
        max_context=request.model.input_window or UNKNOWN_MODEL.input_window,
        dry_run=request.dry_run,
        trigger=trigger,
        # No character: name filters that include never pass, tag filters do not apply (as in SillyTavern).
        character=CharacterIdentity(file_name=active.name, tags=active.tags) if active else CharacterIdentity(),
        sources=sources,
    )
    stored = request.state.sillytavern
    timed = TimedEffectsState.from_json(stored) if stored else TimedEffectsState()
    # Rolls (probability, group weights) follow the chat's seed and turn, never the process's random state.
    rolls = random.Random(f"{request.seed}\x1f{request.turn_number}")
    result = scan_world_info(compiled, scan, timed, random=rolls.random, count_tokens=tokenizer.count)
    outlet_texts = {name: prompt_text for name, prompt_text in
                    ((name, "\n".join(p.content for p in entries)) for name, entries in result.prompt.outlets)}

    def outlets_filled(text: str) -> str:
        if "{{" not in text:
            return text
        return _OUTLET_MACRO.sub(lambda match: outlet_texts.get(match.group(1).strip(), ""), text)

    injections: list[Injection] = []

    def place(placed: PlacedEntry, slot: str, role: Role = "system") -> None:
        content = outlets_filled(placed.content)
        injections.append(Injection(entry=str(placed.uid), book=placed.world, slot=slot, role=role,
                                    content=content, tokens=tokenizer.count(content)))

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
    for name, entries in prompt.outlets:
        for placed in entries:
            place(placed, f"{OUTLET_SLOT}{name}")

    activated = {(e.world, str(e.uid)) for e in result.activated}
    placed_ids = {(i.book, i.entry) for i in injections}
    diagnostics = result.diagnostics
    cut = {(e.world, str(e.uid)) for e in diagnostics.cut_by_budget}
    filtered = {(e.world, str(e.uid)): why for e, why in diagnostics.filtered}
    log = []
    for book in books:
        for entry in book.world_info:
            key = (entry.world, str(entry.uid))
            if key in placed_ids or key in activated:
                outcome, detail = Outcome.INJECTED, _injected_detail(entry.position, entry.outlet_name, key in placed_ids)
                if entry.ignore_budget:
                    detail += "; ignores the budget"
            elif key in cut:
                tokens = tokenizer.count(entry.content)
                outcome = Outcome.OVER_BUDGET
                detail = f"matched, cut by budget ({diagnostics.budget_tokens} tokens; the entry has {tokens})"
            elif key in filtered:
                outcome, detail = Outcome.FILTERED, filtered[key]
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


def _injected_detail(position: int | None, outlet_name: str, placed: bool) -> str:
    if position == Position.OUTLET:
        if not outlet_name:
            return "activated, outlet entry without an outlet name (listed nowhere)"
        if placed:
            return f"activated, goes to outlet {outlet_name!r} (read by {{{{outlet::{outlet_name}}}}})"
        return f"activated, outlet {outlet_name!r} gets nothing (empty content)"
    if placed:
        return "activated by SillyTavern World Info"
    return "activated, nothing to place (empty content)"
