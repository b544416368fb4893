"""World Info values: entries, settings, books, and their SillyTavern JSON forms.

The engine works on frozen dataclasses. ``entry_from_st_json`` and
``settings_from_st_json`` read SillyTavern's own shapes with JavaScript's
rules for missing, ``null`` and loosely typed fields, because SillyTavern reads
them that way (``selective`` missing means false, ``order`` missing sorts as
``NaN``, ``disable`` uses ``== true``...).
"""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from .jscompat import is_truthy, loosely_equals_true, number_or_int, object_key_order, to_js_string, to_number

_MISSING = object()


class Position(IntEnum):
    BEFORE = 0
    AFTER = 1
    AN_TOP = 2
    AN_BOTTOM = 3
    AT_DEPTH = 4
    EM_TOP = 5
    EM_BOTTOM = 6
    OUTLET = 7  # 1.13+: content goes to a named outlet, read by the {{outlet::name}} macro


class SelectiveLogic(IntEnum):
    AND_ANY = 0
    NOT_ALL = 1
    NOT_ANY = 2
    AND_ALL = 3


class Role(IntEnum):
    SYSTEM = 0
    USER = 1
    ASSISTANT = 2


class InsertionStrategy(IntEnum):
    EVENLY = 0
    CHARACTER_FIRST = 1
    GLOBAL_FIRST = 2


DEFAULT_DEPTH = 4
DEFAULT_GROUP_WEIGHT = 100
MAX_SCAN_DEPTH = 1000
KNOWN_DECORATORS = ("@@activate", "@@dont_activate")
# SillyTavern's GENERATION_TYPE_TRIGGERS: any other generation type scans as "normal".
GENERATION_TYPES = ("normal", "continue", "impersonate", "swipe", "regenerate", "quiet")


class MatchSource(IntEnum):
    """Texts besides the chat an entry may also scan (1.13+ ``match*`` flags), in buffer order."""

    PERSONA_DESCRIPTION = 0
    CHARACTER_DESCRIPTION = 1
    CHARACTER_PERSONALITY = 2
    CHARACTER_DEPTH_PROMPT = 3
    SCENARIO = 4
    CREATOR_NOTES = 5


# The entry flag of each source, in the order ``WorldInfoBuffer.get`` appends them.
MATCH_SOURCE_FLAGS: tuple[tuple[MatchSource, str], ...] = (
    (MatchSource.PERSONA_DESCRIPTION, "matchPersonaDescription"),
    (MatchSource.CHARACTER_DESCRIPTION, "matchCharacterDescription"),
    (MatchSource.CHARACTER_PERSONALITY, "matchCharacterPersonality"),
    (MatchSource.CHARACTER_DEPTH_PROMPT, "matchCharacterDepthPrompt"),
    (MatchSource.SCENARIO, "matchScenario"),
    (MatchSource.CREATOR_NOTES, "matchCreatorNotes"),
)


def generation_trigger(generation_type: str | None) -> str:
    """The trigger ``Generate()`` scans with: the type when SillyTavern knows it, else ``normal``."""
    return generation_type if generation_type in GENERATION_TYPES else "normal"


@dataclass(frozen=True, kw_only=True)
class CharacterFilter:
    """Limit an entry to (or away from) characters by file name or tag."""

    names: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    is_exclude: bool = False


