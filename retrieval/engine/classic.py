"""The ``classic`` profile: keyword lorebooks with ``@@`` decorators (SPEC §2).

One turn, in order:

1. All attached books are one group (C-1): one compiled book set, one scan.
2. Gates: disabled entries never fire (C-7); chat-dependent decorators
   (``@@is_greeting``, ``@@activate_only_after``, ``@@activate_only_every``,
   ``@@dont_activate_after_match``) block an entry before any matching.
3. Activation: constant entries (C-7) and entries whose ``@@keep`` has started
   need no key; others need a primary key within their scan depth, counted in
   messages of both sides (C-2, C-5), and their secondary logic (C-6).
4. Probability (entry field or ``@@probability``) is rolled once per turn per
   entry (C-13). ``@@keep`` entries already active skip the roll.
5. Recursion (C-4): when a book has recursive scanning on, the content of its
   activated entries is scanned again and may activate entries of any attached
   book; up to ``CLASSIC.recursion_passes`` passes after the chat scan (see
   :mod:`.rules`). An entry that only one more pass would have reached is
   logged as ``recursion``.
6. Budget (C-3, C-10, C-14): the highest token budget among the attached books,
   counted with the model's tokenizer on the text the model sees (decorator
   lines removed, name macros replaced). While activated lore is over budget,
   the lowest-priority entry is dropped (ties: lower order, then higher id
   drops first).
7. Placement (C-11, C-12): survivors by order descending, then priority
   descending, then entry id ascending; one ``lorebook`` slot, one message per
   entry with its role. The title never reaches the model (C-9).
8. Timed state: ``@@keep`` starts and ``@@dont_activate_after_match`` is spent
   when the entry activates (matched, gates and probability passed), whether
   or not the budget then lets it in.

Every entry of every book gets one request-log record (C-15).
"""
from __future__ import annotations

from .decorators import gate_allows
from .keyword import (
    CompiledBookSet,
    Trigger,
    book_set_compile,
    chat_hits,
    entry_evidence,
    entry_tokens,
    log_record,
    macros_apply,
    probability_detail,
    probability_passes,
    trigger_of,
    turn_log,
)
from .regex_budget import turn_overran
from .rules import CLASSIC
from .tokenizers import Tokenizer
from .values import Injection, LogRecord, Outcome, Selection, TimedState, TurnRequest

__all__ = ["classic_assemble", "classic_select"]

SLOT = "lorebook"


def classic_assemble(request: TurnRequest, *, tokenizer: Tokenizer) -> Selection:
    """Assemble one classic turn: injections for the ``lorebook`` slot, the request log, the new timed state."""
    return classic_select(book_set_compile(request.books, profile="classic"), request, tokenizer=tokenizer)


