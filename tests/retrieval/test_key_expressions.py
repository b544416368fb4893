"""K-1 key expression parser and its evaluation (engine, no Django)."""
from __future__ import annotations

import pytest

from retrieval.engine.key_expressions import KeyExpressionError, key_expression_parse
from retrieval.engine.values import Book, BookSettings, Entry
from tests.retrieval.test_classic import chat, run


def holds(source: str, *said: str) -> bool:
    expression = key_expression_parse(source)
    present = {i for i, atom in enumerate(expression.atoms) if atom.text in said}
    return expression.evaluate(present.__contains__)


def test_not_binds_tighter_than_and_which_binds_tighter_than_or() -> None:
    assert holds("ember OR ash AND NOT rain", "ember", "rain")  # ember OR (ash AND (NOT rain))
    assert not holds("ember OR ash AND NOT rain", "ash", "rain")
    assert holds("ember OR ash AND NOT rain", "ash")
    assert key_expression_parse("a OR b AND NOT c").canonical() == "a OR b AND NOT c"
    assert not holds("(a OR b) AND c", "a")
    assert holds("a OR b AND c", "a")


def test_the_comma_is_the_loosest_and() -> None:
    source = "(dragon AND egg) OR hatchling, NOT statue"
    assert holds(source, "hatchling")
    assert holds(source, "dragon", "egg")
    assert not holds(source, "hatchling", "statue")
    assert not holds(source, "dragon")
    assert key_expression_parse(source).canonical() == "(dragon AND egg OR hatchling) AND NOT statue"


def test_operators_are_upper_case_words_and_adjacent_words_are_one_key() -> None:
    expression = key_expression_parse("salt and pepper OR red dragon")
    assert [atom.text for atom in expression.atoms] == ["salt and pepper", "red dragon"]


def test_quoted_phrases_keep_operators_commas_and_escapes_as_text() -> None:
    expression = key_expression_parse(r'"red AND gold, (old)" OR "say \"hi\""')
    assert [(atom.text, atom.kind) for atom in expression.atoms] == [
        ("red AND gold, (old)", "phrase"),
        ('say "hi"', "phrase"),
    ]


def test_regex_atoms_keep_their_parentheses_slashes_and_flags() -> None:
    expression = key_expression_parse(r"/wyrm(s|lings)?/i AND /a\/b[/]c/ AND egg")
    assert [(atom.text, atom.kind) for atom in expression.atoms] == [
        ("/wyrm(s|lings)?/i", "regex"),
        (r"/a\/b[/]c/", "regex"),
        ("egg", "words"),
    ]


def test_a_repeated_key_is_one_atom() -> None:
    assert len(key_expression_parse("a AND b OR a AND c").atoms) == 3


@pytest.mark.parametrize(
    ("source", "position", "says"),
    [
        ("", 0, "empty"),
        ("dragon AND", 10, "expected a key"),
        ("(dragon AND egg", 0, "missing ')'"),
        ("dragon ) egg", 7, "found ')'"),
        ('dragon OR "egg', 10, "unterminated quoted phrase"),
        ("dragon OR /egg", 10, "unterminated regex"),
        ("egg AND /x/q", 11, "unknown regex flag"),
        ("NOT statue", 0, "no key is present"),
        ("dragon OR NOT statue", 0, "no key is present"),
        ("dragon AND AND egg", 11, "expected a key"),
        ("dragon,", 7, "expected a key"),
    ],
)
def test_errors_name_their_position(source: str, position: int, says: str) -> None:
    with pytest.raises(KeyExpressionError) as raised:
        key_expression_parse(source)
    assert raised.value.position == position
    assert says in raised.value.message
    assert raised.value.rule == "K-1"


def test_nearest_keys_for_formats_without_expressions() -> None:
    assert key_expression_parse("(dragon AND egg) OR hatchling, NOT statue").nearest_keys() == (
        ("dragon",), ("egg",), "and_all")
    assert key_expression_parse("a OR b, NOT c").nearest_keys() == (("a", "b"), ("c",), "not_any")
    assert key_expression_parse("a OR b").nearest_keys() == (("a", "b"), (), "and_any")


# --- in the classic turn -------------------------------------------------------



def _book(*entries: Entry, recursive: bool = False) -> Book:
    return Book(id="b", name="b", entries=entries,
                settings=BookSettings(scan_depth=4, token_budget=1000, recursive=recursive))


def test_an_expression_replaces_keys_and_secondary_logic() -> None:
    # keys alone would fire on "dragon"; the expression needs the egg too
    lore = _book(Entry(id="e1", keys=("dragon",), secondary_keys=("cave",), key_expression="dragon AND egg",
                       content="Dragon eggs."))
    assert [i.entry for i in run(lore, chat("a dragon in a cave")).injections] == []
    selection = run(lore, chat("a dragon", "an egg"))
    assert [i.entry for i in selection.injections] == ["e1"]
    record = next(r for r in selection.request_log if r.entry == "e1")
    assert record.key == "egg" and "key expression dragon AND egg holds" in record.detail


def test_a_negated_key_alone_is_no_match_and_a_failed_expression_is_logged() -> None:
    lore = _book(Entry(id="e1", key_expression="dragon AND NOT statue", content="Live dragons."))
    quiet = {r.entry: r for r in run(lore, chat("a statue"), ).request_log}
    assert quiet["e1"].outcome == "not_matched"
    failed = {r.entry: r for r in run(lore, chat("a dragon statue")).request_log}
    assert failed["e1"].outcome == "secondary_failed"
    assert "does not hold (keys present: 'dragon', 'statue')" in failed["e1"].detail


def test_regex_atoms_are_regexes_and_entry_settings_apply_to_atoms() -> None:
    lore = _book(Entry(id="e1", key_expression="/wyrm(ling)?s?/i AND Gold", case_sensitive=True, content="x"))
    assert [i.entry for i in run(lore, chat("WYRMLINGS of Gold")).injections] == ["e1"]
    assert [i.entry for i in run(lore, chat("WYRMLINGS of gold")).injections] == []  # case-sensitive atom


def test_atoms_found_in_recursed_lore_count() -> None:
    lore = _book(
        Entry(id="src", keys=("volcano",), content="The volcano lays an egg."),
        Entry(id="e1", key_expression="dragon AND egg", content="Dragon eggs."),
        recursive=True,
    )
    # "egg" is only in src's content: the expression holds on the recursion pass
    assert {i.entry for i in run(lore, chat("a dragon near the volcano")).injections} == {"src", "e1"}


def test_an_expression_that_does_not_parse_warns_and_the_keys_apply() -> None:
    lore = _book(Entry(id="e1", keys=("dragon",), key_expression="dragon AND (egg", content="x"))
    selection = run(lore, chat("a dragon"))
    assert [i.entry for i in selection.injections] == ["e1"]
    assert any("e1: key expression does not parse" in w and "position 11" in w for w in selection.warnings)


def test_an_overrun_regex_atom_is_flagged_on_its_entry() -> None:
    from retrieval.engine.regex_budget import overrun_entries

    lore = _book(Entry(id="e1", key_expression="/(a+)+$/ AND gate", content="x"), Entry(id="e2", keys=("gate",)))
    assert overrun_entries([lore], {"/(a+)+$/": "took too long"}) == {("b", "e1"): {"/(a+)+$/": "took too long"}}
