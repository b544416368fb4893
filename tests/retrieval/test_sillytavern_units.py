"""Focused tests of the SillyTavern quirks the ``sillytavern`` profile reproduces.

Each test pins one behaviour of SillyTavern 1.12.6's World Info code (see
shared/conformance/sillytavern/README.md) so that a regression names itself.
They need no shared data and no database.
"""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from retrieval.engine.sillytavern import (
    CompileCache,
    MacroEnvironment,
    ScanRequest,
    TimedEffect,
    TimedEffectsState,
    WorldInfoBooks,
    WorldInfoSettings,
    book_from_st_json,
    compile_world_info,
    contains_whole_word,
    match_key,
    parse_regex_key,
    run_case,
    scan_world_info,
    split_decorators,
    substitute_params,
)
from retrieval.engine.sillytavern.buffer import ScanBuffer
from retrieval.engine.sillytavern.jscompat import js_round, js_trim, sort_by_order_descending
from retrieval.engine.sillytavern.matching import KeyIndex, KeyKind

REPO_ROOT = Path(__file__).resolve().parents[2]

# --- helpers ------------------------------------------------------------------------

TEMPLATE: dict[str, Any] = {
    "keysecondary": [], "comment": "", "constant": False, "vectorized": False, "selective": True,
    "selectiveLogic": 0, "addMemo": False, "order": 100, "position": 0, "disable": False,
    "excludeRecursion": False, "preventRecursion": False, "delayUntilRecursion": 0, "probability": 100,
    "useProbability": True, "depth": 4, "group": "", "groupOverride": False, "groupWeight": 100,
    "scanDepth": None, "caseSensitive": None, "matchWholeWords": None, "useGroupScoring": None,
    "automationId": "", "role": 0, "sticky": None, "cooldown": None, "delay": None,
}
SETTINGS: dict[str, Any] = {
    "world_info_depth": 2, "world_info_min_activations": 0, "world_info_min_activations_depth_max": 0,
    "world_info_budget": 25, "world_info_include_names": True, "world_info_recursive": False,
    "world_info_overflow_alert": False, "world_info_case_sensitive": False, "world_info_match_whole_words": True,
    "world_info_character_strategy": 1, "world_info_budget_cap": 0, "world_info_use_group_scoring": False,
    "world_info_max_recursion_steps": 0,
}


def entry(uid: int, keys: list[str], content: str, **fields: Any) -> dict[str, Any]:
    return {"uid": uid, "key": keys, **TEMPLATE, "content": content, **fields}


def user(text: str) -> dict[str, Any]:
    return {"name": "User", "is_user": True, "mes": text}


def make_case(
    entries: list[dict[str, Any]], messages: list[str] | None = None, *, max_context: int = 4096, **settings: Any
) -> dict[str, Any]:
    return {
        "name": "unit",
        "settings": {**SETTINGS, **{f"world_info_{key}": value for key, value in settings.items()}},
        "max_context": max_context,
        "user_name": "User",
        "char_name": "Char",
        "entries": entries,
        "chat": [user(text) for text in (messages or ["hello"])],
    }


def turns_of(case: dict[str, Any], chats: list[list[str]], **turn_fields: Any) -> list[dict[str, Any]]:
    case = {key: value for key, value in case.items() if key != "chat"}
    case["turns"] = [{"chat": [user(text) for text in chat], **turn_fields} for chat in chats]
    return list(run_case(case)["turns"])


def one_turn(case: dict[str, Any]) -> dict[str, Any]:
    turn: dict[str, Any] = run_case(case)["turns"][0]
    return turn


def activated(case: dict[str, Any]) -> list[int]:
    uids: list[int] = one_turn(case)["activated_uids"]
    return uids


