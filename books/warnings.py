"""Per-entry warnings shown in the editor list. Pure functions; nothing here writes.

- ``long_entry`` (W-11): a world-book entry longer than the tokens an
  injected entry is trimmed to (W-5, the engine's ``SMART.trim_tokens``);
  split it.
- ``multi_topic`` (W-11): probably several topics in one world-book entry: two
  or more top-level Markdown headings (``#``/``##``), or text split by
  separator lines (``---``, ``***``, ``===``) into parts of some substance.
  Labelled sections ("Appearance:") are one topic and are not flagged.
- ``never_surfaced`` (W-11): an enabled "when relevant" world-book entry that
  never reached a chat while the book is in use (some entry of it has been).
  A book nobody has used yet raises nothing.
- ``unresolved_channel`` (S-13): a legacy `#channel` no admin has resolved;
  the entry counts as active in all channels until one saves a selection.
- ``unknown_decorator`` (C-13): an `@@` line the engine does not know; it is
  kept in the content, left out of what the model sees, and reported.
- ``regex_timeout`` (issue 13): a regex key overran its time budget in a turn
  and was skipped there (``retrieval.engine.regex_budget``); rewrite it.
- ``decorator_ignored`` (C-13): a repeated decorator, a value given to a flag,
  or decorators that cancel each other out.

Token counts default to the engine's tokenizer registry (its estimate when no
model is named), the same counts the live selection uses.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from books.decorators import DecoratorReport, decorators_read
from books.models import Book, Entry, Profile
from books.tokens import model_tokenizer
from lore_platform.errors import Phrase
from retrieval.engine.rules import SMART

LONG_ENTRY_TOKENS = SMART.trim_tokens  # W-5: longer than what an injected entry is trimmed to
MULTI_TOPIC_MIN_HEADINGS = 2
MULTI_TOPIC_MIN_PART_CHARS = 40

_HEADING = re.compile(r"^ {0,3}#{1,2}[ \t]+\S", re.MULTILINE)
_SEPARATOR = re.compile(r"^[ \t]*(?:-{3,}|\*{3,}|={3,})[ \t]*$", re.MULTILINE)


@dataclass(frozen=True, kw_only=True)
class EntryWarning:
    code: str
    message: str  # English, the API's words (a Phrase: pages translate it)
    rule: str


def entry_warning(template: str, *, code: str, rule: str, values: dict[str, Any] | None = None) -> EntryWarning:
    """A warning whose English message is ``template`` filled in with ``values``."""
    return EntryWarning(code=code, rule=rule, message=Phrase(template, values))


def looks_multi_topic(content: str) -> bool:
    if len(_HEADING.findall(content)) >= MULTI_TOPIC_MIN_HEADINGS:
        return True
    parts = [part.strip() for part in _SEPARATOR.split(content)]
    return sum(1 for part in parts if len(part) >= MULTI_TOPIC_MIN_PART_CHARS) >= 2


def entry_warnings(
    entry: Entry,
    *,
    book: Book,
    book_in_use: bool,
    count_tokens: Callable[[str], int] | None = None,
    decorators: DecoratorReport | None = None,
) -> list[EntryWarning]:
    warnings: list[EntryWarning] = []
    if book.profile == Profile.SMART:
        tokens = (count_tokens or model_tokenizer(None).count)(entry.content)
        if tokens > LONG_ENTRY_TOKENS:
            warnings.append(entry_warning(
                "About {tokens:,} tokens: only {trimmed} reach the model when it is injected whole. Split it into "
                "focused entries.", code="long_entry", rule="W-11", values={"tokens": tokens, "trimmed": LONG_ENTRY_TOKENS}))
        if looks_multi_topic(entry.content):
            warnings.append(entry_warning(
                "This entry seems to cover several topics; one topic per entry is retrieved more precisely.",
                code="multi_topic", rule="W-11"))
        if book_in_use and entry.enabled and not entry.constant and entry.usage_count == 0:
            warnings.append(entry_warning(
                "This entry has never surfaced in a chat: its title may be too vague or its lore too thin.",
                code="never_surfaced", rule="W-11"))
    if entry.unresolved_channels:
        warnings.append(entry_warning(
            "Legacy channel {names} is not resolved; the entry counts as active in all channels until an admin "
            "saves a channel selection.", code="unresolved_channel", rule="S-13",
            values={"names": ", ".join(entry.unresolved_channels)}))
    for key, reason in sorted((entry.regex_overruns or {}).items()):
        warnings.append(entry_warning(
            "The regex key {key} {reason} in a turn and is skipped whenever it does: rewrite it without nested "
            "repetition.", code="regex_timeout", rule="C-5", values={"key": repr(key), "reason": reason}))
    if book.profile == Profile.CLASSIC:
        report = decorators if decorators is not None else decorators_read(entry.content)
        for problem in report.warnings:
            # The problem's own words come from the engine, in English.
            code = "unknown_decorator" if problem.kind == "unknown" else "decorator_ignored"
            if problem.line:
                warnings.append(entry_warning("Line {line}: {problem}.", code=code, rule="C-13",
                                              values={"line": problem.line, "problem": problem.message}))
            else:
                warnings.append(entry_warning("{problem}.", code=code, rule="C-13", values={"problem": problem.message}))
    return warnings
