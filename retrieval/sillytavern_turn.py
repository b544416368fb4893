"""The ``sillytavern`` profile for platform books: SillyTavern's World Info, exactly.

Books are turned into SillyTavern's own entry objects with the exporter's
field mapping (``books.formats.sillytavern``: our modelled fields plus the
SillyTavern settings kept in ``extra``, so groups, sticky/cooldown/delay,
positions and recursion flags all act), compiled once per book version, and
scanned by :mod:`retrieval.engine.sillytavern`. Each entry's SillyTavern uid
is its database id, so results name entries the same way every profile does.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from books.exports import book_as_imported
from books.models import Entry
from books.formats.sillytavern import world_entry
from lore_platform.cast.attachments import GatheredBook
from retrieval.engine import values as ev
from retrieval.engine.matching import CompileCache as MatcherCache
from retrieval.engine.sillytavern.cases import chat_for_world_info
from retrieval.engine.sillytavern.entries import WorldInfoBooks, WorldInfoSettings, book_from_st_json
from retrieval.engine.sillytavern.macros import MacroEnvironment
from retrieval.engine.sillytavern.scan import CompileCache, ScanRequest, scan_world_info
from retrieval.engine.sillytavern.timed_effects import TimedEffectsState
from retrieval.engine.tokenizers import Tokenizer

STATE_KEY = "sillytavern"
# SillyTavern's shipped defaults where a book says nothing (default/settings.json).
DEFAULT_DEPTH = 2
DEFAULT_BUDGET_PERCENT = 25
ROLE_NAMES = {0: "system", 1: "user", 2: "assistant"}

_compiled = CompileCache(max_size=64)
_entries: MatcherCache[tuple[Any, ...]] = MatcherCache(maxsize=256)


def _book_key(book: Any) -> tuple[int, int, float]:
    return (book.pk, book.version, book.created_at.timestamp())


def _st_entries(book: Any) -> tuple[Any, ...]:
    """The book as SillyTavern entry values (uid = entry id), once per book version."""

    def load() -> tuple[Any, ...]:
        imported = book_as_imported(book)
        ids = Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position", "id")
        raw = [world_entry(entry, index=i, uid=pk)
               for i, (entry, pk) in enumerate(zip(imported.entries, ids.values_list("pk", flat=True)))]
        return book_from_st_json(raw, world=str(book.pk))

    return _entries.get(_book_key(book), load)


def settings_for(books: Sequence[Any]) -> WorldInfoSettings:
    """SillyTavern's globals from the books: the deepest scan, any recursion, the largest budget cap."""
    depths = [b.scan_depth for b in books if b.scan_depth is not None]
    budgets = [b.token_budget for b in books if b.token_budget]
    return WorldInfoSettings(
        depth=max(depths) if depths else DEFAULT_DEPTH,
        budget=DEFAULT_BUDGET_PERCENT if not budgets else 100,
        budget_cap=max(budgets) if budgets else 0,
        recursive=any(b.recursive for b in books),
        case_sensitive=all(b.case_sensitive for b in books) if books else False,
        match_whole_words=all(b.whole_words for b in books) if books else True,
        include_names=True,
    )


def sillytavern_select(
    *,
    books: Sequence[GatheredBook],
    chat: Sequence[ev.Message],
    names: ev.Names,
    input_window: int,
    tokenizer: Tokenizer,
    state: dict[str, Any],
    dry_run: bool = False,
) -> tuple[ev.Selection, dict[str, Any]]:
    """One SillyTavern World Info generation over platform books; returns the selection and new state."""
    book_rows = [g.book for g in books]
    world = WorldInfoBooks(global_lore=tuple(e for book in book_rows for e in _st_entries(book)))
    settings = settings_for(book_rows)
    macros = MacroEnvironment(user=names.user, char=names.char)
    version = hashlib.blake2b(json.dumps([_book_key(b) for b in book_rows]).encode(), digest_size=12).hexdigest()
    compiled = _compiled.get_or_compile(version, world, settings=settings, macros=macros)
    messages = [
        {"name": m.name or (names.user if m.role == "user" else names.char), "is_user": m.role == "user",
         "is_system": m.role == "system", "mes": m.text}
        for m in chat
    ]
    request = ScanRequest(
        chat=chat_for_world_info(messages, include_names=settings.include_names, user_name=names.user),
        max_context=input_window,
        dry_run=dry_run,
    )
    timed = TimedEffectsState.from_json(state.get(STATE_KEY)) if state.get(STATE_KEY) else TimedEffectsState()
    result = scan_world_info(compiled, request, timed, count_tokens=tokenizer.count)

    injections: list[ev.Injection] = []

    def place(placed: Any, slot: str, role: str = "system", detail: str | None = None) -> None:
        injections.append(ev.Injection(entry=str(placed.uid), book=placed.world, slot=slot, role=role,  # type: ignore[arg-type]
                                       content=placed.content, tokens=tokenizer.count(placed.content),
                                       label=detail))

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
    for book in book_rows:
        for entry in _st_entries(book):
            key = (entry.world, str(entry.uid))
            if key in placed_ids:
                outcome, detail = ev.Outcome.INJECTED, "activated by SillyTavern World Info"
            elif key in activated:
                outcome, detail = ev.Outcome.INJECTED, "activated, nothing to place (empty content)"
            elif entry.disable:
                outcome, detail = ev.Outcome.DISABLED, "disabled"
            else:
                outcome, detail = ev.Outcome.NOT_MATCHED, "not activated"
            log.append(ev.LogRecord(entry=str(entry.uid), book=entry.world, outcome=outcome, detail=detail))
    selection = ev.Selection(injections=tuple(injections), request_log=tuple(log), tokenizer=tokenizer.name,
                             tokens_estimated=tokenizer.is_estimate)
    return selection, {STATE_KEY: result.timed_effects.to_json()}
