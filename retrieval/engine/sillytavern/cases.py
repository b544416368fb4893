"""Run a SillyTavern-native case (the conformance format) through the engine.

The case format is described in ``shared/conformance/sillytavern/README.md``
(1.12.6) and ``shared/conformance/sillytavern-1.13/README.md`` (1.13+ fields):
settings, books (chat, persona, character, global), a chat (or turns of
chats), the Author's Note / extension prompts, the character card's fields and
tags, and each turn's generation type and quiet prompt. This module builds what SillyTavern's ``Generate()`` hands to
``checkWorldInfo`` for each turn, carries timed effects from turn to turn,
and reports each turn in the shape of the ``*.expected.json`` files.
"""
from __future__ import annotations

import copy
import random as random_module
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .entries import (
    MATCH_SOURCE_FLAGS,
    CharacterIdentity,
    MatchSource,
    WorldInfoBooks,
    WorldInfoSettings,
    book_from_st_json,
    generation_trigger,
    settings_from_st_json,
    settings_to_st_json,
)
from .jscompat import is_truthy, json_value, object_key_order, to_js_string
from .macros import MacroEnvironment, substitute_params
from .scan import CompileCache, CompiledWorldInfo, ScanRequest, ScanResult, scan_world_info
from .timed_effects import TimedEffectsState

AUTHORS_NOTE_PROMPT = "2_floating_prompt"  # SillyTavern's NOTE_MODULE_NAME
ROLE_NAMES = {0: "system", 1: "user", 2: "assistant"}
BOOKS = (
    ("chat", "chat_entries"), ("persona", "persona_entries"), ("character", "character_entries"), ("global", "entries")
)
QUIET_PROMPT = "QUIET_PROMPT"  # SillyTavern's inject_ids.QUIET_PROMPT, an extension prompt with scan on
# The case's card field behind each extra match source, and the macro it also fills.
SOURCE_FIELDS: dict[MatchSource, tuple[str, str]] = {
    MatchSource.PERSONA_DESCRIPTION: ("persona_description", "persona"),
    MatchSource.CHARACTER_DESCRIPTION: ("character_description", "description"),
    MatchSource.CHARACTER_PERSONALITY: ("character_personality", "personality"),
    MatchSource.CHARACTER_DEPTH_PROMPT: ("character_depth_prompt", "charDepthPrompt"),
    MatchSource.SCENARIO: ("scenario", "scenario"),
    MatchSource.CREATOR_NOTES: ("creator_notes", "creatorNotes"),
}
assert set(SOURCE_FIELDS) == {source for source, _ in MATCH_SOURCE_FLAGS}

_CACHE = CompileCache(max_size=16)


def chat_for_world_info(
    messages: Sequence[Any], *, include_names: bool, user_name: str, swipe: bool = False
) -> tuple[str, ...]:
    """What ``Generate()`` passes to ``checkWorldInfo``: no system messages, optional names, newest first.

    A swipe regenerates the last message, so that message is not scanned.
    """
    kept: list[Mapping[str, Any]] = []
    for message in messages:
        if isinstance(message, str):
            message = {"name": user_name, "is_user": True, "mes": message}
        if not is_truthy(message.get("is_system")):
            kept.append(message)
    if swipe and kept:
        kept.pop()
    lines: list[str] = []
    for message in kept:
        if include_names:
            name, text = message.get("name", "undefined"), message.get("mes", "undefined")
            lines.append(f"{to_js_string(name)}: {to_js_string(text)}")
        else:
            text = message.get("mes")
            lines.append(to_js_string(text) if text else "")  # a falsy message is a hole either way
    return tuple(reversed(lines))


def scan_injections(
    case: Mapping[str, Any], macros: MacroEnvironment, *, quiet_prompt: str = ""
) -> tuple[str, ...]:
    """Extension prompts flagged for scanning, in ``Object.keys`` order (the Author's Note first).

    ``Generate()`` sets the quiet prompt as one more scanned extension prompt
    (empty, so absent from the text, unless the turn has one).
    """
    prompts: dict[str, tuple[str, bool]] = {
        AUTHORS_NOTE_PROMPT: (str(case.get("authors_note", "") or ""), is_truthy(case.get("authors_note_scan", False)))
    }
    for name, prompt in (case.get("extension_prompts") or {}).items():
        prompts[str(name)] = (str(prompt.get("value", "") or ""), is_truthy(prompt.get("scan", False)))
    if quiet_prompt or QUIET_PROMPT in prompts:
        prompts[QUIET_PROMPT] = (quiet_prompt, True)
    texts = []
    for name in object_key_order(prompts):
        value, scan = prompts[name]
        if scan:
            text = substitute_params(value, macros)  # getExtensionPromptByName substitutes macros
            if text:
                texts.append(text)
    return tuple(texts)