# --- matching: whole words, folding, multi-word keys -----------------------------------


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    [
        ("котик", "кот", True),  # Cyrillic letters are \W to JavaScript's ASCII \w
        ("café", "caf", True),
        ("恐龍", "龍", True),
        ("snake_case", "snake", False),  # "_" is a word character
        ("r2d2", "r2", False),  # so are digits
        ("hot-dog", "dog", True),
        ("i code c++ daily", "c++", True),
        ("asp.net", ".net", False),  # the dot needs a non-word character before it
        ("see .net", ".net", True),
    ],
)
def test_whole_word_boundaries_are_ascii(text: str, key: str, expected: bool) -> None:
    assert match_key(text, key, case_sensitive=False, whole_words=True) is expected


def test_keys_with_whitespace_ignore_whole_word_mode() -> None:
    assert match_key("twice aged", "ice age", case_sensitive=False, whole_words=True)
    assert match_key("a red dragonfly", "red dragon", case_sensitive=False, whole_words=True)
    assert not match_key("a red dragonfly", "dragon", case_sensitive=False, whole_words=True)


def test_case_folding_is_javascript_to_lower_case_not_casefold() -> None:
    assert match_key("КОШКА", "кошка", case_sensitive=False, whole_words=True)
    assert not match_key("Strassenbahn", "straße", case_sensitive=False, whole_words=False)
    assert match_key("\u212a", "k", case_sensitive=False, whole_words=True)  # Kelvin sign lowercases to "k"
    assert not match_key("Apple", "apple", case_sensitive=True, whole_words=True)


def test_empty_needle_can_match_between_utf16_halves() -> None:
    assert contains_whole_word("x😀y", "")  # the emoji's two code units are both \W
    assert not contains_whole_word("xy", "")


def test_trim_is_javascript_trim() -> None:
    assert js_trim("\ufeff dragon \u00a0") == "dragon"  # BOM and NBSP are JS whitespace
    assert js_trim("\x1cdragon") == "\x1cdragon"  # Python would strip the file separator


def test_keys_are_macro_substituted_then_trimmed() -> None:
    case = make_case(
        [entry(0, ["{{char}}"], "CHAR"), entry(1, ["  <USER>  "], "USER"), entry(2, [""], "EMPTY")],
        ["Char meets User"],
    )
    assert activated(case) == [0, 1]


def test_whitespace_only_key_trims_to_empty_and_always_matches() -> None:
    # `substituted && matchKeys(text, substituted.trim())`: "  " is truthy, "" is in every text.
    assert activated(make_case([entry(0, ["   "], "SPACES")], ["nothing relevant"])) == [0]


keys_alphabet = st.sampled_from(list("ab AB_1-.é\u212aſßẞκ😀\n"))


@settings(max_examples=150, deadline=None)
@given(
    messages=st.lists(st.text(alphabet=keys_alphabet, max_size=12), min_size=1, max_size=4),
    keys=st.lists(st.text(alphabet=keys_alphabet, min_size=1, max_size=4), min_size=1, max_size=6),
    case_sensitive=st.booleans(),
    whole_words=st.booleans(),
)
def test_indexed_matching_equals_matching_the_joined_text(
    messages: list[str], keys: list[str], case_sensitive: bool, whole_words: bool
) -> None:
    index = KeyIndex()
    prepared = [
        index.prepare(key, key, case_sensitive=case_sensitive, match_whole_words=whole_words) for key in keys
    ]
    index.build()
    buffer = ScanBuffer(index, messages, [], global_depth=len(messages))
    buffer.ensure_chat(len(messages))
    for depth in range(1, len(messages) + 1):
        text = buffer.text(depth, True)
        for key in prepared:
            if key.kind != KeyKind.PLAIN:
                continue
            direct = match_key(text, key.text, case_sensitive=case_sensitive, whole_words=whole_words)
            assert buffer.token_present(key.token, key.whole_word, depth, True) is direct, (text, key.text)


REGEX_KEYS = [
    "/ab/", "/ab/i", "/AB[\\s\\S]*é/i", "/^\\x01User/m", "/a$/", "/b\\n\\x01/", "/(?:a|B)b/", "/Ab+/i",
    "/k/i", "/ſ/iu", "/😀/", "/\\bab\\b/", "/a.b/s", "/x*/",
]


