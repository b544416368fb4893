"""SillyTavern World Info JSON: reader and writer.

Reads every vintage seen in the wild (see ``shared/corpus/MANIFEST.md``):
``entries`` as an object keyed by uid or as a list; the 2023 field set
(``uid, key, keysecondary, comment, content, constant, selective``) up to the
2025 one (``characterFilter``, ``triggers``, ``outletName`` …); Chub hybrids
that repeat Character Book V2 names (``keys``, ``insertion_order``,
``enabled`` …) on the same entry; books imported from cards (``originalData``,
a snake_case ``extensions`` mirror); KoboldAI world-info exports that ST once
shipped (``folders``, ``manual_text`` …). Missing fields take SillyTavern's
defaults; an entry is never required to have more than its content.

Field mapping (SillyTavern → ``ImportedEntry``): ``comment`` → ``title``
(falls back to an entry ``name``/``title`` when empty), ``key`` → ``keys``,
``keysecondary`` → ``secondary_keys``, ``selectiveLogic`` 0/1/2/3 →
``and_any/not_all/not_any/and_all``, ``disable`` → not ``enabled``,
``order``, ``probability`` (``useProbability: false`` → ``None``, i.e. always),
``scanDepth`` → ``scan_depth``, ``caseSensitive``, ``matchWholeWords`` →
``whole_words``, ``role`` 0/1/2 → ``system/user/assistant``, ``position`` 0 →
``before_persona``, 1 → ``after_persona``, 2–7 (and out-of-range values) →
``before_persona`` with the original number kept in ``extra["st"]["position"]``.
Every other SillyTavern setting goes to ``extra["st"]`` when it differs from
the default; unknown fields go to ``extra["wi"]`` verbatim. The V2 mirror
names of a Chub hybrid are read only where the SillyTavern name is missing and
are not kept (SillyTavern itself ignores them).

The writer emits what SillyTavern 1.12 writes for each entry (plus the newer
fields of 1.13), keyed by uid, restores ``extra["wi"]``, and carries any other
``extra`` namespace in a ``loreweave`` key so that import → export → import is
exact.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from books.fields import DEFAULT_PRIORITY
from books.formats.jsonio import (
    as_bool,
    as_int,
    as_keys,
    as_object,
    as_opt_bool,
    as_opt_int,
    as_text,
    lenient,
    refuse,
    type_name,
)
from books.formats.model import (
    CARRIER_KEY,
    EXTRA_ST,
    EXTRA_WI,
    BookSettings,
    ImportedBook,
    ImportedEntry,
    plain_json,
)
from retrieval.engine.key_expressions import KeyExpressionError, key_expression_parse

# K-1: an entry's key expression rides in its ``loreweave`` carrier under this name, with the
# entry's own keys (SillyTavern's fields hold the nearest equivalent), so a round trip is exact.
KEY_EXPRESSION_CARRIER = "key_expression"

FORMAT = "sillytavern-world-info"
FORMAT_KOBOLD_WORLD = "koboldai-world-info"

ST_LOGIC = {0: "and_any", 1: "not_all", 2: "not_any", 3: "and_all"}
LOGIC_ST = {name: number for number, name in ST_LOGIC.items()}
ST_ROLE = {0: "system", 1: "user", 2: "assistant"}
ROLE_ST = {name: number for number, name in ST_ROLE.items()}
POSITION_NAMES = {
    0: "before_char",
    1: "after_char",
    2: "an_top",
    3: "an_bottom",
    4: "at_depth",
    5: "em_top",
    6: "em_bottom",
    7: "outlet",
}
MAX_SCAN_DEPTH = 1000  # SillyTavern's MAX_SCAN_DEPTH

# SillyTavern settings we keep in extra["st"], with SillyTavern's defaults.
ST_EXTRA_DEFAULTS: dict[str, Any] = {
    "vectorized": False,
    "addMemo": False,
    "excludeRecursion": False,
    "preventRecursion": False,
    "delayUntilRecursion": False,
    "ignoreBudget": False,
    "matchPersonaDescription": False,
    "matchCharacterDescription": False,
    "matchCharacterPersonality": False,
    "matchCharacterDepthPrompt": False,
    "matchScenario": False,
    "matchCreatorNotes": False,
    "depth": 4,
    "outletName": "",
    "group": "",
    "groupOverride": False,
    "groupWeight": 100,
    "useGroupScoring": None,
    "automationId": "",
    "sticky": 0,
    "cooldown": 0,
    "delay": 0,
    "triggers": [],
    "characterFilter": None,
}
_INT_SETTINGS = {"depth", "groupWeight", "sticky", "cooldown", "delay"}
_BOOL_SETTINGS = {
    name for name, default in ST_EXTRA_DEFAULTS.items() if isinstance(default, bool) and name != "delayUntilRecursion"
}
# Settings that change nothing about activation (editor state, bookkeeping).
ST_UI_ONLY = {"addMemo", "displayIndex", "uid"}

# Entry fields this module consumes (everything else is kept in extra["wi"]).
ST_MODELLED = {
    "uid",
    "key",
    "keysecondary",
    "comment",
    "content",
    "constant",
    "selective",
    "selectiveLogic",
    "order",
    "position",
    "disable",
    "probability",
    "useProbability",
    "scanDepth",
    "caseSensitive",
    "matchWholeWords",
    "role",
    "displayIndex",
    "priority",
}
# Character Book V2 names a Chub hybrid repeats next to SillyTavern's.
V2_MIRROR = {
    "keys": "key",
    "secondary_keys": "keysecondary",
    "insertion_order": "order",
    "enabled": "disable",
    "case_sensitive": "caseSensitive",
}
# snake_case (and stray camelCase) names of the extensions mirror → ST names.
EXTENSION_NAMES: dict[str, str] = {
    "position": "position",
    "exclude_recursion": "excludeRecursion",
    "excludeRecursion": "excludeRecursion",
    "display_index": "displayIndex",
    "displayIndex": "displayIndex",
    "probability": "probability",
    "useProbability": "useProbability",
    "use_probability": "useProbability",
    "depth": "depth",
    "selectiveLogic": "selectiveLogic",
    "selective_logic": "selectiveLogic",
    "outlet_name": "outletName",
    "outletName": "outletName",
    "group": "group",
    "group_override": "groupOverride",
    "groupOverride": "groupOverride",
    "group_weight": "groupWeight",
    "groupWeight": "groupWeight",
    "prevent_recursion": "preventRecursion",
    "preventRecursion": "preventRecursion",
    "delay_until_recursion": "delayUntilRecursion",
    "delayUntilRecursion": "delayUntilRecursion",
    "scan_depth": "scanDepth",
    "scanDepth": "scanDepth",
    "match_whole_words": "matchWholeWords",
    "matchWholeWords": "matchWholeWords",
    "use_group_scoring": "useGroupScoring",
    "useGroupScoring": "useGroupScoring",
    "case_sensitive": "caseSensitive",
    "caseSensitive": "caseSensitive",
    "automation_id": "automationId",
    "automationId": "automationId",
    "role": "role",
    "vectorized": "vectorized",
    "sticky": "sticky",
    "cooldown": "cooldown",
    "delay": "delay",
    "match_persona_description": "matchPersonaDescription",
    "matchPersonaDescription": "matchPersonaDescription",
    "match_character_description": "matchCharacterDescription",
    "matchCharacterDescription": "matchCharacterDescription",
    "match_character_personality": "matchCharacterPersonality",
    "matchCharacterPersonality": "matchCharacterPersonality",
    "match_character_depth_prompt": "matchCharacterDepthPrompt",
    "matchCharacterDepthPrompt": "matchCharacterDepthPrompt",
    "match_scenario": "matchScenario",
    "matchScenario": "matchScenario",
    "match_creator_notes": "matchCreatorNotes",
    "matchCreatorNotes": "matchCreatorNotes",
    "triggers": "triggers",
    "ignore_budget": "ignoreBudget",
    "ignoreBudget": "ignoreBudget",
    "character_filter": "characterFilter",
    "characterFilter": "characterFilter",
    "addMemo": "addMemo",
    "add_memo": "addMemo",
}
# The name SillyTavern writes for each setting in a card's extensions mirror.
ST_TO_EXTENSION: dict[str, str] = {
    "position": "position",
    "excludeRecursion": "exclude_recursion",
    "displayIndex": "display_index",
    "probability": "probability",
    "useProbability": "useProbability",
    "depth": "depth",
    "selectiveLogic": "selectiveLogic",
    "group": "group",
    "groupOverride": "group_override",
    "groupWeight": "group_weight",
    "preventRecursion": "prevent_recursion",
    "delayUntilRecursion": "delay_until_recursion",
    "scanDepth": "scan_depth",
    "matchWholeWords": "match_whole_words",
    "useGroupScoring": "use_group_scoring",
    "caseSensitive": "case_sensitive",
    "automationId": "automation_id",
    "role": "role",
    "vectorized": "vectorized",
    "sticky": "sticky",
    "cooldown": "cooldown",
    "delay": "delay",
    "matchPersonaDescription": "match_persona_description",
    "matchCharacterDescription": "match_character_description",
    "matchCharacterPersonality": "match_character_personality",
    "matchCharacterDepthPrompt": "match_character_depth_prompt",
    "matchScenario": "match_scenario",
    "matchCreatorNotes": "match_creator_notes",
    "outletName": "outlet_name",
    "triggers": "triggers",
    "ignoreBudget": "ignore_budget",
}


def st_setting_is_default(name: str, value: Any) -> bool:
    """True when ``value`` means the same as SillyTavern's default for ``name``."""
    if value is None:
        return True
    if name in ("sticky", "cooldown", "delay", "delayUntilRecursion"):
        return value in (0, False, "0", "")
    if name == "triggers":
        return bool(value == [])
    if name == "useGroupScoring":
        # null = "the global setting"; an explicit false is the entry's own choice
        # (SillyTavern reads ``entry.useGroupScoring ?? global``), so it is kept.
        return False
    if name == "characterFilter":
        return isinstance(value, dict) and not value.get("isExclude") and not value.get("names") and not value.get(
            "tags"
        ) and set(value) <= {"isExclude", "names", "tags"}
    default = ST_EXTRA_DEFAULTS.get(name)
    if isinstance(default, bool):
        return bool(value is default or value == 0 and default is False and not isinstance(value, str))
    return bool(value == default and type(value) is type(default))