def classic_select(compiled: CompiledBookSet, request: TurnRequest, *, tokenizer: Tokenizer) -> Selection:
    """:func:`classic_assemble` on an already compiled book set (the request's books, compiled for classic)."""
    entries = compiled.entries
    chat = request.chat
    state = request.state
    seed, turn = request.seed, request.turn_number
    hits = chat_hits(compiled, chat)
    records: dict[int, LogRecord] = {}  # entry index -> what this turn says of it (turn_log)

    blocked: set[int] = set()
    for index in compiled.gated:
        gated = entries[index]
        if not gated.entry.enabled:
            continue
        reason = gate_allows(gated.decorators, chat, spent=gated.entry.id in state.spent)
        if reason is not None:
            records[index] = log_record(gated, Outcome.DECORATOR, reason)
            blocked.add(index)

    activated: dict[int, Trigger] = {}
    rendered: dict[int, str] = {}

    def consider(index: int, recursed: dict[int, int]) -> bool:
        """Try to activate one entry; records why not. True when it activates."""
        candidate = entries[index]
        if index in activated or index in blocked or not candidate.entry.enabled:
            return False
        rolled = True
        if candidate.entry.constant:
            trigger = Trigger(detail="constant entry")
        elif candidate.decorators.keep and candidate.entry.id in state.kept:
            trigger = Trigger(detail="@@keep: active since its first match")
            rolled = False  # already won its roll when it first matched
        else:
            evidence = entry_evidence(compiled, candidate, hits, recursed)
            if not evidence.matched:
                return False
            trigger = trigger_of(evidence, compiled, chat)
            if not evidence.secondary_ok:
                records[index] = log_record(
                    candidate,
                    Outcome.SECONDARY_FAILED,
                    f"{trigger.detail}; {evidence.detail}",
                    key=trigger.key,
                    message=trigger.message,
                    via_entry=trigger.via_entry,
                )
                return False
        if rolled and not probability_passes(candidate.probability, seed=seed, turn=turn, entry_id=candidate.entry.id):
            records[index] = log_record(
                candidate,
                Outcome.PROBABILITY,
                f"{trigger.detail}; {probability_detail(candidate.probability)}",
                key=trigger.key,
                message=trigger.message,
                via_entry=trigger.via_entry,
            )
            blocked.add(index)
            return False
        activated[index] = trigger
        rendered[index] = macros_apply(candidate.text, request.names)
        return True

    first_pass = set(compiled.always)
    first_pass.update(i for i in compiled.keepers if entries[i].entry.id in state.kept)
    first_pass.update(compiled.key_entry[key] for key in hits)
    no_recursion: dict[int, int] = {}
    for index in sorted(first_pass):
        consider(index, no_recursion)

    frontier = [i for i in activated if entries[i].book.settings.recursive]
    recursed: dict[int, int] = {}
    passes = 0
    while frontier and passes < CLASSIC.recursion_passes:
        passes += 1
        found = compiled.matcher.find_first([rendered[i] for i in frontier])
        new_keys = {key: frontier[text] for key, text in found.items() if key not in recursed}
        if not new_keys:
            frontier = []
            break
        recursed.update(new_keys)
        owners = sorted({compiled.key_entry[key] for key in new_keys})
        frontier = [i for i in owners if consider(i, recursed) and entries[i].book.settings.recursive]
    _explain_unrecursed(compiled, records, activated, rendered, frontier, full=request.log_full)

    budget = max(
        (book.settings.token_budget for book in request.books if book.settings.token_budget is not None),
        default=CLASSIC.default_token_budget,
    )
    tokens = entry_tokens(compiled, tokenizer, rendered, activated)
    total = sum(tokens.values())
    survival = sorted(activated, key=compiled.survival_rank.__getitem__)
    dropped: set[int] = set()
    activated_total = total
    for index in reversed(survival):
        if total <= budget:
            break
        dropped.add(index)
        total -= tokens[index]
        candidate = entries[index]
        trigger = activated[index]
        records[index] = log_record(
            candidate,
            Outcome.OVER_BUDGET,
            f"{trigger.detail}; {tokens[index]} tokens at priority {candidate.priority}: activated lore came to "
            f"{activated_total} tokens, over the {budget}-token budget, and lower priorities drop first",
            key=trigger.key,
            message=trigger.message,
            via_entry=trigger.via_entry,
        )

    placed = sorted((i for i in activated if i not in dropped), key=compiled.placement_rank.__getitem__)
    injections: list[Injection] = []
    for index in placed:
        candidate = entries[index]
        trigger = activated[index]
        injections.append(
            Injection(
                entry=candidate.entry.id,
                book=candidate.book.name,
                slot=SLOT,
                role=candidate.role,
                content=rendered[index],
                tokens=tokens[index],
            )
        )
        records[index] = log_record(
            candidate,
            Outcome.INJECTED,
            f"{trigger.detail}; {tokens[index]} tokens",
            key=trigger.key,
            message=trigger.message,
            via_entry=trigger.via_entry,
        )

    new_state = TimedState(
        kept=state.kept | {entries[i].entry.id for i in activated if entries[i].decorators.keep},
        spent=state.spent
        | {entries[i].entry.id for i in activated if entries[i].decorators.dont_activate_after_match},
    )
    request_log, unlisted = turn_log(compiled, records, full=request.log_full)
    return Selection(
        injections=tuple(injections),
        request_log=request_log,
        state=new_state,
        warnings=compiled.warnings,
        tokenizer=tokenizer.name,
        tokens_estimated=tokenizer.is_estimate,
        not_matched_unlisted=unlisted,
    )


def _explain_unrecursed(
    compiled: CompiledBookSet,
    records: dict[int, LogRecord],
    activated: dict[int, Trigger],
    rendered: dict[int, str],
    beyond_limit: list[int],
    *,
    full: bool,
) -> None:
    """Say so in the log when an unmatched entry's key sits in activated lore that was not rescanned.

    Two reasons: the entry holding the key belongs to a book with recursive
    scanning off (outcome stays ``not_matched``), or it was activated by the
    last allowed pass (outcome ``recursion``).
    """
    entries = compiled.entries
    sources = [(i, True) for i in beyond_limit]
    sources += [(i, False) for i in activated if not entries[i].book.settings.recursive]
    if not sources:
        return
    found = compiled.matcher.find_first([rendered[i] for i, _ in sources])
    # A compact log shows no not-matched entry and counts it either way: such an explanation is
    # built only for the full log (or when a regex key overran: then every record is listed).
    explain_not_matched = full or turn_overran()
    explained: set[int] = set()
    key_entry, key_primary = compiled.key_entry, compiled.key_primary
    # Keys of activated entries (most of them, when recursion floods a book) are dropped before
    # sorting: which source explains an entry depends on key order only among the rest.
    unexplained = sorted(
        (key, text) for key, text in found.items() if key_primary[key] and key_entry[key] not in activated
    )
    for key, text in unexplained:
        owner = key_entry[key]
        if compiled.quiet_records[owner].outcome != Outcome.NOT_MATCHED:
            continue
        if owner in records or owner in explained:
            continue  # the turn said something of it already (gated, secondary, probability, an earlier key)
        source, beyond = sources[text]
        source_entry = entries[source]
        key_text = compiled.key_text(key)
        if beyond:
            records[owner] = log_record(
                entries[owner],
                Outcome.RECURSION,
                f"key {key_text!r} is in the content of entry {source_entry.entry.id}, which the last of "
                f"{CLASSIC.recursion_passes} recursion passes activated; no further pass is made",
                key=key_text,
                via_entry=source_entry.entry.id,
            )
        elif not explain_not_matched:
            explained.add(owner)
        else:
            records[owner] = log_record(
                entries[owner],
                Outcome.NOT_MATCHED,
                f"key {key_text!r} is in the content of entry {source_entry.entry.id}, but book "
                f"{source_entry.book.name!r} has recursive scanning off",
                key=key_text,
                via_entry=source_entry.entry.id,
            )
