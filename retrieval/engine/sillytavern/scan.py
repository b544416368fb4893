"""The per-turn World Info scan: SillyTavern 1.18.0's ``checkWorldInfo``, pass for pass.

1.18.0 adds to 1.12.6: generation-type ``triggers``, ``ignoreBudget``, extra match
sources, the outlet position and the persona book; and changes three things
(a budget overflow is final for the whole scan, a dry run applies ``delay``, an
empty recursion text adds no recursion pass).

Two steps:

* ``compile_world_info`` sorts the entries as ``getSortedEntries`` does, substitutes
  macros in keys and content, resolves each key against its entry's settings
  and builds the key index. The result depends only on the books, settings and
  macro values, so callers cache it (``CompileCache``) by book version.
* ``scan_world_info`` runs one generation: timed effects, the scan passes
  (initial, recursion, min-activations, delayed recursion levels), inclusion
  groups, probability, the token budget, and prompt placement. Timed-effect
  state goes in and comes back as a value.
"""
from __future__ import annotations

import math
import random as random_module
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from .buffer import ScanBuffer
from .entries import (
    MAX_SCAN_DEPTH,
    CharacterIdentity,
    InsertionStrategy,
    MatchSource,
    SelectiveLogic,
    WorldInfoBooks,
    WorldInfoEntry,
    WorldInfoSettings,
)
from .groups import filter_by_inclusion_groups
from .jscompat import js_round, sort_by_order_descending, utf16_length
from .macros import MacroEnvironment, substitute_params
from .matching import KeyIndex, KeyKind, PreparedKey, match_key
from .placement import WorldInfoPrompt, place_entries
from .timed_effects import TimedEffectsRun, TimedEffectsState

TokenCounter = Callable[[str], int]
RandomSource = Callable[[], float]


def estimate_tokens(text: str) -> int:
    """The conformance oracle's token count: ``ceil(UTF-16 length / 4)``."""
    return math.ceil(utf16_length(text) / 4) if text else 0


class ScanState(IntEnum):
    NONE = 0
    INITIAL = 1
    RECURSION = 2
    MIN_ACTIVATIONS = 3


@dataclass(frozen=True, slots=True)
class CompiledEntry:
    entry: WorldInfoEntry
    index: int  # position in scan order
    primary: tuple[PreparedKey, ...]
    secondary: tuple[PreparedKey, ...]
    checks_secondary: bool
    logic: int
    force_activate: bool
    never_activate: bool
    substituted_content: str


@dataclass(frozen=True, kw_only=True)
class CompiledWorldInfo:
    """Entries in scan order with their keys resolved and indexed. Immutable; share freely."""

    settings: WorldInfoSettings
    macros: MacroEnvironment
    character: CharacterIdentity
    entries: tuple[CompiledEntry, ...]
    index: KeyIndex
    always_candidates: frozenset[int]
    entries_by_token: dict[int, tuple[int, ...]]
    deepest_entry_scan: int
    delay_levels: tuple[float, ...]
    by_key: dict[str, int]
    by_fingerprint: dict[str, int]
    entry_by_fingerprint: dict[str, WorldInfoEntry]
    sorted_entries: tuple[WorldInfoEntry, ...]
    delayed_entries: tuple[WorldInfoEntry, ...]
    scans_sources: bool = False
    """Whether any entry scans an extra source (otherwise sources are never indexed)."""


def sort_entries(books: WorldInfoBooks, strategy: int) -> list[WorldInfoEntry]:
    """``getSortedEntries``: chat lore, persona lore, then global/character lore per strategy, each by order desc."""

    def by_order(entries: Iterable[WorldInfoEntry]) -> list[WorldInfoEntry]:
        return sort_by_order_descending(list(entries), lambda entry: entry.order)

    if strategy == InsertionStrategy.CHARACTER_FIRST:
        rest = by_order(books.character_lore) + by_order(books.global_lore)
    elif strategy == InsertionStrategy.GLOBAL_FIRST:
        rest = by_order(books.global_lore) + by_order(books.character_lore)
    else:  # evenly, and SillyTavern's fallback for unknown strategies
        rest = by_order([*books.global_lore, *books.character_lore])
    return by_order(books.chat_lore) + by_order(books.persona_lore) + rest


