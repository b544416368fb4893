"""Text that can be stored and written back: no NUL, no unpaired UTF-16 surrogate (issue 26, point 5).

A JSON escape (``"\\udc00"``, ``"\\u0000"``) carries into Python what no UTF-8
file, no PostgreSQL column and no JSON encoder (orjson) takes: a lone
surrogate is not Unicode text at all, and NUL is refused by PostgreSQL's text
and ``jsonb``. Stored on SQLite (inside a JSON column, where the escape
survives), one such value made every later read of the row fail, so it is
refused where it enters — the API's JSON parser, the file importers, the tool
arguments a turn receives — with the JSON path of the value at fault.

What was stored before that check is repaired, not refused: ``text_repair``
replaces each unpaired surrogate with U+FFFD and drops NUL, the same repair the
``text_repair`` management command writes back and the response encoder applies
when it meets such a row (so one row never fails a listing, an export or a
backup).

Python's ``json`` joins a valid escaped pair (``"\\ud83d\\ude00"``) into one
code point, so any surrogate left in a ``str`` is unpaired.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lore_platform.errors import Term, ValidationFailed

UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_SURROGATES = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"
# The SPEC's rule for clear error bodies on the partner API (P-6); imports keep theirs (I-1).
TEXT_RULE = "P-6"


@dataclass(frozen=True)
class BadText:
    """Where a value that is not storable text sits, and what it holds."""

    path: str  # e.g. "extra.<key>", "messages[3].text"
    nul: bool  # True: a NUL character; False: an unpaired surrogate
    character: str  # "U+0000", "U+DC00"
    position: int  # index of the character inside the string
    key: str | None  # for a bad object key: the key, escaped to ASCII (it cannot be shown as text)

    @property
    def what(self) -> str:
        return "a NUL character" if self.nul else "an unpaired UTF-16 surrogate"


def unstorable_in(text: str) -> bool:
    """Does ``text`` hold NUL or an unpaired surrogate? Fast: a C scan for NUL; only a non-ASCII
    string can hold a surrogate, and the UTF-8 encoder finds one at C speed (a regex over the
    character class is several times slower, measured on a 200 KB page)."""
    if "\x00" in text:
        return True
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def child_path(parent: str, key: str | int, *, dotted_indexes: bool = False) -> str:
    if isinstance(key, int) and not dotted_indexes:
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else str(key)


def escaped(text: str) -> str:
    """``text`` as ASCII with backslash escapes: shows a bad value without carrying it."""
    return text.encode("ascii", "backslashreplace").decode("ascii")


def _bad(text: str, path: str, key: bool) -> BadText | None:
    if not unstorable_in(text):
        return None
    match = UNSTORABLE.search(text)
    if match is None:
        return None
    char = match.group()
    return BadText(path=path, nul=char == "\x00", character=f"U+{ord(char):04X}", position=match.start(),
                   key=escaped(text) if key else None)


def text_problem(value: Any, path: str = "", *, dotted_indexes: bool = False) -> BadText | None:
    """The first string (or object key) in ``value`` that is not storable text, depth first; None if all are."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            found = _bad(item, where, key=False)
            if found:
                return found
        elif isinstance(item, Mapping):
            children: list[tuple[Any, str]] = []
            for key, inner in item.items():
                if isinstance(key, str):
                    found = _bad(key, child_path(where, "<key>"), key=True)
                    if found:
                        return found
                children.append((inner, child_path(where, str(key))))
            stack.extend(reversed(children))  # reported in document order
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed([(inner, child_path(where, index, dotted_indexes=dotted_indexes))
                                   for index, inner in enumerate(item)]))
    return None


def text_check(value: Any, path: str, *, rule: str = TEXT_RULE) -> None:
    """Refuse (400, naming ``path`` and the rule) a value holding NUL or an unpaired surrogate anywhere.

    For the services' own writes (pages, accepted job drafts, tool calls): the API's parser has
    already refused such a body, so this names what reached a service by another door.
    """
    bad = text_problem(value, path)
    if bad is not None:
        details: dict[str, Any] = {"character": bad.character, "position": bad.position}
        if bad.key is not None:
            details["key"] = bad.key
        raise ValidationFailed("{where} contains {what}, which is not storable text ({rule}).",
                               values={"where": bad.path, "what": Term(bad.what), "rule": rule},
                               field=bad.path, rule=rule, details=details)


def text_clean(text: str) -> str:
    """``text`` with unpaired surrogates replaced by U+FFFD and NUL dropped (``text`` itself when clean)."""
    if not unstorable_in(text):
        return text
    return _SURROGATES.sub(REPLACEMENT, text.replace("\x00", ""))


def text_repair(value: Any) -> Any:
    """``value`` (a JSON-like value) with every string and key cleaned; the same object when nothing needed it.

    Two keys that clean to the same text keep the later value (a JSON object
    keeps the last of repeated keys too).
    """
    if isinstance(value, str):
        return text_clean(value)
    if isinstance(value, Mapping):
        repaired = {(text_clean(k) if isinstance(k, str) else k): text_repair(v) for k, v in value.items()}
        unchanged = len(repaired) == len(value) and all(
            rk is k and repaired[rk] is v for (k, v), rk in zip(value.items(), repaired, strict=True)
        )
        return value if unchanged else repaired
    if isinstance(value, (list, tuple)):
        items = [text_repair(v) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return type(value)(items) if isinstance(value, tuple) else items
    return value