@settings(max_examples=120, deadline=None)
@given(
    messages=st.lists(st.text(alphabet=keys_alphabet, max_size=10), min_size=0, max_size=4),
    injection=st.text(alphabet=keys_alphabet, max_size=6),
    recursion=st.lists(st.text(alphabet=keys_alphabet, max_size=8), max_size=2),
    plain_keys=st.lists(st.text(alphabet=keys_alphabet, min_size=1, max_size=3), max_size=4),
    regex_keys=st.lists(st.sampled_from(REGEX_KEYS), max_size=4),
    case_sensitive=st.booleans(),
    whole_words=st.booleans(),
)
def test_engine_key_checks_equal_direct_matching(
    messages: list[str], injection: str, recursion: list[str], plain_keys: list[str], regex_keys: list[str],
    case_sensitive: bool, whole_words: bool,
) -> None:
    from retrieval.engine.sillytavern.scan import _Scan

    keys = plain_keys + regex_keys
    books = WorldInfoBooks(
        global_lore=book_from_st_json([entry(uid, [key], "x") for uid, key in enumerate(keys)], world="global")
    )
    world = compile_world_info(
        books,
        settings=WorldInfoSettings(depth=2, case_sensitive=case_sensitive, match_whole_words=whole_words),
        macros=MacroEnvironment(),
    )
    request = ScanRequest(
        chat=tuple(f"User: {text}" for text in messages), max_context=4096, scan_injections=(injection,) if injection else ()
    )
    scan = _Scan(world, request, TimedEffectsState(), lambda: 0.5, lambda text: 0)
    scan.buffer.ensure_chat(len(messages))
    for piece in recursion:
        scan.buffer.add_recursion(piece)
    for compiled in world.entries:
        (key,) = compiled.primary
        for depth in range(0, len(messages) + 2):
            for with_recursion in (True, False):
                text = scan.buffer.text(depth, with_recursion)
                direct = bool(key.text) and match_key(
                    text, key.text, case_sensitive=case_sensitive, whole_words=whole_words
                ) if key.kind != KeyKind.ALWAYS else True
                assert scan._key_matches(key, depth, with_recursion) is direct, (key.text, depth, text)


# --- regex keys: JavaScript semantics ------------------------------------------------------


def regex(key: str) -> Any:
    compiled = parse_regex_key(key)
    assert compiled is not None, f"{key} should be a regex key"
    return compiled


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        ("/a$/", "a\n", False),  # JS `$` is the very end; Python's would match before "\n"
        ("/a$/m", "a\rb", True),  # with `m`, "\r" is a line terminator too
        ("/a.b/", "a\rb", False),  # `.` excludes "\r" and the Unicode line separators
        ("/a.b/", "a\u2028b", False),
        ("/a.b/s", "a\rb", True),
        ("/\\d/", "٣", False),  # \d is ASCII
        ("/caf\\b/", "café", True),  # \b is ASCII: "é" is a non-word character
        ("/[]/", "anything", False),  # an empty class never matches
        ("/a[^]b/", "a\nb", True),  # [^] matches anything
        ("/a{,2}/", "a{,2}", True),  # not a quantifier in JavaScript
        ("/a{,2}/", "aa", False),
        ("/\\Aab/", "Aab", True),  # an identity escape, not Python's \A
        ("/(a)?b\\1c/", "bc", True),  # a group that did not take part matches empty
        ("/x(?<n>y)\\k<n>/", "xyy", True),
        ("/s/i", "ſ", False),  # JavaScript /i without `u` does not fold ſ to s
        ("/k/i", "\u212a", False),  # nor Kelvin K to k
        ("/ß/i", "ẞ", False),
        ("/σ/i", "ς", True),
        ("/s/iu", "ſ", True),  # with `u`, simple case folding applies
        ("/\\W/iu", "s", False),
        ("/^.$/", "😀", False),  # without `u` an astral character is two code units
        ("/^..$/", "😀", True),
        ("/^.$/u", "😀", True),
        ("/User/y", "\x01User: hi", False),  # sticky: only at index 0
        ("/\\x01User/y", "\x01User: hi", True),
        ("/a\\/b/", "a/b", True),  # "\/" is unescaped
        ("/dragon/", "Dragon", False),  # regex keys ignore the case-sensitivity setting
    ],
)
def test_regex_keys_follow_javascript(key: str, text: str, expected: bool) -> None:
    assert regex(key).test(text) is expected