def compile_world_info(
    books: WorldInfoBooks,
    *,
    settings: WorldInfoSettings,
    macros: MacroEnvironment,
    character: CharacterIdentity | None = None,
) -> CompiledWorldInfo:
    """Prepare a book set for scanning (sorting, macro substitution, key index)."""
    index = KeyIndex()
    compiled: list[CompiledEntry] = []
    substituted_keys: dict[str, str] = {}

    def substituted(key: str) -> str:
        value = substituted_keys.get(key)
        if value is None:
            value = substitute_params(key, macros)
            substituted_keys[key] = value
        return value

    for position, entry in enumerate(sort_entries(books, settings.character_strategy)):
        case_sensitive = entry.case_sensitive if entry.case_sensitive is not None else settings.case_sensitive
        whole_words = entry.match_whole_words if entry.match_whole_words is not None else settings.match_whole_words

        def prepare(keys: Sequence[str]) -> tuple[PreparedKey, ...]:
            return tuple(
                index.prepare(key, substituted(key), case_sensitive=case_sensitive, match_whole_words=whole_words)  # noqa: B023 - called in this iteration
                for key in keys
            )

        compiled.append(
            CompiledEntry(
                entry=entry,
                index=position,
                primary=prepare(entry.keys),
                secondary=prepare(entry.secondary_keys),
                checks_secondary=entry.selective and bool(entry.secondary_keys),
                logic=entry.selective_logic if entry.selective_logic is not None else SelectiveLogic.AND_ANY,
                force_activate="@@activate" in entry.decorators,
                never_activate=entry.disable,
                substituted_content=substitute_params(entry.content, macros),
            )
        )
    index.build()

    always: set[int] = set()
    by_token: dict[int, list[int]] = {}
    for item in compiled:
        if item.never_activate:
            continue
        if item.force_activate or item.entry.constant:
            always.add(item.index)
        for key in item.primary:
            if key.kind in (KeyKind.ALWAYS, KeyKind.DIRECT) or (key.kind == KeyKind.REGEX and key.token < 0):
                always.add(item.index)
            elif key.token >= 0:
                by_token.setdefault(key.token, []).append(item.index)
    levels = sorted({item.entry.delay_until_recursion for item in compiled if item.entry.delay_until_recursion})
    by_key: dict[str, int] = {}
    by_fingerprint: dict[str, int] = {}
    for item in compiled:
        by_key.setdefault(item.entry.key, item.index)
        by_fingerprint.setdefault(item.entry.fingerprint, item.index)
    return CompiledWorldInfo(
        settings=settings,
        macros=macros,
        character=character or CharacterIdentity(),
        entries=tuple(compiled),
        index=index,
        always_candidates=frozenset(always),
        entries_by_token={token: tuple(indexes) for token, indexes in by_token.items()},
        deepest_entry_scan=max((item.entry.scan_depth or 0 for item in compiled), default=0),
        delay_levels=tuple(levels),
        by_key=by_key,
        by_fingerprint=by_fingerprint,
        entry_by_fingerprint={fingerprint: compiled[index].entry for fingerprint, index in by_fingerprint.items()},
        sorted_entries=tuple(item.entry for item in compiled),
        delayed_entries=tuple(item.entry for item in compiled if item.entry.delay),
        scans_sources=any(item.entry.match_sources for item in compiled),
    )


class CompileCache:
    """A small LRU of compiled book sets, keyed by the caller's book-version key."""

    def __init__(self, max_size: int = 32) -> None:
        self.max_size = max_size
        self._items: OrderedDict[Hashable, CompiledWorldInfo] = OrderedDict()

    def get_or_compile(
        self,
        version_key: Hashable,
        books: WorldInfoBooks,
        *,
        settings: WorldInfoSettings,
        macros: MacroEnvironment,
        character: CharacterIdentity | None = None,
    ) -> CompiledWorldInfo:
        key = (version_key, settings, macros, character)
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
            return found
        compiled = compile_world_info(books, settings=settings, macros=macros, character=character)
        self._items[key] = compiled
        while len(self._items) > self.max_size:
            self._items.popitem(last=False)
        return compiled