def _normalise_setting(name: str, value: Any) -> Any:
    """Numbers and booleans written as strings become numbers/booleans; else unchanged."""
    if value is None or type(value) is type(ST_EXTRA_DEFAULTS[name]):
        return value
    if name in _INT_SETTINGS:
        return lenient(lambda v, p: as_opt_int(v, p), value)
    if name in _BOOL_SETTINGS:
        return lenient(as_opt_bool, value)
    if name == "delayUntilRecursion" and isinstance(value, str):
        converted = lenient(lambda v, p: as_opt_int(v, p), value)
        return converted if converted is not value else lenient(as_opt_bool, value)
    return value


def parse_position(value: Any) -> int | Any:
    """An ST position as an int; card spellings accepted; unknown values unchanged."""
    if value == "before_char":
        return 0
    if value == "after_char":
        return 1
    if isinstance(value, bool):
        return value
    converted = lenient(lambda v, p: as_opt_int(v, p), value)
    return converted


def parse_role(value: Any, path: str) -> str:
    if value is None:
        return "system"
    if isinstance(value, str) and value.strip().lower() in ROLE_ST:
        return value.strip().lower()
    number = as_opt_int(value, path)
    if number is None:
        return "system"
    if number not in ST_ROLE:
        refuse("{path} must be 0 (system), 1 (user) or 2 (assistant), not {number}", path,
               values={"path": path, "number": number})
    return ST_ROLE[number]