@dataclass(frozen=True, kw_only=True)
class WorldInfoEntry:
    """One World Info entry, with SillyTavern's field semantics.

    ``content`` has its leading ``@@`` decorator lines removed (they are in
    ``decorators``). ``order`` is ``NaN`` when the field was missing;
    ``position``/``depth``/``role``/``selective_logic`` are ``None`` when
    missing or not a number. ``sticky``/``cooldown``/``delay`` are 0 when off.
    ``fingerprint`` identifies this exact version of the entry: timed effects
    are tied to it, so editing any field detaches them (SillyTavern's hash).
    """

    uid: int | str | None
    world: str
    keys: tuple[str, ...] = ()
    secondary_keys: tuple[str, ...] = ()
    comment: str = ""
    content: str = ""
    decorators: tuple[str, ...] = ()
    constant: bool = False
    selective: bool = True
    selective_logic: int | None = SelectiveLogic.AND_ANY
    order: float = 100
    position: int | None = Position.BEFORE
    disable: bool = False
    exclude_recursion: bool = False
    prevent_recursion: bool = False
    delay_until_recursion: float = 0
    probability: float = 100
    use_probability: bool = True
    depth: int | None = DEFAULT_DEPTH
    group: str = ""
    group_override: bool = False
    group_weight: float = DEFAULT_GROUP_WEIGHT
    scan_depth: int | None = None
    case_sensitive: bool | None = None
    match_whole_words: bool | None = None
    use_group_scoring: bool | None = None
    role: int | None = Role.SYSTEM
    sticky: float = 0
    cooldown: float = 0
    delay: float = 0
    character_filter: CharacterFilter | None = None
    ignore_budget: bool = False
    triggers: tuple[str, ...] | None = None
    """Generation types the entry may activate in; ``None`` (or empty in the file) means all.
    Compared exactly: only string items can ever match."""
    match_sources: tuple[MatchSource, ...] = ()
    outlet_name: str = ""
    fingerprint: str = ""

    def __post_init__(self) -> None:
        if not self.fingerprint:
            digest = hashlib.blake2b(repr(self).encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
            object.__setattr__(self, "fingerprint", digest)

    @property
    def key(self) -> str:
        """``"<world>.<uid>"``, the key of its timed effects."""
        return f"{self.world}.{'undefined' if self.uid is None else self.uid}"


@dataclass(frozen=True, kw_only=True)
class WorldInfoSettings:
    """The 13 ``world_info_*`` settings, as ``setWorldInfoSettings`` holds them."""

    depth: int = 2
    min_activations: int = 0
    min_activations_depth_max: int = 0
    budget: float = 25
    include_names: bool = True
    recursive: bool = False
    overflow_alert: bool = False
    case_sensitive: bool = False
    match_whole_words: bool = False
    character_strategy: int = InsertionStrategy.CHARACTER_FIRST
    budget_cap: float = 0
    use_group_scoring: bool = False
    max_recursion_steps: int = 0


@dataclass(frozen=True, kw_only=True)
class WorldInfoBooks:
    """The entries in play for one chat, by source: chat-bound, persona (1.13+), character, global."""

    chat_lore: tuple[WorldInfoEntry, ...] = ()
    persona_lore: tuple[WorldInfoEntry, ...] = ()
    character_lore: tuple[WorldInfoEntry, ...] = ()
    global_lore: tuple[WorldInfoEntry, ...] = ()


@dataclass(frozen=True, kw_only=True)
class CharacterIdentity:
    """Who is speaking, for ``characterFilter``: the avatar file name without extension, and tags.

    ``tags`` is ``None`` when the character has no tag list, in which case tag
    filters do not apply (as in SillyTavern).
    """

    file_name: str = ""
    tags: tuple[str, ...] | None = None


def split_decorators(content: str) -> tuple[tuple[str, ...], str]:
    """SillyTavern's ``parseDecorators``: leading ``@@`` lines are removed, known ones kept.

    Quirk: when every line is a decorator, the content is left unchanged.
    """
    if not content.startswith("@@"):
        return (), content
    lines = content.split("\n")
    decorators: list[str] = []
    fallback = False
    rest = content
    for index, line in enumerate(lines):
        if not line.startswith("@@"):
            rest = "\n".join(lines[index:])
            break
        if line.startswith("@@@") and not fallback:
            continue
        candidate = line[1:] if line.startswith("@@@") else line
        if any(candidate.startswith(known) for known in KNOWN_DECORATORS):
            decorators.append(candidate)
            fallback = False
        else:
            fallback = True
    return tuple(decorators), rest


def _optional_int(value: object) -> int | None:
    if value is None or value is _MISSING or isinstance(value, (bool, str, list, dict)):
        return None
    number = to_number(value)
    return int(number) if math.isfinite(number) and number == int(number) else None


def _number(value: object, *, missing: float) -> float:
    if value is _MISSING:
        return missing
    return number_or_int(to_number(value))


def _strings(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(item if isinstance(item, str) else json.dumps(item) for item in value)


def _optional_flag(value: object) -> bool | None:
    return None if value is None or value is _MISSING else is_truthy(value)


def _timed(value: object) -> float:
    return number_or_int(to_number(value)) if is_truthy(value) else 0


def entry_fingerprint(data: Mapping[str, Any], *, world: str, decorators: Iterable[str], content: str) -> str:
    """A stable digest of the entry as SillyTavern hashes it (uid, world, fields, decorators)."""
    record: dict[str, Any] = {"uid": data.get("uid"), "world": world}
    record.update((key, value) for key, value in data.items() if key != "uid")
    record["content"] = content
    record["decorators"] = list(decorators)
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def entry_from_st_json(data: Mapping[str, Any], *, world: str) -> WorldInfoEntry:
    """Read a SillyTavern World Info entry (``entries["<uid>"]`` of a lorebook file)."""

    def get(name: str) -> object:
        return data.get(name, _MISSING)

    raw_content = data.get("content")
    decorators, content = split_decorators(raw_content if isinstance(raw_content, str) and raw_content else "")
    selective_logic = get("selectiveLogic")
    character_filter = None
    raw_filter = data.get("characterFilter")
    if isinstance(raw_filter, Mapping):
        character_filter = CharacterFilter(
            names=_strings(raw_filter.get("names")),
            tags=_strings(raw_filter.get("tags")),
            is_exclude=is_truthy(raw_filter.get("isExclude")),
        )
    delay_until_recursion = get("delayUntilRecursion")
    raw_triggers = data.get("triggers")
    triggers = (
        tuple(item for item in raw_triggers if isinstance(item, str))
        if isinstance(raw_triggers, list) and raw_triggers else None
    )
    outlet_name = data.get("outletName")
    group = data.get("group")
    uid = data.get("uid")
    return WorldInfoEntry(
        uid=uid if isinstance(uid, (int, str)) and not isinstance(uid, bool) else None,
        world=world,
        keys=_strings(get("key")),
        secondary_keys=_strings(get("keysecondary")),
        comment=str(data.get("comment") or ""),
        content=content,
        decorators=decorators,
        constant=is_truthy(data.get("constant")),
        selective=is_truthy(data.get("selective")),
        selective_logic=(
            None if selective_logic in (None, _MISSING)
            else (_optional_int(selective_logic) if _optional_int(selective_logic) is not None else -1)
        ),
        order=_number(get("order"), missing=math.nan),
        position=_optional_int(get("position")),
        disable=loosely_equals_true(data.get("disable")),
        exclude_recursion=is_truthy(data.get("excludeRecursion")),
        prevent_recursion=is_truthy(data.get("preventRecursion")),
        delay_until_recursion=(
            1 if delay_until_recursion is True
            else (_number(delay_until_recursion, missing=0) if is_truthy(delay_until_recursion) else 0)
        ),
        probability=_number(get("probability"), missing=math.nan),
        use_probability=is_truthy(data.get("useProbability")),
        depth=_optional_int(get("depth")),
        group=group if isinstance(group, str) else "",
        group_override=is_truthy(data.get("groupOverride")),
        group_weight=(
            DEFAULT_GROUP_WEIGHT if data.get("groupWeight") is None
            else _number(data.get("groupWeight"), missing=DEFAULT_GROUP_WEIGHT)
        ),
        scan_depth=None if data.get("scanDepth") is None else _optional_int(data.get("scanDepth")),
        case_sensitive=_optional_flag(get("caseSensitive")),
        match_whole_words=_optional_flag(get("matchWholeWords")),
        use_group_scoring=_optional_flag(get("useGroupScoring")),
        role=_optional_int(get("role")),
        sticky=_timed(data.get("sticky")),
        cooldown=_timed(data.get("cooldown")),
        delay=_timed(data.get("delay")),
        character_filter=character_filter,
        ignore_budget=is_truthy(data.get("ignoreBudget")),
        triggers=triggers,
        match_sources=tuple(source for source, flag in MATCH_SOURCE_FLAGS if is_truthy(data.get(flag))),
        outlet_name=to_js_string(outlet_name) if is_truthy(outlet_name) else "",
        fingerprint=entry_fingerprint(data, world=world, decorators=decorators, content=content),
    )


def book_from_st_json(entries: Mapping[str, Mapping[str, Any]] | Iterable[Mapping[str, Any]], *, world: str) -> tuple[WorldInfoEntry, ...]:
    """Entries of one lorebook in SillyTavern's load order.

    A lorebook file keys entries by uid; ``Object.keys`` lists integer keys in
    ascending order, which is why equal-``order`` entries scan by uid.
    """
    if isinstance(entries, Mapping):
        by_key = {str(key): value for key, value in entries.items()}
    else:
        by_key = {}
        for entry in entries:
            by_key[str(entry.get("uid"))] = entry  # a repeated uid keeps its first slot, last value
    return tuple(entry_from_st_json(by_key[key], world=world) for key in object_key_order(by_key))


def settings_from_st_json(data: Mapping[str, Any]) -> WorldInfoSettings:
    """``setWorldInfoSettings``: ``Number()``/``Boolean()`` conversions; a budget over 100 resets to 25."""
    defaults = WorldInfoSettings()

    def number(name: str, default: float) -> float:
        value = data.get(f"world_info_{name}", _MISSING)
        return default if value is _MISSING else to_number(value)

    def integer(name: str, default: int) -> int:
        value = number(name, default)
        return int(value) if math.isfinite(value) else 0

    def flag(name: str, default: bool) -> bool:
        value = data.get(f"world_info_{name}", _MISSING)
        return default if value is _MISSING else is_truthy(value)

    budget = number_or_int(number("budget", defaults.budget))
    return WorldInfoSettings(
        depth=integer("depth", defaults.depth),
        min_activations=integer("min_activations", defaults.min_activations),
        min_activations_depth_max=integer("min_activations_depth_max", defaults.min_activations_depth_max),
        budget=25 if budget > 100 else budget,
        include_names=flag("include_names", defaults.include_names),
        recursive=flag("recursive", defaults.recursive),
        overflow_alert=flag("overflow_alert", defaults.overflow_alert),
        case_sensitive=flag("case_sensitive", defaults.case_sensitive),
        match_whole_words=flag("match_whole_words", defaults.match_whole_words),
        character_strategy=integer("character_strategy", defaults.character_strategy),
        budget_cap=number_or_int(number("budget_cap", defaults.budget_cap)),
        use_group_scoring=flag("use_group_scoring", defaults.use_group_scoring),
        max_recursion_steps=integer("max_recursion_steps", defaults.max_recursion_steps),
    )


def settings_to_st_json(settings: WorldInfoSettings) -> dict[str, Any]:
    return {
        "world_info_depth": settings.depth,
        "world_info_min_activations": settings.min_activations,
        "world_info_min_activations_depth_max": settings.min_activations_depth_max,
        "world_info_budget": settings.budget,
        "world_info_include_names": settings.include_names,
        "world_info_recursive": settings.recursive,
        "world_info_overflow_alert": settings.overflow_alert,
        "world_info_case_sensitive": settings.case_sensitive,
        "world_info_match_whole_words": settings.match_whole_words,
        "world_info_character_strategy": settings.character_strategy,
        "world_info_budget_cap": settings.budget_cap,
        "world_info_use_group_scoring": settings.use_group_scoring,
        "world_info_max_recursion_steps": settings.max_recursion_steps,
    }
