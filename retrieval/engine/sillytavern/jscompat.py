"""JavaScript semantics that SillyTavern's World Info code relies on.

SillyTavern runs in a browser, so its behaviour is partly JavaScript's:
``String.prototype.trim`` strips a different character set than ``str.strip``,
``Math.round`` rounds halves up, ``Object.keys`` lists integer-like keys first,
``Array.prototype.sort`` with a comparator that returns ``NaN`` is not a plain
stable sort, and token counts are taken on UTF-16 code units. Each helper here
reproduces one of those rules so the engine can stay plain Python.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

# ECMAScript WhiteSpace + LineTerminator: what `trim()` strips and `\s` matches.
JS_WHITESPACE = frozenset(
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
JS_WHITESPACE_CHARS = "".join(sorted(JS_WHITESPACE))
# JavaScript `\w` without the `u` flag: ASCII only.
ASCII_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")

_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def js_trim(text: str) -> str:
    """``String.prototype.trim``: strips ECMAScript whitespace only."""
    return text.strip(JS_WHITESPACE_CHARS)


_JS_WHITESPACE_RE = re.compile("[" + re.escape(JS_WHITESPACE_CHARS) + "]")


def js_has_whitespace(text: str) -> bool:
    """True when ``text.split(/\\s+/)`` would give more than one part."""
    return _JS_WHITESPACE_RE.search(text) is not None


def js_lower(text: str) -> str:
    """``String.prototype.toLowerCase``.

    Python's ``str.lower`` applies the same Unicode full mappings, including
    the context-sensitive final sigma, so it is a faithful stand-in.
    """
    return text.lower()


def utf16_length(text: str) -> int:
    """JavaScript ``.length``: UTF-16 code units, so astral characters count twice."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def has_astral(text: str) -> bool:
    return not text.isascii() and utf16_length(text) != len(text)


def to_utf16_units(text: str) -> str:
    """Rewrite astral characters as surrogate pairs (one Python char per UTF-16 code unit).

    A JavaScript regex without the ``u`` flag works on code units; matching the
    translated pattern against this view reproduces that.
    """
    if not has_astral(text):
        return text

    def split(match: re.Match[str]) -> str:
        code = ord(match.group()) - 0x10000
        return chr(0xD800 + (code >> 10)) + chr(0xDC00 + (code & 0x3FF))

    return _ASTRAL.sub(split, text)


def is_truthy(value: object) -> bool:
    """JavaScript truthiness for JSON values."""
    if value is None or value is False:
        return False
    if isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return value != 0 and not math.isnan(value)
    if isinstance(value, str):
        return value != ""
    return True


_JS_NUMBER = re.compile(r"[+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")


def to_number(value: object) -> float:
    """JavaScript ``Number(value)`` for JSON values (``undefined`` is the caller's NaN)."""
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = js_trim(value)
        if text == "":
            return 0.0
        if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
            return float(int(text[2:], 16))
        if re.fullmatch(r"0[oO][0-7]+", text):
            return float(int(text[2:], 8))
        if re.fullmatch(r"0[bB][01]+", text):
            return float(int(text[2:], 2))
        if _JS_NUMBER.fullmatch(text):
            return float(text.replace("Infinity", "inf"))
        return math.nan
    if isinstance(value, list):
        if not value:
            return 0.0
        if len(value) == 1:
            return to_number(value[0] if not isinstance(value[0], (list, dict)) else str(value[0]))
        return math.nan
    return math.nan


def loosely_equals_true(value: object) -> bool:
    """``value == true`` (abstract equality compares ``Number(value)`` with 1)."""
    if isinstance(value, (dict,)):
        return False
    return to_number(value) == 1.0


def js_round(value: float) -> float:
    """``Math.round``: halves round towards +infinity."""
    if math.isnan(value) or math.isinf(value):
        return value
    floor = math.floor(value)
    return float(floor + 1) if value - floor >= 0.5 else float(floor)