def parse_logic(value: Any, path: str) -> str:
    if value is None:
        return "and_any"
    if isinstance(value, str) and value.strip().lower() in LOGIC_ST:
        return value.strip().lower()
    number = as_opt_int(value, path)
    if number is None:
        return "and_any"
    if number not in ST_LOGIC:
        refuse("{path} must be 0–3 (AND ANY, NOT ALL, NOT ANY, AND ALL), not {number}", path,
               values={"path": path, "number": number})
    return ST_LOGIC[number]


def entry_from_st(
    raw: Mapping[str, Any],
    *,
    index: int,
    path: str,
    default_position: int = 0,
    default_selective: bool = True,
    unknown_namespace: str | None = EXTRA_WI,
    title_fallbacks: tuple[str, ...] = ("name", "title"),
) -> ImportedEntry:
    """Build an entry from SillyTavern's world-info field names.

    ``raw`` may also carry the Chub V2 mirror names and a ``loreweave``
    carrier. Fields outside the SillyTavern set go to
    ``extra[unknown_namespace]`` (dropped when it is ``None``: the caller
    keeps them itself).
    """
    get = raw.get
    st: dict[str, Any] = {}
    extra: dict[str, Any] = {}

    def pick(st_name: str) -> Any:
        if st_name in raw:
            return raw[st_name]
        for v2_name, target in V2_MIRROR.items():
            if target == st_name and v2_name in raw:
                value = raw[v2_name]
                return (not as_bool(value, f"{path}.{v2_name}", True)) if v2_name == "enabled" else value
        return None

    content = as_text(get("content"), f"{path}.content")
    title = as_text(get("comment"), f"{path}.comment")
    if not title.strip():
        for name in title_fallbacks:
            candidate = get(name)
            if isinstance(candidate, str) and candidate.strip():
                title = candidate
                break
    keys = as_keys(pick("key"), f"{path}.key")
    secondary = as_keys(pick("keysecondary"), f"{path}.keysecondary")
    enabled = not as_bool(pick("disable"), f"{path}.disable", False)

    position = parse_position(get("position"))
    if position is None:
        position = default_position
    is_number = isinstance(position, int) and not isinstance(position, bool)
    placement = "after_persona" if is_number and position == 1 else "before_persona"
    if not (is_number and position in (0, 1)):
        st["position"] = position

    use_probability = as_bool(get("useProbability"), f"{path}.useProbability", True)
    probability = as_opt_int(get("probability"), f"{path}.probability", lo=0, hi=100)
    if not use_probability:
        st["useProbability"] = False
        if probability is not None and probability != 100:
            st["probability"] = probability
        probability = None
    elif probability == 100:
        probability = None

    uid = get("uid")
    if uid is not None:
        uid_number = as_opt_int(uid, f"{path}.uid", lo=0)
        if uid_number is not None and uid_number != index:
            st["uid"] = uid_number
    display_index = get("displayIndex")
    if display_index is not None and display_index != index:
        st["displayIndex"] = display_index

    for name in ST_EXTRA_DEFAULTS:
        if name in raw:
            value = _normalise_setting(name, raw[name])
            if not st_setting_is_default(name, value):
                st[name] = value

    # Title fallbacks (``name``/``title``) stay in the unknown fields: kept verbatim.
    consumed = set(ST_MODELLED) | set(ST_EXTRA_DEFAULTS) | {CARRIER_KEY}
    for v2_name in V2_MIRROR:
        if v2_name in raw:
            consumed.add(v2_name)
    unknown: dict[str, Any] = {}
    for name, value in raw.items():
        if name in consumed:
            continue
        if name == "id" and value == get("uid"):
            continue
        if name == "extensions" and isinstance(value, dict):
            leftover = {k: v for k, v in value.items() if k not in EXTENSION_NAMES}
            if leftover:
                unknown[name] = leftover
            continue
        unknown[name] = value
    if unknown and unknown_namespace is not None:
        extra[unknown_namespace] = unknown
    if st:
        extra[EXTRA_ST] = st
    extra.update(_carried(raw.get(CARRIER_KEY), exclude=(EXTRA_ST, unknown_namespace or "")))

    entry = ImportedEntry(
        title=title,
        content=content,
        keys=keys,
        secondary_keys=secondary,
        secondary_logic=parse_logic(get("selectiveLogic"), f"{path}.selectiveLogic"),
        selective=as_bool(get("selective"), f"{path}.selective", default_selective),
        constant=as_bool(get("constant"), f"{path}.constant", False),
        enabled=enabled,
        order=as_int(pick("order"), f"{path}.order", 100),
        priority=as_int(get("priority"), f"{path}.priority", DEFAULT_PRIORITY),
        probability=probability,
        scan_depth=as_opt_int(get("scanDepth"), f"{path}.scanDepth", lo=0, hi=MAX_SCAN_DEPTH),
        case_sensitive=as_opt_bool(pick("caseSensitive"), f"{path}.caseSensitive"),
        whole_words=as_opt_bool(get("matchWholeWords"), f"{path}.matchWholeWords"),
        role=parse_role(get("role"), f"{path}.role"),
        placement=placement,
        position=index,
        extra=extra,
    )
    return key_expression_restored(entry, raw.get(CARRIER_KEY), path=f"{path}.{CARRIER_KEY}")