@pytest.mark.parametrize(
    "key",
    [
        "/[unclosed/",  # invalid syntax: plain text
        "/(?i)dragon/",  # Python-only syntax that JavaScript rejects
        "/a++/",
        "/a/gg",  # repeated flag
        "/a/b/",  # unescaped slash inside
        "/a/x",  # flag outside gimsuy
        "dragon",
        "/\\k<missing>(?<n>a)/",
    ],
)
def test_keys_that_are_not_regexes(key: str) -> None:
    assert parse_regex_key(key) is None


def test_valid_javascript_python_cannot_run_never_matches() -> None:
    compiled = regex("/(?<=a+)b/")  # variable-width lookbehind
    assert not compiled.supported
    assert not compiled.test("aab")


def test_regex_prefilter_literals_are_necessary_conditions() -> None:
    compiled = regex("/dra(g|k)on\\d+/i")
    assert compiled.required_literal == "dra"
    assert compiled.prefix_literal == "dra"
    assert compiled.test("a DRAKON7 here")
    assert regex("/(?:a|b)c/").prefix_literal is None


def test_regex_key_spanning_messages_with_its_prefix_in_a_newer_one() -> None:
    # Newest message first: "ab" (the prefix) comes before "xyz" (the longer, required literal).
    case = make_case([entry(0, ["/ab[\\s\\S]*xyz/"], "SPAN")], ["old xyz", "new ab"])
    assert activated(case) == [0]


def test_invalid_regex_key_matches_as_plain_text() -> None:
    case = make_case([entry(0, ["/[unclosed/"], "LITERAL")], ["See /[unclosed/ text"])
    assert activated(case) == [0]


# --- scan buffer -----------------------------------------------------------------------------


def test_scan_text_is_newest_first_with_separators() -> None:
    index = KeyIndex()
    index.build()
    buffer = ScanBuffer(index, ["Char: b", "User: a"], ["note"], global_depth=2)
    buffer.add_recursion("lore")
    assert buffer.text(2, True) == "\x01Char: b\n\x01User: a\n\x01note\n\x01lore"
    assert buffer.text(2, False) == "\x01Char: b\n\x01User: a\n\x01note"  # min-activation passes
    assert buffer.text(0, True) == ""  # depth 0 sees nothing, recursion included


def test_empty_messages_keep_depth_slots_but_trailing_ones_drop_out() -> None:
    index = KeyIndex()
    index.build()
    assert ScanBuffer(index, ["", "", "alpha"], [], 2).text(2, True) == "\x01\n\x01"
    assert ScanBuffer(index, ["alpha", ""], [], 2).text(2, True) == "\x01alpha"
    assert ScanBuffer(index, ["  padded  "], [], 1).text(1, True) == "\x01padded"


def test_per_entry_scan_depth_zero_blocks_even_recursion() -> None:
    case = make_case(
        [entry(0, ["king"], "The queen."), entry(1, ["queen"], "SD0", scanDepth=0), entry(2, ["queen"], "OK")],
        ["the king"],
        recursive=True,
    )
    assert activated(case) == [0, 2]


# --- timed effects ----------------------------------------------------------------------------


