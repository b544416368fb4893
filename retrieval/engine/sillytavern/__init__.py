"""The ``sillytavern`` context profile: SillyTavern 1.18.0 World Info activation in plain Python.

``run_case`` runs a SillyTavern-native case (the conformance format). Underneath,
``compile_world_info`` prepares a book set once (cache it with ``CompileCache``)
and ``scan_world_info`` runs one generation, taking and returning the chat's
timed-effect state as a value. No Django, no globals holding scan state.
"""
from .cases import CaseRunner, chat_for_world_info, run_case, scan_injections
from .entries import (
    CharacterFilter,
    CharacterIdentity,
    InsertionStrategy,
    MatchSource,
    Position,
    Role,
    SelectiveLogic,
    WorldInfoBooks,
    WorldInfoEntry,
    WorldInfoSettings,
    book_from_st_json,
    entry_from_st_json,
    generation_trigger,
    settings_from_st_json,
    split_decorators,
)
from .jsregex import JsRegex, compile_js_regex, parse_regex_key
from .macros import MacroEnvironment, substitute_params
from .matching import contains_whole_word, match_key
from .placement import DepthInjection, ExampleInjection, PlacedEntry, WorldInfoPrompt
from .scan import (
    CompileCache,
    CompiledWorldInfo,
    ScanDiagnostics,
    ScanRequest,
    ScanResult,
    compile_world_info,
    estimate_tokens,
    scan_world_info,
    sort_entries,
)
from .timed_effects import TimedEffect, TimedEffectsState

__all__ = [
    "CaseRunner", "chat_for_world_info", "scan_injections", "CharacterFilter", "CharacterIdentity", "CompileCache", "CompiledWorldInfo", "DepthInjection",
    "ExampleInjection", "InsertionStrategy", "MatchSource", "generation_trigger", "JsRegex", "MacroEnvironment", "PlacedEntry", "Position", "Role",
    "ScanDiagnostics", "ScanRequest", "ScanResult", "SelectiveLogic", "TimedEffect", "TimedEffectsState",
    "WorldInfoBooks", "WorldInfoEntry", "WorldInfoPrompt", "WorldInfoSettings", "book_from_st_json",
    "compile_js_regex", "compile_world_info", "contains_whole_word", "entry_from_st_json", "estimate_tokens",
    "match_key", "parse_regex_key", "run_case", "scan_world_info", "settings_from_st_json", "sort_entries",
    "split_decorators", "substitute_params",
]
