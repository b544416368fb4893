"""The ``server`` profile: community / Discord-bot lorebooks (SPEC §3).

One turn, per entry, in this order of reasons:

1. ``collection_off``: the book (collection) is switched off (S-12); the
   entries' own enabled flags are untouched, so switching it on restores them.
2. ``disabled``: the entry itself is off.
3. ``channel`` (S-11, S-13): the channel rules are the collection's list (for
   server-wide books) and the entry's own list (for persona books); an empty
   list allows every channel, a thread follows its parent channel, and a list
   holding an unresolved legacy ``#name`` counts as every channel (flagged in
   the log) until an admin saves a selection. With no channel in the request,
   a restricted entry does not apply.
4. Activation (S-3 .. S-7): blank keywords mean always-on; otherwise a keyword
   within the entry's "messages to search" (every speaker counts), then the
   secondary logic (any / all / none / less-than-all). Matching ignores case
   and full-width/half-width forms and is literal: ``/a+/`` is four
   characters. Probability 0 blocks even a keywordless entry; null is 100.
5. Placement (S-8): always-on entries (blank keywords, probability 100) go in
   the ``system`` slot; keyword- or probability-activated entries go in the
   ``recent`` slot, right above the ``SERVER.recent_turns`` most recent
   dialogue turns and before retrieved documents. In each slot, before-persona entries come first, then
   after-persona ones (each injection names its placement), each by insertion
   number, lower first.
6. Budget (S-9): ``SERVER.character_budget`` characters (see :mod:`.rules`)
   of the text the model sees, shared by both slots, always-on entries first. An entry that does not fit is skipped
   (``skipped_size``) and later, smaller ones are still tried.

Name macros are replaced; other ``{{...}}`` text stays as written (S-10).
"""
from __future__ import annotations

from .keyword import (
    CompiledBookSet,
    CompiledEntry,
    Trigger,
    book_set_compile,
    chat_hits,
    entry_evidence,
    log_record,
    macros_apply,
    probability_detail,
    probability_passes,
    trigger_of,
    turn_log,
)
from .rules import SERVER
from .tokenizers import Tokenizer
from .values import Channel, Injection, LogRecord, Outcome, Selection, TurnRequest

__all__ = ["channel_check", "server_assemble", "server_select"]

SYSTEM_SLOT = "system"
RECENT_SLOT = "recent"
_PLACEMENT_RANK = {"before_persona": 0, "after_persona": 1}


def channel_check(
    lists: tuple[tuple[str, ...], ...], channel: Channel | None
) -> tuple[bool, str]:
    """Whether every restriction list allows ``channel``; the second value explains.

    ``lists`` are the collection's and the entry's channel lists. An entry in
    an unresolved legacy ``#name`` list is allowed everywhere and flagged.
    """
    notes: list[str] = []
    for allowed in lists:
        if not allowed:
            continue
        legacy = [name for name in allowed if name.startswith("#")]
        if legacy:
            notes.append(
                f"unresolved legacy channel {', '.join(legacy)}: active in all channels until an admin saves a "
                "channel selection"
            )
            continue
        if channel is None:
            return False, f"restricted to {', '.join(allowed)} and the request names no channel"
        if channel.effective not in allowed:
            where = channel.id if channel.parent is None else f"thread {channel.id} of {channel.parent}"
            return False, f"restricted to {', '.join(allowed)}; this chat is in {where}"
    return True, "; ".join(notes)


def server_assemble(request: TurnRequest, *, tokenizer: Tokenizer) -> Selection:
    """Assemble one server turn: ``system`` then ``recent`` injections and the request log."""
    return server_select(book_set_compile(request.books, profile="server"), request, tokenizer=tokenizer)