class CaseRunner:
    """Holds one case's books and timed-effect state across its turns."""

    def __init__(self, case: Mapping[str, Any], *, cache: CompileCache | None = None) -> None:
        self.case = case
        self.settings: WorldInfoSettings = settings_from_st_json(case.get("settings") or {})
        self.sources = {source: str(case.get(field) or "") for source, (field, _) in SOURCE_FIELDS.items()}
        self.macros = MacroEnvironment(
            user=str(case.get("user_name", "User")),
            char=str(case.get("char_name", "Char")),
            card_fields=tuple((macro, self.sources[source]) for source, (_, macro) in SOURCE_FIELDS.items()),
        )
        # The oracle's character is "char.png"; SillyTavern gives every character a tag list, empty by default.
        self.character = CharacterIdentity(
            file_name="char", tags=tuple(str(tag) for tag in case.get("char_tags") or ())
        )
        self.raw_books: dict[str, list[dict[str, Any]]] = {
            world: copy.deepcopy(list(case.get(field) or [])) for world, field in BOOKS
        }
        self.cache = cache or _CACHE
        self.timed_effects = TimedEffectsState()
        self._compiled: CompiledWorldInfo | None = None
        self._compiled_key: tuple[str, ...] | None = None

    def books(self) -> WorldInfoBooks:
        chat, persona, character, global_ = (
            book_from_st_json(self.raw_books[world], world=world) for world, _ in BOOKS
        )
        return WorldInfoBooks(chat_lore=chat, persona_lore=persona, character_lore=character, global_lore=global_)

    def apply_updates(self, updates: Sequence[Mapping[str, Any]]) -> None:
        for update in updates:
            book = self.raw_books[str(update.get("book", "global"))]
            for entry in book:
                if entry.get("uid") == update.get("uid"):
                    entry.update(copy.deepcopy(dict(update.get("set") or {})))
        if updates:
            self._compiled = None

    def compiled(self) -> CompiledWorldInfo:
        if self._compiled is None:
            books = self.books()
            version = tuple(
                entry.fingerprint
                for book in (books.chat_lore, books.persona_lore, books.character_lore, books.global_lore)
                for entry in book
            )
            self._compiled = self.cache.get_or_compile(
                version, books, settings=self.settings, macros=self.macros, character=self.character
            )
        return self._compiled

    def run_turn(self, turn: Mapping[str, Any], *, random: Callable[[], float] = random_module.random) -> dict[str, Any]:
        self.apply_updates(turn.get("entry_updates") or [])
        trigger = generation_trigger(turn.get("generation_type", self.case.get("generation_type", "normal")))
        chat = chat_for_world_info(
            turn.get("chat") or [], include_names=self.settings.include_names, user_name=self.macros.user,
            swipe=trigger == "swipe",
        )
        authors_note_due = is_truthy(self.case.get("authors_note_active", True))
        request = ScanRequest(
            chat=chat,
            max_context=int(self.case.get("max_context", 4096)),
            dry_run=is_truthy(turn.get("dry_run", False)),
            scan_injections=scan_injections(self.case, self.macros, quiet_prompt=str(turn.get("quiet_prompt") or "")),
            authors_note=str(self.case.get("authors_note", "") or "") if authors_note_due else None,
            trigger=trigger,
            character=self.character,
            sources=self.sources,
        )
        result = scan_world_info(self.compiled(), request, self.timed_effects, random=random)
        self.timed_effects = result.timed_effects
        return turn_report(chat, result, trigger=trigger)


def turn_report(chat: Sequence[str], result: ScanResult, *, trigger: str = "normal") -> dict[str, Any]:
    """One turn in the ``*.expected.json`` shape."""
    prompt = result.prompt
    return {
        "generation_type": trigger,
        "scan_chat": list(chat),
        "activated_uids": [entry.uid for entry in result.activated],
        "before": {"uids": [placed.uid for placed in prompt.before], "text": prompt.before_text},
        "after": {"uids": [placed.uid for placed in prompt.after], "text": prompt.after_text},
        "an_top": {"uids": [placed.uid for placed in prompt.an_top]},
        "an_bottom": {"uids": [placed.uid for placed in prompt.an_bottom]},
        "authors_note_text": prompt.authors_note,
        "em": [
            {"position": example.position, "uid": example.entry.uid, "content": example.entry.content}
            for example in prompt.examples
        ],
        "depth": [
            {
                "depth": group.depth,
                "role": ROLE_NAMES.get(group.role, group.role),
                "uids": [placed.uid for placed in group.entries],
                "entries": [placed.content for placed in group.entries],
            }
            for group in prompt.depth
        ],
        "outlets": {
            name: {"uids": [placed.uid for placed in entries], "entries": [placed.content for placed in entries]}
            for name, entries in prompt.outlets
        },
        "timed_effects_after": json_value(result.timed_effects.to_json(with_hash=False)),
        "diagnostics": {
            "budget_tokens": result.diagnostics.budget_tokens,
            "budget_overflow": result.diagnostics.budget_overflow,
            "scan_loops": result.diagnostics.scan_loops,
        },
    }


def run_case(case: Mapping[str, Any], *, random: Callable[[], float] = random_module.random) -> dict[str, Any]:
    """Run every turn of a SillyTavern-native case; returns ``{"turns": [...]}`` like ``*.expected.json``."""
    runner = CaseRunner(case)
    turns = case.get("turns")
    if not turns:
        turns = [{"chat": case.get("chat") or []}]
    return {
        "name": case.get("name"),
        "effective_settings": settings_to_st_json(runner.settings),
        "max_context": case.get("max_context"),
        "turns": [runner.run_turn(turn, random=random) for turn in turns],
    }