def key_expression_restored(entry: ImportedEntry, carrier: Any, *, path: str) -> ImportedEntry:
    """The entry with the key expression our own export carried (K-1), and its own keys back.

    SillyTavern's fields held the nearest equivalent; the carrier holds what the entry really had.
    """
    kept = carrier.get(KEY_EXPRESSION_CARRIER) if isinstance(carrier, dict) else None
    if not isinstance(kept, dict) or not isinstance(kept.get("expression"), str):
        return entry
    where = f"{path}.{KEY_EXPRESSION_CARRIER}"
    logic = kept.get("secondary_logic")
    return replace(
        entry,
        key_expression=kept["expression"],
        keys=as_keys(kept.get("keys"), f"{where}.keys"),
        secondary_keys=as_keys(kept.get("secondary_keys"), f"{where}.secondary_keys"),
        secondary_logic=logic if logic in LOGIC_ST else entry.secondary_logic,
        selective=as_bool(kept.get("selective"), f"{where}.selective", entry.selective),
    )


def _carried(value: Any, *, exclude: tuple[str, ...]) -> dict[str, Any]:
    """Namespaces carried by a ``loreweave`` key (written by our own writers)."""
    if not isinstance(value, dict):
        return {}
    inner = value.get("extra")
    if not isinstance(inner, dict):
        return {}
    return {ns: v for ns, v in inner.items() if isinstance(ns, str) and ns not in exclude and isinstance(v, dict)}


