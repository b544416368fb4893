"""Macro substitution for keys and content (SillyTavern's ``substituteParams``).

SillyTavern substitutes macros in every key before matching and in every
activated entry's content. The deterministic part of ``evaluateMacros`` is
reproduced in its order: legacy ``<USER>``/``<BOT>``/``<CHAR>``/``<GROUP>``
tokens, ``{{newline}}``, ``{{trim}}``, ``{{noop}}``, the environment
(character-card fields, ``{{user}}``, ``{{char}}``, ``{{group}}``,
``{{charIfNotGroup}}``, ``{{model}}``) and ``{{// comments}}``. Macros that
depend on the clock, randomness, chat variables or the UI (``{{time}}``,
``{{random}}``, ``{{roll}}``, ``{{getvar}}``, ``{{input}}``...) are left as
written.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .jscompat import expand_replacement

# JavaScript's /i without `u` folds ASCII letters only against ASCII; re.ASCII does the same.
_FLAGS = re.IGNORECASE | re.ASCII
_LEGACY = (
    (re.compile("<USER>", _FLAGS), "user"),
    (re.compile("<BOT>", _FLAGS), "char"),
    (re.compile("<CHAR>", _FLAGS), "char"),
    (re.compile("<CHARIFNOTGROUP>", _FLAGS), "group"),
    (re.compile("<GROUP>", _FLAGS), "group"),
)
_NEWLINE = re.compile(r"\{\{newline\}\}", _FLAGS)
_TRIM = re.compile(r"\n*\{\{trim\}\}\n*", _FLAGS)
_NOOP = re.compile(r"\{\{noop\}\}", _FLAGS)
_COMMENT = re.compile(r"\{\{//[\s\S]*?\}\}")
# Character-card fields in the order substituteParams adds them to the environment.
CARD_FIELDS = (
    "charPrompt", "charJailbreak", "description", "personality", "scenario", "persona",
    "mesExamples", "charVersion", "char_version", "charDepthPrompt", "creatorNotes",
)


@dataclass(frozen=True, kw_only=True)
class MacroEnvironment:
    """The values ``{{user}}``, ``{{char}}`` and friends stand for.

    ``group`` is the group's member list in a group chat; outside one,
    SillyTavern uses the character's name (``None`` here means that).
    """

    user: str = "User"
    char: str = "Char"
    group: str | None = None
    model: str = ""
    card_fields: tuple[tuple[str, str], ...] = field(default=())

    def variables(self) -> list[tuple[str, str]]:
        card = dict(self.card_fields)
        group = self.char if self.group is None else self.group
        values = [(name, card.get(name, "")) for name in CARD_FIELDS]
        values += [("user", self.user), ("char", self.char), ("group", group), ("charIfNotGroup", group)]
        values.append(("model", self.model))
        return values


def _replace_all(pattern: re.Pattern[str], text: str, value: str) -> str:
    # String.replace with a string value expands `$&`, `$$`...
    return pattern.sub(lambda match: expand_replacement(value, match), text)


def substitute_params(text: str, env: MacroEnvironment) -> str:
    """``substituteParams(text)`` for the deterministic macros."""
    if not text:
        return ""
    if "<" in text:
        values = {"user": env.user, "char": env.char, "group": env.char if env.group is None else env.group}
        for pattern, name in _LEGACY:
            text = _replace_all(pattern, text, values[name])
    if "{{" not in text:
        return text
    text = _NEWLINE.sub("\n", text)
    text = _TRIM.sub("", text)
    text = _NOOP.sub("", text)
    for name, value in env.variables():
        pattern = _variable_pattern(name)
        if pattern.search(text):
            text = _replace_all(pattern, text, value)
    return _COMMENT.sub("", text)


_VARIABLE_PATTERNS: dict[str, re.Pattern[str]] = {}


def _variable_pattern(name: str) -> re.Pattern[str]:
    pattern = _VARIABLE_PATTERNS.get(name)
    if pattern is None:
        pattern = re.compile("\\{\\{" + re.escape(name) + "\\}\\}", _FLAGS)
        _VARIABLE_PATTERNS[name] = pattern
    return pattern