def server_select(compiled: CompiledBookSet, request: TurnRequest, *, tokenizer: Tokenizer) -> Selection:
    """:func:`server_assemble` on an already compiled book set (the request's books, compiled for server)."""
    entries = compiled.entries
    chat = request.chat
    seed, turn = request.seed, request.turn_number
    hits = chat_hits(compiled, chat)
    records: dict[int, LogRecord] = {}  # entry index -> what this turn says of it (turn_log)
    always_set = set(compiled.always)

    # Only entries with a reason to be looked at: always-on ones and owners of keys found.
    candidates = always_set | {compiled.key_entry[key] for key in hits}
    system: list[tuple[CompiledEntry, Trigger, str]] = []
    recent: list[tuple[CompiledEntry, Trigger, str]] = []
    for index in sorted(candidates):
        candidate = entries[index]
        if not candidate.book.settings.active or not candidate.entry.enabled:
            continue  # the quiet record already says collection_off / disabled
        allowed, channel_note = channel_check((candidate.book.settings.channels, candidate.entry.channels), request.channel)
        if not allowed:
            records[index] = log_record(candidate, Outcome.CHANNEL, channel_note)
            continue
        if index in always_set:
            trigger = Trigger(detail="blank keywords: always-on" if candidate.keyless else "constant entry")
            # A keywordless entry below 100% is probability-activated, not always-on (S-8).
            slot = SYSTEM_SLOT if candidate.probability >= 100 else RECENT_SLOT
        else:
            evidence = entry_evidence(compiled, candidate, hits)
            if not evidence.matched:
                continue
            trigger = trigger_of(evidence, compiled, chat)
            if not evidence.secondary_ok:
                records[index] = log_record(
                    candidate,
                    Outcome.SECONDARY_FAILED,
                    f"{trigger.detail}; {evidence.detail}",
                    key=trigger.key,
                    message=trigger.message,
                )
                continue
            slot = RECENT_SLOT
        if not probability_passes(candidate.probability, seed=seed, turn=turn, entry_id=candidate.entry.id):
            records[index] = log_record(
                candidate,
                Outcome.PROBABILITY,
                f"{trigger.detail}; {probability_detail(candidate.probability)}",
                key=trigger.key,
                message=trigger.message,
            )
            continue
        (system if slot == SYSTEM_SLOT else recent).append((candidate, trigger, channel_note))

    def placement_key(item: tuple[CompiledEntry, Trigger, str]) -> tuple[int, int, int, int]:
        compiled_entry = item[0]
        return (
            _PLACEMENT_RANK[compiled_entry.entry.placement],
            compiled_entry.order,
            compiled_entry.book_index,
            compiled_entry.position,
        )

    system.sort(key=placement_key)
    recent.sort(key=placement_key)

    used = 0
    injections: list[Injection] = []
    for slot, group in ((SYSTEM_SLOT, system), (RECENT_SLOT, recent)):
        for candidate, trigger, channel_note in group:
            text = macros_apply(candidate.text, request.names)
            size = len(text)
            if used + size > SERVER.character_budget:
                records[candidate.index] = log_record(
                    candidate,
                    Outcome.SKIPPED_SIZE,
                    f"{trigger.detail}; {size} characters do not fit: {used} of the "
                    f"{SERVER.character_budget:,}-character budget already used",
                    key=trigger.key,
                    message=trigger.message,
                )
                continue
            used += size
            tokens = tokenizer.count(text)
            injections.append(
                Injection(
                    entry=candidate.entry.id,
                    book=candidate.book.name,
                    slot=slot,
                    # The system part of the prompt is system text whatever the entry's role.
                    role="system" if slot == SYSTEM_SLOT else candidate.role,
                    content=text,
                    tokens=tokens,
                    placement=candidate.entry.placement,
                )
            )
            detail = f"{trigger.detail}; {slot} slot, {candidate.entry.placement}, {size} characters"
            if channel_note:
                detail += f"; {channel_note}"
            records[candidate.index] = log_record(
                candidate, Outcome.INJECTED, detail, key=trigger.key, message=trigger.message
            )

    request_log, unlisted = turn_log(compiled, records, full=request.log_full)
    return Selection(
        injections=tuple(injections),
        request_log=request_log,
        state=request.state,
        warnings=compiled.warnings,
        tokenizer=tokenizer.name,
        tokens_estimated=tokenizer.is_estimate,
        not_matched_unlisted=unlisted,
    )