def carried_book(value: Any, *, exclude: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(extra namespaces, settings) from a book-level ``loreweave`` carrier."""
    extra = _carried(value, exclude=exclude)
    settings = value.get("settings") if isinstance(value, dict) else None
    return extra, settings if isinstance(settings, dict) else {}


def _entries_in(doc: Mapping[str, Any]) -> list[tuple[str, Any]]:
    entries = doc.get("entries")
    if isinstance(entries, dict):
        return [(f"entries.{key}", value) for key, value in entries.items()]
    if isinstance(entries, list):
        return [(f"entries.{i}", value) for i, value in enumerate(entries)]
    refuse("{path} must be an object keyed by uid or a list, not {type}", "entries",
           values={"path": "entries", "type": type_name(entries)})


def count_entries(doc: Mapping[str, Any]) -> int:
    entries = doc.get("entries")
    return len(entries) if isinstance(entries, (dict, list)) else 0


def check_unique_uids(items: list[tuple[str, Any]]) -> None:
    seen: dict[int, str] = {}
    for path, raw in items:
        if not isinstance(raw, dict) or raw.get("uid") is None:
            continue
        uid = as_opt_int(raw["uid"], f"{path}.uid", lo=0)
        if uid is None:
            continue
        if uid in seen:
            refuse("uid {uid} appears twice ({first} and {second})", f"{path}.uid",
                   values={"uid": uid, "first": seen[uid], "second": path}, uid=uid)
        seen[uid] = path


BOOK_KEYS = {
    "entries",
    "name",
    "description",
    "scan_depth",
    "scanDepth",
    "token_budget",
    "tokenBudget",
    "recursive_scanning",
    "recursiveScanning",
    CARRIER_KEY,
}


def book_settings_from(doc: Mapping[str, Any], carried: Mapping[str, Any] | None = None) -> BookSettings:
    def first(*names: str) -> Any:
        for name in names:
            if doc.get(name) is not None:
                return doc[name], name
        return None, names[0]

    scan_value, scan_name = first("scan_depth", "scanDepth")
    budget_value, budget_name = first("token_budget", "tokenBudget")
    recursive_value, recursive_name = first("recursive_scanning", "recursiveScanning")
    carried = carried or {}
    return BookSettings(
        scan_depth=as_opt_int(scan_value, scan_name, lo=0, hi=MAX_SCAN_DEPTH),
        token_budget=as_opt_int(budget_value, budget_name, lo=0),
        recursive=as_opt_bool(recursive_value, recursive_name),
        case_sensitive=as_opt_bool(carried.get("case_sensitive"), "loreweave.settings.case_sensitive"),
        whole_words=as_opt_bool(carried.get("whole_words"), "loreweave.settings.whole_words"),
    )


def read_world_info(doc: Mapping[str, Any], *, fallback_name: str) -> ImportedBook:
    """A parsed world-info document (``{"entries": …}``) as an ``ImportedBook``."""
    items = _entries_in(doc)
    if isinstance(doc.get("entries"), dict):
        # An entry without a uid takes the one its key names (keys are uids).
        items = [
            (path, {**raw, "uid": path.split(".", 1)[1]})
            if isinstance(raw, dict) and raw.get("uid") is None and path.split(".", 1)[1].isdigit()
            else (path, raw)
            for path, raw in items
        ]
    check_unique_uids(items)
    objects = [as_object(raw, path) for path, raw in items]
    uids = resolve_uids(
        [None if raw.get("uid") is None else as_opt_int(raw["uid"], f"{path}.uid", lo=0) for (path, _), raw in zip(items, objects)]
    )
    kobold = "folders" in doc
    entries: list[ImportedEntry] = []
    for index, ((path, _), raw, uid) in enumerate(zip(items, objects, uids)):
        kobold = kobold or "manual_text" in raw
        entries.append(entry_from_st({**raw, "uid": uid}, index=index, path=path))

    carried_extra, carried_settings = carried_book(doc.get(CARRIER_KEY), exclude=(EXTRA_WI,))
    unknown = {k: v for k, v in doc.items() if k not in BOOK_KEYS}
    extra: dict[str, Any] = dict(carried_extra)
    if unknown:
        extra[EXTRA_WI] = unknown
    name = as_text(doc.get("name"), "name").strip()
    original = doc.get("originalData")
    if not name and isinstance(original, dict) and isinstance(original.get("name"), str):
        name = original["name"].strip()
    return ImportedBook(
        name=name or fallback_name,
        description=as_text(doc.get("description"), "description"),
        settings=book_settings_from(doc, carried_settings),
        entries=tuple(entries),
        extra=extra,
        source_format=FORMAT_KOBOLD_WORLD if kobold else FORMAT,
    )


# --- writer -------------------------------------------------------------------------


def resolve_uids(explicit: list[int | None]) -> list[int]:
    """Final uids: kept ones first (the first of a clash wins), then each other
    entry its list index when free, else the lowest free number.

    Readers resolve the uids of entries that have none the same way writers
    do, so read → write → read keeps every uid.
    """
    out: list[int | None] = [None] * len(explicit)
    used: set[int] = set()
    for index, uid in enumerate(explicit):
        if uid is not None and uid not in used:
            out[index] = uid
            used.add(uid)
    next_free = 0
    for index in range(len(out)):
        if out[index] is None:
            if index not in used:
                chosen = index
            else:
                while next_free in used:
                    next_free += 1
                chosen = next_free
            out[index] = chosen
            used.add(chosen)
    return [uid for uid in out if uid is not None]


def assign_uids(entries: tuple[ImportedEntry, ...]) -> list[int]:
    """The uid each entry is written with (see :func:`resolve_uids`)."""
    explicit: list[int | None] = []
    for entry in entries:
        uid = entry.extra_ns(EXTRA_ST).get("uid")
        explicit.append(uid if isinstance(uid, int) and not isinstance(uid, bool) and uid >= 0 else None)
    return resolve_uids(explicit)


def st_fields(entry: ImportedEntry, *, index: int, uid: int) -> dict[str, Any]:
    """The entry in SillyTavern's own names (the world-file field set)."""
    st = entry.extra_ns(EXTRA_ST)
    if entry.placement == "after_persona":
        position: Any = 1
    else:
        position = st.get("position", 0)
        if position == 1:
            position = 0
    if entry.probability is not None:
        probability, use_probability = entry.probability, True
    else:
        use_probability = st.get("useProbability", True) is not False
        probability = 100 if use_probability else st.get("probability", 100)

    def setting(name: str) -> Any:
        return plain_json(st.get(name, ST_EXTRA_DEFAULTS[name]))

    keys, secondary, logic, selective = entry.keys, entry.secondary_keys, entry.secondary_logic, entry.selective
    nearest = nearest_st_keys(entry)
    if nearest is not None:
        keys, secondary, logic = nearest
        selective = bool(secondary)
    out: dict[str, Any] = {
        "uid": uid,
        "key": list(keys),
        "keysecondary": list(secondary),
        "comment": entry.title,
        "content": entry.content,
        "constant": entry.constant,
        "vectorized": setting("vectorized"),
        "selective": selective,
        "selectiveLogic": LOGIC_ST[logic],
        "addMemo": setting("addMemo"),
        "order": entry.order,
        "position": position,
        "disable": not entry.enabled,
        "ignoreBudget": setting("ignoreBudget"),
        "excludeRecursion": setting("excludeRecursion"),
        "preventRecursion": setting("preventRecursion"),
        "matchPersonaDescription": setting("matchPersonaDescription"),
        "matchCharacterDescription": setting("matchCharacterDescription"),
        "matchCharacterPersonality": setting("matchCharacterPersonality"),
        "matchCharacterDepthPrompt": setting("matchCharacterDepthPrompt"),
        "matchScenario": setting("matchScenario"),
        "matchCreatorNotes": setting("matchCreatorNotes"),
        "delayUntilRecursion": setting("delayUntilRecursion"),
        "probability": probability,
        "useProbability": use_probability,
        "depth": setting("depth"),
        "outletName": setting("outletName"),
        "group": setting("group"),
        "groupOverride": setting("groupOverride"),
        "groupWeight": setting("groupWeight"),
        "scanDepth": entry.scan_depth,
        "caseSensitive": entry.case_sensitive,
        "matchWholeWords": entry.whole_words,
        "useGroupScoring": setting("useGroupScoring"),
        "automationId": setting("automationId"),
        "role": ROLE_ST[entry.role],
        "sticky": setting("sticky"),
        "cooldown": setting("cooldown"),
        "delay": setting("delay"),
        "triggers": setting("triggers"),
        "displayIndex": plain_json(st.get("displayIndex", index)),
    }
    if "characterFilter" in st:
        out["characterFilter"] = plain_json(st["characterFilter"])
    if entry.priority != DEFAULT_PRIORITY:
        # Not a SillyTavern field (it ignores it); Chub hybrids carry it too. Absent = our default.
        out["priority"] = entry.priority
    return out


def nearest_st_keys(entry: ImportedEntry) -> tuple[tuple[str, ...], tuple[str, ...], str] | None:
    """SillyTavern's nearest equivalent of the entry's key expression (K-1): (keys, secondary, logic).

    ``None`` without an expression, or for one that does not parse (its keys are then what
    every profile uses, so they are written as they are).
    """
    if not entry.key_expression.strip():
        return None
    try:
        return key_expression_parse(entry.key_expression).nearest_keys()
    except KeyExpressionError:
        return None


def key_expression_carried(entry: ImportedEntry) -> dict[str, Any] | None:
    """What the ``loreweave`` carrier keeps of a key expression: it and the keys SillyTavern's fields replaced."""
    if not entry.key_expression.strip():
        return None
    return {
        "expression": entry.key_expression,
        "keys": list(entry.keys),
        "secondary_keys": list(entry.secondary_keys),
        "secondary_logic": entry.secondary_logic,
        "selective": entry.selective,
    }


def carrier_for(extra: Mapping[str, Any], *, own: tuple[str, ...]) -> dict[str, Any] | None:
    carried = {ns: plain_json(value) for ns, value in extra.items() if ns not in own}
    return {"extra": carried} if carried else None


def world_entry(entry: ImportedEntry, *, index: int, uid: int) -> dict[str, Any]:
    out = st_fields(entry, index=index, uid=uid)
    for name, value in entry.extra_ns(EXTRA_WI).items():
        out.setdefault(name, plain_json(value))
    carrier = carrier_for(entry.extra, own=(EXTRA_ST, EXTRA_WI))
    expression = key_expression_carried(entry)
    if expression:
        carrier = {**(carrier or {}), KEY_EXPRESSION_CARRIER: expression}
    if carrier:
        out[CARRIER_KEY] = carrier
    return out


def key_expressions_exported(entries: tuple[ImportedEntry, ...], uids: list[int]) -> list[dict[str, Any]]:
    """The export receipt's K-1 part: each entry whose key expression became SillyTavern keys, and as what."""
    out: list[dict[str, Any]] = []
    for entry, uid in zip(entries, uids):
        nearest = nearest_st_keys(entry)
        if nearest is None:
            continue
        keys, secondary, logic = nearest
        out.append({
            "uid": uid, "title": entry.title, "key_expression": entry.key_expression,
            "exported_as": {"key": list(keys), "keysecondary": list(secondary), "selectiveLogic": logic},
            "note": "nearest SillyTavern equivalent; Loreweave restores the expression on import",
        })
    return out


def write_world_info(book: ImportedBook) -> bytes:
    """SillyTavern world-info JSON (UTF-8), entries keyed by uid.

    Tenant-only state (channels, collection toggle) is not written (I-6).
    """
    doc: dict[str, Any] = {}
    if book.name:
        doc["name"] = book.name
    if book.description:
        doc["description"] = book.description
    settings = book.settings
    if settings.scan_depth is not None:
        doc["scan_depth"] = settings.scan_depth
    if settings.token_budget is not None:
        doc["token_budget"] = settings.token_budget
    if settings.recursive is not None:
        doc["recursive_scanning"] = settings.recursive
    for name, value in book.extra.get(EXTRA_WI, {}).items():
        if name not in BOOK_KEYS:
            doc[name] = plain_json(value)
    uids = assign_uids(book.entries)
    doc["entries"] = {
        str(uid): world_entry(entry, index=index, uid=uid) for index, (entry, uid) in enumerate(zip(book.entries, uids))
    }
    carrier = carrier_for(book.extra, own=(EXTRA_WI,)) or {}
    approximated = key_expressions_exported(book.entries, uids)
    if approximated:
        # The export's receipt travels in the file: which entries SillyTavern reads approximately.
        carrier["key_expressions"] = approximated
    loose = {"case_sensitive": settings.case_sensitive, "whole_words": settings.whole_words}
    loose = {k: v for k, v in loose.items() if v is not None}
    if loose:
        carrier["settings"] = loose
    if carrier:
        doc[CARRIER_KEY] = carrier
    return json.dumps(doc, ensure_ascii=False, indent=2).encode("utf-8")