def test_sticky_then_protected_cooldown() -> None:
    case = make_case([entry(0, ["bell"], "BELL", sticky=2, cooldown=2)], depth=1)
    chats = [["bell"] * length for length in range(1, 7)]
    turns = turns_of(case, chats)
    # active, sticky, cooldown starts when sticky ends (protected), cooldown, free again
    assert [turn["activated_uids"] == [0] for turn in turns] == [True, True, False, False, True, True]
    assert turns[2]["timed_effects_after"]["cooldown"]["global.0"] == {"start": 3, "end": 5, "protected": True}


def test_regenerate_drops_unprotected_effects() -> None:
    case = make_case([entry(0, ["bell"], "BELL", cooldown=3)], depth=1)
    advanced = turns_of(case, [["bell"], ["bell", "bell"]])
    assert [turn["activated_uids"] for turn in advanced] == [[0], []]  # cooling down
    # A swipe or regenerate scans the same chat length: length <= start drops the record.
    regenerated = turns_of(case, [["bell"], ["bell"]])
    assert [turn["activated_uids"] for turn in regenerated] == [[0], [0]]


def test_editing_an_entry_detaches_its_running_effect() -> None:
    case = make_case([entry(0, ["amulet"], "AMULET", sticky=5)], depth=1)
    case = {key: value for key, value in case.items() if key != "chat"}
    case["turns"] = [
        {"chat": [user("amulet")]},
        {"chat": [user("amulet"), user("nothing")], "entry_updates": [{"uid": 0, "book": "global", "set": {"comment": "x"}}]},
    ]
    first, second = run_case(case)["turns"]
    assert first["activated_uids"] == [0]
    assert second["activated_uids"] == []  # the edited entry no longer matches the record's hash
    assert second["timed_effects_after"]["sticky"] == {"global.0": {"start": 1, "end": 6, "protected": False}}


def test_delay_counts_messages_not_turns() -> None:
    case = make_case([entry(0, ["door"], "DOOR", delay=3)], depth=1)
    turns = turns_of(case, [["door"], ["door", "door"], ["door", "door", "door"]])
    assert [turn["activated_uids"] for turn in turns] == [[], [], [0]]


def test_scan_takes_and_returns_timed_state_as_a_value() -> None:
    books = WorldInfoBooks(global_lore=book_from_st_json([entry(0, ["amulet"], "A", sticky=3)], world="global"))
    world = compile_world_info(books, settings=WorldInfoSettings(depth=1), macros=MacroEnvironment())
    empty = TimedEffectsState()
    first = scan_world_info(world, ScanRequest(chat=("User: amulet",), max_context=4096), empty)
    assert empty == TimedEffectsState()  # the input is untouched
    assert first.timed_effects.sticky[0][0] == "global.0"
    second = scan_world_info(world, ScanRequest(chat=("User: x", "User: amulet"), max_context=4096), first.timed_effects)
    assert [entry.uid for entry in second.activated] == [0]
    dry = scan_world_info(
        world, ScanRequest(chat=("User: x", "User: amulet"), max_context=4096, dry_run=True), first.timed_effects
    )
    assert dry.activated == () and dry.timed_effects == first.timed_effects


def test_timed_state_round_trips_through_json() -> None:
    state = TimedEffectsState(sticky=(("global.0", TimedEffect(hash="h", start=1, end=4)),))
    assert TimedEffectsState.from_json(state.to_json()) == state


# --- inclusion groups ---------------------------------------------------------------------------


def test_group_override_takes_the_highest_order() -> None:
    case = make_case(
        [
            entry(0, ["rain"], "PLAIN", group="w"),
            entry(1, ["rain"], "O50", order=50, group="w", groupOverride=True),
            entry(2, ["rain"], "O80", order=80, group="w", groupOverride=True),
        ],
        ["rain"],
    )
    assert activated(case) == [2]


def test_loser_of_two_groups_removes_the_last_candidate() -> None:
    case = make_case(
        [
            entry(0, ["rain"], "LOSER", group="g1, g2"),
            entry(1, ["rain"], "P1", order=50, group="g1", groupOverride=True),
            entry(2, ["rain"], "P2", order=40, group="g2", groupOverride=True),
            entry(3, ["rain"], "LAST", order=10),
        ],
        ["rain"],
    )
    assert activated(case) == [1, 2]  # splice(indexOf(-1), 1) dropped uid 3