def number_or_int(value: float) -> float:
    """Keep integral numbers as ``int`` so they print as JavaScript prints them."""
    if math.isfinite(value) and value == int(value):
        return int(value)
    return value


def is_array_index(key: str) -> bool:
    """Whether JavaScript treats an object key as an integer index (listed first, ascending)."""
    return key.isdigit() and key.isascii() and (key == "0" or not key.startswith("0")) and int(key) < 2**32 - 1


def object_key_order(keys: Iterable[str]) -> list[str]:
    """``Object.keys`` order: integer-like keys ascending, then the rest in insertion order."""
    unique = list(dict.fromkeys(keys))
    indexes = sorted((key for key in unique if is_array_index(key)), key=int)
    return indexes + [key for key in unique if not is_array_index(key)]


def sort_by_order_descending(items: Sequence[T], order_of: Callable[[T], float]) -> list[T]:
    """``items.sort((a, b) => b.order - a.order)`` as V8 runs it.

    With finite orders this is a stable sort, descending. A missing order is
    ``NaN`` in JavaScript and makes the comparator inconsistent; V8's result
    then depends on its algorithm, so small arrays replay V8's run detection and
    binary insertion (larger ones are approximated the same way).
    """
    orders = [order_of(item) for item in items]
    if all(math.isfinite(order) for order in orders):
        ranked = sorted(range(len(items)), key=lambda index: -orders[index])
        return [items[index] for index in ranked]
    return [items[index] for index in _v8_binary_insertion_sort(orders)]


def _v8_binary_insertion_sort(orders: list[float]) -> list[int]:
    def compare(a: int, b: int) -> float:  # comparefn(a, b) = b.order - a.order
        difference = orders[b] - orders[a]
        return 0.0 if math.isnan(difference) else difference  # SortCompare: NaN counts as +0

    work = list(range(len(orders)))
    count = len(work)
    if count < 2:
        return work
    # CountAndMakeRun: the leading run, reversed if strictly descending.
    run = 2
    descending = compare(work[1], work[0]) < 0
    previous = work[1]
    for index in range(2, count):
        order = compare(work[index], previous)
        if (descending and order >= 0) or (not descending and order < 0):
            break
        previous = work[index]
        run += 1
    if descending:
        work[:run] = reversed(work[:run])
    # BinaryInsertionSort for the rest.
    for start in range(run, count):
        pivot = work[start]
        left, right = 0, start
        while left < right:
            middle = left + ((right - left) >> 1)
            if compare(pivot, work[middle]) < 0:
                right = middle
            else:
                left = middle + 1
        work[left + 1 : start + 1] = work[left:start]
        work[left] = pivot
    return work


def expand_replacement(template: str, match: re.Match[str]) -> str:
    """JavaScript ``String.prototype.replace`` replacement patterns (``$$``, ``$&``, ``$` ``, ``$'``)."""
    if "$" not in template:
        return template
    text = match.string
    out: list[str] = []
    index = 0
    while index < len(template):
        char = template[index]
        if char == "$" and index + 1 < len(template):
            follower = template[index + 1]
            if follower == "$":
                out.append("$")
                index += 2
                continue
            if follower == "&":
                out.append(match.group())
                index += 2
                continue
            if follower == "`":
                out.append(text[: match.start()])
                index += 2
                continue
            if follower == "'":
                out.append(text[match.end() :])
                index += 2
                continue
        out.append(char)
        index += 1
    return "".join(out)


def to_js_string(value: object) -> str:
    """``String(value)`` / template-literal conversion for JSON values (``None`` is ``null``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return str(number_or_int(value))
    if isinstance(value, list):
        return ",".join("" if item is None else to_js_string(item) for item in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


def json_value(value: Any) -> Any:
    """Normalise a JSON value so integral floats compare and print like JavaScript numbers."""
    if isinstance(value, float):
        return number_or_int(value)
    if isinstance(value, Mapping):
        return {key: json_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_value(item) for item in value]
    return value
