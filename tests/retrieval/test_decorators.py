"""The ``@@`` decorator parser (C-13) and the chat-length gates (SPEC §10 boundary)."""
from __future__ import annotations

import pytest

from retrieval.engine.decorators import (
    KNOWN_DECORATORS,
    chat_is_at_greeting,
    decorators_parse,
    gate_allows,
)
from retrieval.engine.values import Message


def chat(count: int, *, first: str = "assistant") -> list[Message]:
    other = "user" if first == "assistant" else "assistant"
    return [Message(role=first if n % 2 == 0 else other, text=f"m{n}") for n in range(count)]  # type: ignore[arg-type]


def test_known_decorators_are_parsed_with_typed_values_and_removed_from_the_text() -> None:
    parsed = decorators_parse(
        "@@probability 50\n@@scan_depth 8\n@@order 900\n@@priority -3\n@@role Assistant\n"
        "@@activate_only_after 4\n@@activate_only_every 3\n@@keep\n@@dont_activate_after_match\n@@is_greeting\n"
        "La lava abrió un canal."
    )
    assert parsed.text == "La lava abrió un canal."
    assert (parsed.probability, parsed.scan_depth, parsed.order, parsed.priority) == (50, 8, 900, -3)
    assert parsed.role == "assistant"
    assert (parsed.activate_only_after, parsed.activate_only_every) == (4, 3)
    assert parsed.keep and parsed.dont_activate_after_match and parsed.is_greeting
    assert {d.name for d in parsed.decorators} == KNOWN_DECORATORS
    # keep + dont_activate_after_match cancel out: reported, not fatal
    assert [w.kind for w in parsed.warnings] == ["conflict"]


def test_content_without_decorators_comes_back_unchanged() -> None:
    content = "  Texto con espacios.\n\n@@probability 10 no es decorador aquí"
    parsed = decorators_parse(content)
    assert parsed.text == content and parsed.probability is None and not parsed.decorators


def test_only_the_leading_block_holds_decorators() -> None:
    parsed = decorators_parse("@@role user\nPrimera línea.\n@@probability 0\nÚltima.")
    assert parsed.role == "user" and parsed.probability is None
    assert parsed.text == "Primera línea.\n@@probability 0\nÚltima."


def test_blank_lines_around_the_block_are_not_content() -> None:
    parsed = decorators_parse("\n@@keep\n\n@@order 5\n\nTexto.\n\nMás texto.")
    assert parsed.keep and parsed.order == 5
    assert parsed.text == "Texto.\n\nMás texto."


def test_unknown_decorators_are_kept_reported_and_never_reach_the_text() -> None:
    parsed = decorators_parse("@@sticky 2\n@@probability 100\nLas ranas croan.")
    assert parsed.text == "Las ranas croan."
    assert parsed.probability == 100
    assert [(d.name, d.value, d.line) for d in parsed.unknown] == [("sticky", "2", 1)]
    assert [(w.kind, w.name, w.line) for w in parsed.warnings] == [("unknown", "sticky", 1)]


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("@@probability 150", "probability"),
        ("@@probability mucho", "probability"),
        ("@@scan_depth -1", "scan_depth"),
        ("@@scan_depth 101", "scan_depth"),
        ("@@activate_only_every 0", "activate_only_every"),
        ("@@activate_only_after", "activate_only_after"),
        ("@@role narrator", "role"),
    ],
)
def test_invalid_values_are_reported_and_ignored(line: str, field: str) -> None:
    parsed = decorators_parse(f"{line}\nTexto.")
    assert getattr(parsed, field) is None
    assert parsed.text == "Texto."
    assert [w.kind for w in parsed.warnings] == ["invalid"]


def test_percent_sign_is_accepted_for_probability() -> None:
    assert decorators_parse("@@probability 35%\nx").probability == 35


def test_first_occurrence_wins_and_repeats_are_reported() -> None:
    parsed = decorators_parse("@@order 10\n@@order 20\nx")
    assert parsed.order == 10
    assert [w.kind for w in parsed.warnings] == ["repeated"]


def test_flag_with_a_value_is_still_applied_and_reported() -> None:
    parsed = decorators_parse("@@keep forever\nx")
    assert parsed.keep and [w.kind for w in parsed.warnings] == ["ignored_value"]


def test_character_card_v3_spelling_of_keep() -> None:
    assert decorators_parse("@@keep_activate_after_match\nx").keep


def test_fallback_lines_stand_in_only_for_a_line_that_was_not_applied() -> None:
    parsed = decorators_parse("@@depth 4\n@@@role user\n@@order 7\n@@@order 9\nTexto.")
    assert parsed.role == "user"  # @@depth is unknown here, so its fallback applies
    assert parsed.order == 7  # @@order applied, so its fallback is skipped
    assert parsed.text == "Texto."


def test_names_are_case_insensitive() -> None:
    assert decorators_parse("@@Probability 20\nx").probability == 20


# --- gates: the counting boundary (SPEC §10) ---------------------------------


@pytest.mark.parametrize(("messages", "allowed"), [(0, False), (3, False), (4, True), (5, True), (12, True)])
def test_activate_only_after_counts_all_messages_and_allows_from_n(messages: int, allowed: bool) -> None:
    parsed = decorators_parse("@@activate_only_after 4\nx")
    assert (gate_allows(parsed, chat(messages), spent=False) is None) is allowed


def test_activate_only_after_counts_both_sides_and_the_greeting() -> None:
    parsed = decorators_parse("@@activate_only_after 4\nx")
    # greeting + 3 user messages in a row: 4 messages, whoever wrote them
    messages = [Message(role="assistant", text="hola")] + [Message(role="user", text="u") for _ in range(3)]
    assert gate_allows(parsed, messages, spent=False) is None


@pytest.mark.parametrize(("messages", "allowed"), [(0, False), (1, False), (3, True), (4, False), (6, True), (8, False), (9, True)])
def test_activate_only_every_allows_positive_multiples(messages: int, allowed: bool) -> None:
    parsed = decorators_parse("@@activate_only_every 3\nx")
    assert (gate_allows(parsed, chat(messages), spent=False) is None) is allowed


def test_is_greeting_only_while_the_chat_is_at_its_greeting() -> None:
    parsed = decorators_parse("@@is_greeting\nx")
    assert gate_allows(parsed, chat(0), spent=False) is None
    assert gate_allows(parsed, chat(1), spent=False) is None
    assert gate_allows(parsed, chat(2), spent=False) is not None
    assert gate_allows(parsed, chat(1, first="user"), spent=False) is not None
    assert chat_is_at_greeting([]) and not chat_is_at_greeting(chat(1, first="user"))


def test_dont_activate_after_match_blocks_once_spent() -> None:
    parsed = decorators_parse("@@dont_activate_after_match\nx")
    assert gate_allows(parsed, chat(2), spent=False) is None
    reason = gate_allows(parsed, chat(2), spent=True)
    assert reason is not None and "already fired" in reason


def test_entry_without_gates_is_never_blocked() -> None:
    parsed = decorators_parse("@@probability 10\nx")
    assert not parsed.has_gates
    assert gate_allows(parsed, chat(7), spent=True) is None