def test_weighted_roll_uses_cumulative_weights() -> None:
    case = make_case(
        [entry(0, ["rain"], "W25", group="g", groupWeight=25), entry(1, ["rain"], "W75", order=90, group="g")],
        ["rain"],
    )
    case["entries"][1]["groupWeight"] = 75
    assert run_case(case, random=lambda: 0.2)["turns"][0]["activated_uids"] == [0]  # roll 20 <= 25
    assert run_case(case, random=lambda: 0.5)["turns"][0]["activated_uids"] == [1]  # roll 50 > 25


def test_only_scored_members_lose_on_score() -> None:
    case = make_case(
        [
            entry(0, ["rain", "cloud"], "TWO", group="sky", useGroupScoring=True),
            entry(1, ["rain"], "ONE-UNSCORED", order=90, group="sky", useGroupScoring=False),
            entry(2, ["rain"], "ONE-SCORED", order=80, group="sky", useGroupScoring=True),
        ],
        ["rain and cloud"],
    )
    # uid 2 loses on score; uid 1 is not scored and stays for the roll, which uid 0 wins.
    assert run_case(case, random=lambda: 0.1)["turns"][0]["activated_uids"] == [0]
    assert run_case(case, random=lambda: 0.9)["turns"][0]["activated_uids"] == [1]


def test_losers_return_on_recursion_unless_the_exact_group_string_won() -> None:
    case = make_case(
        [
            entry(0, ["rain"], "LOSER", group="gamma", order=200),
            entry(1, ["rain"], "WINNER", order=40, group="beta, gamma", groupOverride=True),
        ],
        ["rain"],
        recursive=True,
    )
    assert activated(case) == [1, 0]


# --- budget -----------------------------------------------------------------------------------------


def test_budget_rounds_halves_up_like_math_round() -> None:
    assert js_round(1024.5) == 1025  # Python's round() would give 1024
    assert js_round(-2.5) == -2
    assert js_round(0.49999999999999994) == 0
    case = make_case([entry(0, ["go"], "GO")], ["go"], budget=25, max_context=4098)
    assert one_turn(case)["diagnostics"]["budget_tokens"] == 1025


def test_zero_budget_is_one_token_and_nothing_fits() -> None:
    case = make_case([entry(0, [], "CONST", constant=True)], ["go"], budget=0)
    turn = one_turn(case)
    assert turn["activated_uids"] == [] and turn["diagnostics"]["budget_overflow"]


def test_prevent_recursion_content_of_earlier_passes_is_not_counted() -> None:
    big = "A " * 120  # 240 chars + "\n": 61 tokens, kept out of the recursion text
    case = make_case(
        [
            entry(0, ["go"], big, preventRecursion=True, order=300),
            entry(1, ["go"], "zeta " + "b" * 95, order=200),  # 101 chars with "\n": 26 tokens
            entry(2, ["zeta"], "c" * 200),  # 51 tokens: 26 + 51 < 100, though everything sums to 138
        ],
        ["go"],
        budget=10,
        recursive=True,
        max_context=1000,
    )
    assert activated(case) == [0, 1, 2]


def test_overflow_ends_the_scan_but_a_delay_level_still_runs() -> None:
    case = make_case(
        [
            entry(0, ["go"], "x" * 500, order=200),  # overflows a 100-token budget
            entry(1, ["go"], "DELAYED", delayUntilRecursion=2),
            entry(2, ["go"], "LEVEL1", delayUntilRecursion=1),
        ],
        ["go"],
        budget=10,
        max_context=1000,
    )
    turn = one_turn(case)
    # Level 1 is preset (skipped in the initial pass); level 2 gets its pass after the overflow, where the
    # recursion text already holds the never-activated entry's content.
    assert turn["activated_uids"] == []
    assert turn["diagnostics"] == {"budget_tokens": 100, "budget_overflow": True, "scan_loops": 2}