@dataclass(frozen=True, kw_only=True)
class ScanRequest:
    """One generation.

    ``chat`` is what SillyTavern hands to ``checkWorldInfo``: newest message
    first, system messages left out, ``"Name: text"`` when names are included.
    ``scan_injections`` are the texts of extension prompts flagged for World
    Info scanning (e.g. the Author's Note with "allow WI scan"), macros
    substituted. ``authors_note`` is the note's text when it is inserted this
    generation, ``None`` when it is not. ``forced_activations`` holds
    ``"<world>.<uid>"`` keys activated from outside (e.g. vector search).
    ``trigger`` is the generation type (see ``generation_trigger``);
    ``character`` the active character for ``characterFilter`` (``None``: the
    compiled set's); ``sources`` the texts of the extra match sources.
    """

    chat: tuple[str, ...]
    max_context: int
    dry_run: bool = False
    scan_injections: tuple[str, ...] = ()
    authors_note: str | None = None
    forced_activations: frozenset[str] = field(default_factory=frozenset)
    trigger: str = "normal"
    character: CharacterIdentity | None = None
    sources: Mapping[MatchSource, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ScanDiagnostics:
    budget_tokens: int
    budget_overflow: bool
    scan_loops: int
    cut_by_budget: tuple[WorldInfoEntry, ...] = ()
    """Entries that matched but were stopped by the budget (the one that overflowed, and later ones)."""
    filtered: tuple[tuple[WorldInfoEntry, str], ...] = ()
    """Entries skipped before their keys were read, with why (trigger, character filter)."""


@dataclass(frozen=True, kw_only=True)
class ScanResult:
    activated: tuple[WorldInfoEntry, ...]
    """Activated entries in activation order (pass by pass; sticky first, then scan order)."""
    prompt: WorldInfoPrompt
    timed_effects: TimedEffectsState
    diagnostics: ScanDiagnostics


def scan_world_info(
    world: CompiledWorldInfo,
    request: ScanRequest,
    timed_effects: TimedEffectsState | None = None,
    *,
    random: RandomSource = random_module.random,
    count_tokens: TokenCounter = estimate_tokens,
) -> ScanResult:
    """Run SillyTavern's World Info activation for one generation."""
    return _Scan(world, request, timed_effects or TimedEffectsState(), random, count_tokens).run()


class _Scan:
    def __init__(
        self,
        world: CompiledWorldInfo,
        request: ScanRequest,
        timed_effects: TimedEffectsState,
        random: RandomSource,
        count_tokens: TokenCounter,
    ) -> None:
        self.world = world
        self.settings = world.settings
        self.request = request
        self.random = random
        self.count_tokens = count_tokens
        self.timed = TimedEffectsRun(
            chat_length=len(request.chat),
            entries=world.sorted_entries,
            state=timed_effects,
            dry_run=request.dry_run,
            by_fingerprint=world.entry_by_fingerprint,
            delayed=world.delayed_entries,
        )
        budget = js_round(self.settings.budget * request.max_context / 100) or 1
        if self.settings.budget_cap > 0 and budget > self.settings.budget_cap:
            budget = self.settings.budget_cap
        self.budget = budget
        self.buffer = ScanBuffer(
            world.index, request.chat, request.scan_injections, self.settings.depth,
            request.sources if world.scans_sources else None,
        )
        self.character = request.character if request.character is not None else world.character
        self.filtered: dict[int, str] = {}
        self.state = ScanState.INITIAL
        levels = list(world.delay_levels)
        # The first delayUntilRecursion level is preset; later ones each get a pass once nothing is pending.
        self.current_level: float = levels.pop(0) if levels else 0
        self.pending_levels = levels
        self.forced = {world.by_key[key] for key in request.forced_activations if key in world.by_key}
        self.content: dict[int, str] = {}  # content after substitution, per entry index (mutated in place by ST)
        self.regex_results: dict[tuple[int, int], bool] = {}

    # --- key matching -----------------------------------------------------

    def _depth_of(self, entry: WorldInfoEntry) -> int:
        return entry.scan_depth if entry.scan_depth is not None else self.buffer.depth

    def _key_matches(
        self, key: PreparedKey, depth: int, with_recursion: bool, sources: tuple[MatchSource, ...] = ()
    ) -> bool:
        if sources and self.buffer.sources:
            return self._key_matches_with_sources(key, depth, with_recursion, sources)
        kind = key.kind
        if kind == KeyKind.PLAIN:
            return depth > 0 and self.buffer.token_present(key.token, key.whole_word, depth, with_recursion)
        if kind == KeyKind.NEVER:
            return False
        if kind == KeyKind.ALWAYS:
            return True
        if kind == KeyKind.REGEX:
            assert key.regex is not None
            if depth > 0 and key.token >= 0 and not self.buffer.token_present(key.token, False, depth, with_recursion):
                return False
            view = self.buffer.view(depth, with_recursion)
            cache_key = (id(key.regex), id(view))
            result = self.regex_results.get(cache_key)
            if result is None:
                start = self.buffer.region_start(key.token, depth, with_recursion) if key.token >= 0 else 0
                result = key.regex.test_view(view, start)
                self.regex_results[cache_key] = result
            return result
        return match_key(
            self.buffer.text(depth, with_recursion),
            key.text,
            case_sensitive=key.case_sensitive,
            whole_words=key.match_whole_words,
        )

    def _key_matches_with_sources(
        self, key: PreparedKey, depth: int, with_recursion: bool, sources: tuple[MatchSource, ...]
    ) -> bool:
        """As ``_key_matches`` for an entry that also scans extra sources (rare: no offset shortcuts)."""
        kind = key.kind
        if kind == KeyKind.NEVER:
            return False
        if kind == KeyKind.ALWAYS:
            return True
        buffer = self.buffer
        if kind == KeyKind.PLAIN:
            return depth > 0 and (
                buffer.token_present(key.token, key.whole_word, depth, with_recursion)
                or buffer.token_in_sources(key.token, key.whole_word, sources)
            )
        if kind == KeyKind.REGEX:
            assert key.regex is not None
            if depth > 0 and key.token >= 0 and not (
                buffer.token_present(key.token, False, depth, with_recursion)
                or buffer.token_in_sources(key.token, False, sources)
            ):
                return False
            view = buffer.view(depth, with_recursion, sources)
            cache_key = (id(key.regex), id(view))
            result = self.regex_results.get(cache_key)
            if result is None:
                result = key.regex.test_view(view, 0)
                self.regex_results[cache_key] = result
            return result
        return match_key(
            buffer.text(depth, with_recursion, sources),
            key.text,
            case_sensitive=key.case_sensitive,
            whole_words=key.match_whole_words,
        )

    def _keys_activate(self, compiled: CompiledEntry) -> bool:
        depth = self._depth_of(compiled.entry)
        with_recursion = self.state != ScanState.MIN_ACTIVATIONS
        sources = compiled.entry.match_sources
        if sources:
            return self._keys_activate_with_sources(compiled, depth, with_recursion, sources)
        if not any(self._key_matches(key, depth, with_recursion) for key in compiled.primary):
            return False
        if not compiled.checks_secondary:
            return True
        logic = compiled.logic
        any_match, all_match = False, True
        for key in compiled.secondary:
            matched = self._key_matches(key, depth, with_recursion)
            any_match = any_match or matched
            all_match = all_match and matched
            if logic == SelectiveLogic.AND_ANY and matched:
                return True
            if logic == SelectiveLogic.NOT_ALL and not matched:
                return True
        if logic == SelectiveLogic.NOT_ANY and not any_match:
            return True
        return logic == SelectiveLogic.AND_ALL and all_match

    def _keys_activate_with_sources(
        self, compiled: CompiledEntry, depth: int, with_recursion: bool, sources: tuple[MatchSource, ...]
    ) -> bool:
        def matches(key: PreparedKey) -> bool:
            return self._key_matches(key, depth, with_recursion, sources)

        if not any(matches(key) for key in compiled.primary):
            return False
        if not compiled.checks_secondary:
            return True
        logic = compiled.logic
        any_match, all_match = False, True
        for key in compiled.secondary:
            matched = matches(key)
            any_match = any_match or matched
            all_match = all_match and matched
            if logic == SelectiveLogic.AND_ANY and matched:
                return True
            if logic == SelectiveLogic.NOT_ALL and not matched:
                return True
        if logic == SelectiveLogic.NOT_ANY and not any_match:
            return True
        return logic == SelectiveLogic.AND_ALL and all_match

    def _group_score(self, index: int) -> int:
        """``getScore``: raw keys (no macros, no trim) counted on the entry's text."""
        entry = self.world.entries[index].entry
        text = self.buffer.text(self._depth_of(entry), self.state != ScanState.MIN_ACTIVATIONS, entry.match_sources)
        case_sensitive = entry.case_sensitive if entry.case_sensitive is not None else self.settings.case_sensitive
        whole_words = (
            entry.match_whole_words if entry.match_whole_words is not None else self.settings.match_whole_words
        )

        def count(keys: Sequence[str]) -> int:
            return sum(match_key(text, key, case_sensitive=case_sensitive, whole_words=whole_words) for key in keys)

        if not entry.keys:
            return 0
        primary = count(entry.keys)
        secondary = count(entry.secondary_keys)
        if entry.secondary_keys:
            if entry.selective_logic == SelectiveLogic.AND_ANY:
                return primary + secondary
            if entry.selective_logic == SelectiveLogic.AND_ALL:
                return primary + secondary if secondary == len(entry.secondary_keys) else primary
        return primary

    # --- the pass loop ----------------------------------------------------------

    def _passes_filters(self, compiled: CompiledEntry) -> bool | None:
        """The per-entry checks before keys: False to skip, True to activate, None to test keys."""
        entry = compiled.entry
        if compiled.never_activate:
            return False
        if entry.triggers is not None and self.request.trigger not in entry.triggers:
            self.filtered[compiled.index] = f"not for generation type {self.request.trigger}"
            return False
        character_filter = entry.character_filter
        if character_filter is not None:
            if character_filter.names:
                included = self.character.file_name in character_filter.names
                if included == character_filter.is_exclude:
                    self.filtered[compiled.index] = "filtered out by character"
                    return False
            tags = self.character.tags
            if character_filter.tags and tags is not None:
                included = any(tag in character_filter.tags for tag in tags)
                if included == character_filter.is_exclude:
                    self.filtered[compiled.index] = "filtered out by character tags"
                    return False
        sticky = self.timed.is_active("sticky", entry)
        if self.timed.is_active("delay", entry):
            return False
        if self.timed.is_active("cooldown", entry) and not sticky:
            return False
        delay_level = entry.delay_until_recursion
        if self.state != ScanState.RECURSION and delay_level and not sticky:
            return False
        if self.state == ScanState.RECURSION and delay_level and delay_level > self.current_level and not sticky:
            return False
        if self.state == ScanState.RECURSION and self.settings.recursive and entry.exclude_recursion and not sticky:
            return False
        if compiled.force_activate:
            return True
        if "@@dont_activate" in entry.decorators:
            return False
        if entry.constant or sticky or compiled.index in self.forced:
            return True
        if not entry.keys:
            return False
        return None

    def _content_of(self, index: int) -> str:
        return self.content.get(index, self.world.entries[index].entry.content)

    def _substitute_content(self, index: int) -> str:
        if index in self.content:
            text = substitute_params(self.content[index], self.world.macros)
        else:
            text = self.world.entries[index].substituted_content
        self.content[index] = text
        return text

    def run(self) -> ScanResult:
        world, settings = self.world, self.settings
        self.timed.check()  # a dry run applies only delay
        if not world.entries:
            return ScanResult(
                activated=(),
                prompt=WorldInfoPrompt(authors_note=self.request.authors_note),
                timed_effects=self.timed.state(),
                diagnostics=ScanDiagnostics(budget_tokens=int(self.budget), budget_overflow=False, scan_loops=0),
            )
        levels = self.pending_levels
        candidates: set[int] = set(world.always_candidates)
        candidates.update(self._entries_for(self.buffer.initial_tokens()))
        candidates.update(self.forced)
        if self.buffer.sources:
            candidates.update(self._entries_for(self.buffer.source_tokens()))
        for fingerprint in self.timed.active_fingerprints("sticky"):
            candidates.add(world.by_fingerprint[fingerprint])

        activated: list[int] = []
        activated_set: set[int] = set()
        failed_probability: set[int] = set()
        all_activated_text = ""
        overflow = False
        cut: list[int] = []
        count = 0

        while self.state != ScanState.NONE:
            if settings.max_recursion_steps and settings.max_recursion_steps <= count:
                break
            count += 1
            next_state = ScanState.NONE
            deepest = max(self.buffer.depth, world.deepest_entry_scan)
            candidates.update(self._entries_for(self.buffer.ensure_chat(min(deepest, MAX_SCAN_DEPTH))))

            activated_now: list[int] = []
            for index in sorted(candidates):
                if index in activated_set or index in failed_probability:
                    continue
                compiled = world.entries[index]
                verdict = self._passes_filters(compiled)
                if verdict is None:
                    verdict = self._keys_activate(compiled)
                if verdict:
                    activated_now.append(index)

            # Sticky entries first, then scan order.
            new_entries = sorted(
                activated_now, key=lambda i: (not self.timed.is_active("sticky", world.entries[i].entry), i)
            )
            text_tokens = self.count_tokens(all_activated_text)
            filter_by_inclusion_groups(
                new_entries,
                entry_of=lambda i: world.entries[i].entry,
                activated_groups={world.entries[i].entry.group for i in activated},
                is_active=self.timed.is_active,
                score=self._group_score,
                use_group_scoring=settings.use_group_scoring,
                random=self.random,
            )

            new_content = ""
            # After an overflow only ignoreBudget entries may still activate, in this pass and every later one.
            ignoring_budget = sum(1 for index in new_entries if world.entries[index].entry.ignore_budget)
            for position, index in enumerate(new_entries):
                entry = world.entries[index].entry
                if entry.ignore_budget:
                    ignoring_budget -= 1
                elif overflow:
                    if ignoring_budget > 0:
                        cut.append(index)
                        continue
                    cut.extend(new_entries[position:])
                    break
                if entry.use_probability and entry.probability != 100 and not self.timed.is_active("sticky", entry):
                    if not self.random() * 100 <= entry.probability:
                        failed_probability.add(index)
                        continue
                new_content += self._substitute_content(index) + "\n"
                if not entry.ignore_budget and text_tokens + self.count_tokens(new_content) >= self.budget:
                    overflow = True
                    cut.append(index)
                    continue
                activated.append(index)
                activated_set.add(index)

            successful = [index for index in new_entries if index not in failed_probability]
            # Quirk: entries after an overflow never activated, yet still feed recursion.
            for_recursion = [index for index in successful if not world.entries[index].entry.prevent_recursion]

            if settings.recursive and not overflow and for_recursion:
                next_state = ScanState.RECURSION
            if (
                settings.recursive and not overflow and self.state == ScanState.MIN_ACTIVATIONS
                and self.buffer.recursion
            ):
                next_state = ScanState.RECURSION
            if (
                next_state == ScanState.NONE and not overflow and settings.min_activations > 0
                and len(activated) < settings.min_activations
            ):
                depth = self.buffer.depth
                over_max = (
                    settings.min_activations_depth_max > 0 and depth > settings.min_activations_depth_max
                ) or depth > len(self.request.chat)
                if not over_max:
                    next_state = ScanState.MIN_ACTIVATIONS
                    self.buffer.skew += 1
            if next_state == ScanState.NONE and levels:
                # Quirk: delayed levels get their pass even with recursion off or after an overflow.
                next_state = ScanState.RECURSION
                self.current_level = levels.pop(0)

            self.state = next_state
            if self.state != ScanState.NONE:
                text = "\n".join(self._content_of(index) for index in for_recursion)
                if text:  # 1.13+: an empty text adds nothing (and so forces no recursion pass)
                    candidates.update(self._entries_for(self.buffer.add_recursion(text)))
                    all_activated_text = text + "\n" + all_activated_text

        activated_entries = [world.entries[index].entry for index in activated]
        prompt = place_entries(
            [(world.entries[index].entry, self._content_of(index)) for index in activated],
            authors_note=self.request.authors_note,
        )
        self.timed.record(activated_entries)
        return ScanResult(
            activated=tuple(activated_entries),
            prompt=prompt,
            timed_effects=self.timed.state(),
            diagnostics=ScanDiagnostics(
                budget_tokens=int(self.budget),
                budget_overflow=overflow,
                scan_loops=count,
                cut_by_budget=tuple(
                    world.entries[index].entry for index in dict.fromkeys(cut) if index not in activated_set
                ),
                filtered=tuple((world.entries[index].entry, why) for index, why in sorted(self.filtered.items())),
            ),
        )

    def _entries_for(self, tokens: Iterable[int]) -> set[int]:
        found: set[int] = set()
        by_token = self.world.entries_by_token
        for token in tokens:
            found.update(by_token.get(token, ()))
        return found