# --- passes ---------------------------------------------------------------------------------------


def test_min_activations_reaches_depth_max_plus_one() -> None:
    messages = ["m1 alpha", "m2 beta", "m3 gamma", "m4 delta"]  # oldest first; newest is delta
    case = make_case(
        [entry(0, ["alpha"], "A"), entry(1, ["beta"], "B"), entry(2, ["gamma"], "G"), entry(3, ["delta"], "D")],
        messages,
        depth=1,
        min_activations=10,
        min_activations_depth_max=2,
    )
    assert activated(case) == [3, 2, 1]  # depths 1, 2 and 3


def test_min_activations_with_recursion_adds_no_empty_recursion_passes() -> None:
    # 1.18.0: a pass that activates nothing pushes no empty recursion text, so the min-activations
    # passes before "alpha" is found are not each followed by an empty recursion pass (1.12.6 gave 7).
    entries = [entry(0, ["alpha"], "found")]
    messages = ["m3 alpha", "m2", "m1"]
    plain = one_turn(make_case(entries, messages, depth=1, min_activations=2))
    recursive = one_turn(make_case(entries, messages, depth=1, min_activations=2, recursive=True))
    assert plain["activated_uids"] == recursive["activated_uids"] == [0]
    assert (plain["diagnostics"]["scan_loops"], recursive["diagnostics"]["scan_loops"]) == (4, 6)


def test_single_delay_level_never_fires_without_other_activations() -> None:
    assert activated(make_case([entry(0, ["tell"], "D", delayUntilRecursion=1)], ["tell me"])) == []


def test_exclude_recursion_only_applies_with_recursion_on() -> None:
    entries = [
        entry(0, ["king"], "K"),
        entry(1, ["tell"], "L1", delayUntilRecursion=1, excludeRecursion=True),
        entry(2, ["tell"], "L2", delayUntilRecursion=2),
    ]
    assert activated(make_case(entries, ["tell the king"])) == [0, 1, 2]  # recursion off: delay passes run


# --- placement ---------------------------------------------------------------------------------------


def test_authors_note_loses_one_leading_and_one_trailing_newline() -> None:
    case = make_case([entry(0, ["go"], "TOP", position=2)], ["go"])
    case["authors_note"] = ""
    assert one_turn(case)["authors_note_text"] == "TOP\n"
    case["authors_note_active"] = False
    assert one_turn(case)["authors_note_text"] is None


def test_equal_orders_appear_in_reverse_scan_order() -> None:
    case = make_case([entry(uid, ["go"], f"E{uid}") for uid in (2, 5, 9)], ["go"])
    assert one_turn(case)["before"] == {"uids": [9, 5, 2], "text": "E9\nE5\nE2"}


def test_depth_group_opened_without_depth_is_never_joined() -> None:
    case = make_case(
        [
            entry(0, ["go"], "NULL-HIGH", position=4, depth=None, order=200),
            entry(1, ["go"], "FOUR", position=4, depth=4, order=100),
            entry(2, ["go"], "NULL-LOW", position=4, depth=None, order=50),
        ],
        ["go"],
    )
    assert one_turn(case)["depth"] == [
        {"depth": None, "role": "system", "uids": [0], "entries": ["NULL-HIGH"]},
        {"depth": 4, "role": "system", "uids": [2, 1], "entries": ["NULL-LOW", "FOUR"]},
    ]


def test_entries_without_position_activate_but_go_nowhere() -> None:
    case = make_case([entry(0, ["go"], "NOWHERE", position=None), entry(1, ["go"], "")], ["go"])
    turn = one_turn(case)
    assert turn["activated_uids"] == [0, 1] and turn["before"]["uids"] == []


# --- entries, sorting, macros ------------------------------------------------------------------------


def test_missing_fields_read_like_javascript() -> None:
    legacy = {"uid": 3, "key": ["go"], "keysecondary": ["never"], "content": "LEGACY", "position": 0}
    case = make_case([legacy], ["go"])
    # selective missing: secondaries ignored; useProbability missing: no roll; order missing: NaN
    assert activated(case) == [3]
    (read,) = book_from_st_json([legacy], world="global")
    assert math.isnan(read.order) and not read.selective and not read.use_probability


def test_missing_order_sorts_as_v8_sorts_a_nan_comparator() -> None:
    orders = [math.nan, 5, math.nan, 10]
    assert sort_by_order_descending([0, 1, 2, 3], lambda i: orders[i]) == [0, 1, 2, 3]
    orders = [0, 1, math.nan]
    assert sort_by_order_descending([0, 1, 2], lambda i: orders[i]) == [1, 0, 2]


def test_book_order_is_uid_order_then_order_descending() -> None:
    book = book_from_st_json([entry(10, ["a"], ""), entry(2, ["a"], ""), entry(7, ["a"], "", order=300)], world="g")
    assert [item.uid for item in book] == [2, 7, 10]


def test_decorators_are_stripped_and_only_known_ones_kept() -> None:
    assert split_decorators("@@activate\n@@unknown\nBODY") == (("@@activate",), "BODY")
    assert split_decorators("@@dont_activate") == (("@@dont_activate",), "@@dont_activate")  # all lines: kept
    assert split_decorators("@@@activate\nBODY") == ((), "BODY")  # a fallback needs a failed line before it
    assert split_decorators("@@nope\n@@@activate\nBODY") == (("@@activate",), "BODY")


def test_macros_follow_substitute_params() -> None:
    env = MacroEnvironment(user="Ann", char="Bo")
    assert substitute_params("<USER> and <BOT> and {{CHAR}} in {{group}}", env) == "Ann and Bo and Bo in Bo"
    assert substitute_params("a\n{{trim}}\nb{{newline}}c{{// note}}", env) == "ab\nc"
    assert substitute_params("{{user}}", MacroEnvironment(user="A$&B")) == "A{{user}}B"  # JS replacement pattern


def test_character_filter_uses_the_avatar_file_name() -> None:
    case = make_case(
        [
            entry(0, ["go"], "IN", characterFilter={"isExclude": False, "names": ["char"], "tags": []}),
            entry(1, ["go"], "OUT", characterFilter={"isExclude": True, "names": ["char"], "tags": []}),
        ],
        ["go"],
    )
    assert activated(case) == [0]


# --- engine API ---------------------------------------------------------------------------------------


def test_compile_cache_reuses_compiled_books_per_version() -> None:
    cache = CompileCache(max_size=2)
    books = WorldInfoBooks(global_lore=book_from_st_json([entry(0, ["a"], "A")], world="global"))
    first = cache.get_or_compile("v1", books, settings=WorldInfoSettings(), macros=MacroEnvironment())
    assert cache.get_or_compile("v1", books, settings=WorldInfoSettings(), macros=MacroEnvironment()) is first
    assert cache.get_or_compile("v2", books, settings=WorldInfoSettings(), macros=MacroEnvironment()) is not first


def test_forced_activation_skips_only_the_keyword_check() -> None:
    books = WorldInfoBooks(
        global_lore=book_from_st_json([entry(0, ["zzz"], "VECTOR"), entry(1, ["zzz"], "OFF", disable=True)], world="global")
    )
    world = compile_world_info(books, settings=WorldInfoSettings(), macros=MacroEnvironment())
    request = ScanRequest(chat=("User: hi",), max_context=4096, forced_activations=frozenset({"global.0", "global.1"}))
    assert [entry.uid for entry in scan_world_info(world, request).activated] == [0]


def test_the_engine_imports_no_django() -> None:
    probe = (
        "import sys, retrieval.engine.sillytavern as st; "
        "st.run_case({'settings': {}, 'entries': [], 'chat': []}); "
        "sys.exit(any(m == 'django' or m.startswith('django.') for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, check=False).returncode == 0
