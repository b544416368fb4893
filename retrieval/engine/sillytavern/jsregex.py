"""Regex keys: SillyTavern's ``/pattern/flags`` keys as JavaScript regexes, run on Python ``re``.

SillyTavern turns a key shaped like ``/pattern/flags`` into ``new RegExp(pattern,
flags)`` and tests it against the raw scan text. JavaScript and Python regexes
look alike but differ in many small ways: ``\\w``/``\\d``/``\\b`` are ASCII-only
in JavaScript, ``$`` never matches before a final newline, ``.`` excludes
``\\r`` and the Unicode line separators, ``[]`` matches nothing, ``{,3}`` is a
literal, Python accepts ``(?i)``, ``a++`` and ``\\A`` where JavaScript rejects
or reads them differently, case-insensitive matching folds different
characters together (``ſ``/``s``, Kelvin ``K``/``k``), and without the ``u``
flag JavaScript matches UTF-16 code units. This module parses the JavaScript
syntax itself and emits an equivalent Python pattern, so what JavaScript
rejects is rejected here too (SillyTavern then treats the key as plain text).

Case-insensitivity is compiled into the pattern (each literal and class is
expanded to the characters JavaScript's ``Canonicalize`` makes equal), so
Python's own ``re.IGNORECASE`` is never used, except around backreferences.

Valid JavaScript that Python cannot express (variable-width lookbehind, a
backreference inside a lookbehind, ``\\p{Script=...}`` and other properties
besides general categories) compiles to a regex that never matches;
``JsRegex.supported`` says so.
"""
from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

from ..regex_budget import bounded_search
from .jscompat import JS_WHITESPACE, to_utf16_units, utf16_length


class JsRegexSyntaxError(ValueError):
    """JavaScript's ``RegExp`` constructor would throw a SyntaxError."""


class JsRegexUnsupported(ValueError):
    """Valid JavaScript, but not expressible with Python's ``re``."""


@dataclass(frozen=True, kw_only=True, eq=False)
class JsRegex:
    """A compiled regex key.

    ``required_literal`` is a piece of text every match must contain, and
    ``prefix_literal`` one every match starts with (both compared after
    ``str.casefold`` when ``ignore_case``): the engine skips the regex when the
    literal is absent, and tries it only where the prefix occurs.
    """

    source: str
    flags: str
    python_source: str | None
    ignore_case: bool
    unicode: bool
    sticky: bool
    required_literal: str | None
    prefix_literal: str | None = None
    # The key as written (``/pattern/flags``), when it came from one.
    written: str | None = None

    @cached_property
    def python_pattern(self) -> re.Pattern[str] | None:
        """The translated pattern, compiled on first use; None when Python cannot run it."""
        if self.python_source is None:
            return None
        try:
            return re.compile(self.python_source)
        except (re.error, OverflowError, RecursionError):
            return None

    @property
    def supported(self) -> bool:
        return self.python_pattern is not None

    def test(self, text: str) -> bool:
        """``RegExp.prototype.test`` on a fresh regex (``lastIndex`` 0)."""
        return self.test_view(TextView(text))

    def test_view(self, view: TextView, start: int = 0) -> bool:
        """``test`` on a cached text, trying only where the prefix literal occurs.

        ``start`` is an offset before which the required literal is known to be absent;
        it only bounds the search when the prefix is that literal. Runs under the turn's
        regex budget (``regex_budget``): a key that overruns counts as not found.
        """
        pattern = self.python_pattern
        if pattern is None:
            return False
        key = self.key
        if self.prefix_literal != self.required_literal:
            start = 0
        if self.sticky:  # `y`: the match must start at lastIndex, which is 0.
            return bool(bounded_search(pattern, view.units(self.unicode), key=key, anchored=True))
        prefix = self.prefix_literal
        if prefix and (self.unicode or not view.has_astral()):
            searched = view.casefolded() if self.ignore_case else view.text
            if searched is not None:  # None: casefolding changed offsets
                position = searched.find(prefix, start)
                while position != -1:
                    hit = bounded_search(pattern, view.text, position, key=key, anchored=True)
                    if hit is None:
                        return False
                    if hit:
                        return True
                    position = searched.find(prefix, position + 1)
                return False
        return bool(bounded_search(pattern, view.units(self.unicode), key=key))

    @property
    def key(self) -> str:
        """The key as the request log and the editor name it."""
        return self.written if self.written is not None else f"/{self.source}/{self.flags}"


class TextView:
    """A scan text with the derived forms regex keys need, each computed once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._astral: bool | None = None
        self._units: str | None = None
        self._casefolded: str | None = None
        self._casefold_done = False

    def has_astral(self) -> bool:
        if self._astral is None:
            self._astral = not self.text.isascii() and utf16_length(self.text) != len(self.text)
        return self._astral

    def units(self, unicode: bool) -> str:
        """The text as the regex sees it: code points with `u`, UTF-16 code units without."""
        if unicode or not self.has_astral():
            return self.text
        if self._units is None:
            self._units = to_utf16_units(self.text)
        return self._units

    def casefolded(self) -> str | None:
        """``text.casefold()`` when it keeps every offset (no character expands), else None."""
        if not self._casefold_done:
            text = self.text
            folded = text.lower() if text.isascii() else text.casefold()
            self._casefolded = folded if len(folded) == len(text) else None
            self._casefold_done = True
        return self._casefolded


_KEY_SHAPE = re.compile(r"/([\s\S]+?)/([gimsuy]*)")
_UNESCAPED_SLASH = re.compile(r"(?:^|[^\\])/")


@lru_cache(maxsize=65536)
def parse_regex_key(key: str) -> JsRegex | None:
    """SillyTavern's ``parseRegexFromString``: a ``JsRegex``, or ``None`` for a plain-text key."""
    shape = _KEY_SHAPE.fullmatch(key)
    if shape is None:
        return None
    pattern, flags = shape.group(1), shape.group(2)
    if _UNESCAPED_SLASH.search(pattern):
        return None
    # Quirk: a string replace, so only the first `\/` is unescaped.
    pattern = pattern.replace("\\/", "/", 1)
    try:
        return replace(compile_js_regex(pattern, flags), written=key)
    except JsRegexSyntaxError:
        return None


def compile_js_regex(pattern: str, flags: str) -> JsRegex:
    """Translate a JavaScript regex; raises ``JsRegexSyntaxError`` where JavaScript would throw."""
    if len(set(flags)) != len(flags) or any(flag not in "dgimsuyv" for flag in flags):
        raise JsRegexSyntaxError(f"invalid flags {flags!r}")
    if "v" in flags or "d" in flags:
        raise JsRegexSyntaxError("flags outside SillyTavern's set")
    parser = _Parser(pattern, flags)
    python_source: str | None
    literal: str | None
    prefix: str | None
    try:
        alternatives = parser.parse()
    except RecursionError:
        raise JsRegexUnsupportedSyntax from None
    if parser.unsupported:
        python_source, literal, prefix = None, None, None
    else:
        emitter = _Emitter(ignore_case=parser.ignore_case, unicode=parser.unicode)
        python_source = emitter.alternatives(alternatives)
        literal, prefix = _literals(alternatives, ignore_case=parser.ignore_case)
    return JsRegex(
        source=pattern,
        flags=flags,
        python_source=python_source,
        ignore_case=parser.ignore_case,
        unicode=parser.unicode,
        sticky="y" in flags,
        required_literal=literal,
        prefix_literal=prefix,
    )


class JsRegexUnsupportedSyntax(JsRegexSyntaxError):
    """Too deeply nested to parse here (JavaScript would also give up: treat as plain text)."""


# --- syntax tree -------------------------------------------------------------

Ranges = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class _Char:
    code: int


@dataclass(frozen=True)
class _Set:
    """A one-character matcher: code point ranges, possibly negated."""

    ranges: Ranges
    negated: bool = False


@dataclass(frozen=True)
class _Raw:
    """Python source emitted as is (assertions, backreferences)."""

    python: str
    zero_width: bool = False
    case_sensitive_only: bool = True


@dataclass(frozen=True)
class _WordBoundary:
    negated: bool


@dataclass(frozen=True)
class _Group:
    kind: str  # "capture", "named", "plain", "ahead", "not_ahead", "behind", "not_behind"
    alternatives: list[list[_Node]]
    python_name: str | None = None


@dataclass(frozen=True)
class _Quantified:
    node: _Node
    minimum: int
    maximum: int | None
    lazy: bool


_Node = _Char | _Set | _Raw | _WordBoundary | _Group | _Quantified

_MAX_CODE = 0x10FFFF
_MAX_UNIT = 0xFFFF
_PYTHON_MAXREPEAT = 4294967295
_LINE_TERMINATORS: Ranges = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
_SYNTAX_CHARACTERS = set("^$\\.*+?()[]{}|/")
_CONTROL_ESCAPES = {"f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
_BRACED_QUANTIFIER = re.compile(r"\{(\d+)(,(\d*))?\}")
_GROUP_NAME = re.compile(r"[A-Za-z_$\u00aa-\uffff][\w$\u00aa-\uffff\u200c\u200d]*")


def _merge(ranges: list[tuple[int, int]]) -> Ranges:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            if high > merged[-1][1]:
                merged[-1] = (merged[-1][0], high)
        else:
            merged.append((low, high))
    return tuple(merged)


def _complement(ranges: Ranges) -> Ranges:
    result: list[tuple[int, int]] = []
    next_code = 0
    for low, high in _merge(list(ranges)):
        if low > next_code:
            result.append((next_code, low - 1))
        next_code = max(next_code, high + 1)
    if next_code <= _MAX_CODE:
        result.append((next_code, _MAX_CODE))
    return tuple(result)


def _to_ranges(codes: set[int]) -> Ranges:
    return _merge([(code, code) for code in codes])


_DIGIT: Ranges = ((0x30, 0x39),)
_WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_SPACE: Ranges = _to_ranges({ord(ch) for ch in JS_WHITESPACE})

_GENERAL_CATEGORY_ALIASES = {
    "Cased_Letter": "LC", "Close_Punctuation": "Pe", "Connector_Punctuation": "Pc", "Control": "Cc",
    "cntrl": "Cc", "Currency_Symbol": "Sc", "Dash_Punctuation": "Pd", "Decimal_Number": "Nd", "digit": "Nd",
    "Enclosing_Mark": "Me", "Final_Punctuation": "Pf", "Format": "Cf", "Initial_Punctuation": "Pi",
    "Letter": "L", "Letter_Number": "Nl", "Line_Separator": "Zl", "Lowercase_Letter": "Ll", "Mark": "M",
    "Combining_Mark": "M", "Math_Symbol": "Sm", "Modifier_Letter": "Lm", "Modifier_Symbol": "Sk",
    "Nonspacing_Mark": "Mn", "Number": "N", "Open_Punctuation": "Ps", "Other": "C", "Other_Letter": "Lo",
    "Other_Number": "No", "Other_Punctuation": "Po", "Other_Symbol": "So", "Paragraph_Separator": "Zp",
    "Private_Use": "Co", "Punctuation": "P", "punct": "P", "Separator": "Z", "Space_Separator": "Zs",
    "Spacing_Mark": "Mc", "Surrogate": "Cs", "Symbol": "S", "Titlecase_Letter": "Lt", "Unassigned": "Cn",
    "Uppercase_Letter": "Lu",
}
_GENERAL_CATEGORIES = {
    "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf",
    "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn",
}


@lru_cache(maxsize=1)
def _category_table() -> dict[str, list[tuple[int, int]]]:
    table: dict[str, list[tuple[int, int]]] = {}
    previous = ""
    for code in range(_MAX_CODE + 1):
        category = unicodedata.category(chr(code))
        ranges = table.setdefault(category, [])
        if category == previous:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
        previous = category
    return table


def _property_ranges(expression: str) -> Ranges:
    """``\\p{...}`` for general categories; raises JsRegexUnsupported for other properties."""
    name, _, value = expression.partition("=")
    if value:
        if name not in ("General_Category", "gc"):
            raise JsRegexUnsupported(f"property {name!r}")
        expression = value
    short = _GENERAL_CATEGORY_ALIASES.get(expression, expression)
    if short == "Any":
        return ((0, _MAX_CODE),)
    if short == "ASCII":
        return ((0, 0x7F),)
    table = _category_table()
    if short == "Assigned":
        return _complement(tuple(table.get("Cn", [])))
    if short == "LC":
        members = ["Lu", "Ll", "Lt"]
    elif short in _GENERAL_CATEGORIES:
        members = [short]
    elif len(short) == 1 and short in "LMNPSZC":
        members = [category for category in _GENERAL_CATEGORIES if category.startswith(short)]
    else:
        raise JsRegexUnsupported(f"property {expression!r}")
    return _merge([pair for member in members for pair in table.get(member, [])])


# --- JavaScript case-insensitivity ---------------------------------------------


@lru_cache(maxsize=2)
def _case_table(unicode: bool) -> tuple[dict[int, int], dict[int, tuple[int, ...]], list[int]]:
    """JavaScript's ``Canonicalize`` for /i: (canonical value, its preimages, sorted cased code points).

    Without ``u``: the single-unit ``toUpperCase`` of a code unit, unless that
    maps a non-ASCII unit to ASCII. With ``u``: simple case folding.
    """
    canonical: dict[int, int] = {}
    # No character above plane 1 has a case mapping.
    for code in range(0x20000 if unicode else _MAX_UNIT + 1):
        char = chr(code)
        if unicode:
            folded = char.casefold()
            if len(folded) != 1:
                lowered = char.lower()  # the simple ("S") folding, where one exists
                folded = lowered if len(lowered) == 1 else char
            value = ord(folded)
        else:
            upper = char.upper()
            value = ord(upper) if len(upper) == 1 and not (code >= 128 and ord(upper) < 128) else code
        if value != code:
            canonical[code] = value
    preimages: dict[int, list[int]] = {}
    for code, value in canonical.items():
        preimages.setdefault(value, [value]).append(code)
    cased = sorted(set(canonical) | set(preimages))
    return canonical, {value: tuple(codes) for value, codes in preimages.items()}, cased


def _case_closure(ranges: Ranges, unicode: bool) -> Ranges:
    """Every character JavaScript's /i matching makes equal to some member of ``ranges``."""
    canonical, preimages, cased = _case_table(unicode)
    values: set[int] = set()
    for low, high in ranges:
        for code in cased[bisect_left(cased, low) : bisect_right(cased, high)]:
            values.add(canonical.get(code, code))
    if not values:
        return ranges
    extra = [(code, code) for value in values for code in preimages.get(value, (value,))]
    return _merge(list(ranges) + extra)


# --- parser --------------------------------------------------------------------


class _Parser:
    """Recursive descent over ECMAScript 2023 pattern syntax (with Annex B outside `u` mode)."""

    def __init__(self, source: str, flags: str) -> None:
        self.unicode = "u" in flags
        self.ignore_case = "i" in flags
        self.multiline = "m" in flags
        self.dotall = "s" in flags
        self.text = source if self.unicode else to_utf16_units(source)
        self.pos = 0
        self.group_count, self.group_names = self._prescan()
        self.seen_names: set[str] = set()
        self.captures_seen = 0
        self.lookbehind_depth = 0
        self.unsupported = False  # valid JavaScript Python cannot run; parsing continues for syntax errors

    def _peek(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.text[index] if 0 <= index < len(self.text) else ""

    def _error(self, message: str) -> JsRegexSyntaxError:
        return JsRegexSyntaxError(f"{message} at {self.pos} in /{self.text}/")

    def _prescan(self) -> tuple[int, dict[str, int]]:
        """Count capturing groups and number the named ones, as JavaScript does before parsing."""
        count, index, text = 0, 0, self.text
        names: dict[str, int] = {}
        in_class = False
        while index < len(text):
            char = text[index]
            if char == "\\":
                index += 2
                continue
            if in_class:
                in_class = char != "]"
            elif char == "[":
                in_class = True
            elif char == "(":
                if text.startswith("?", index + 1):
                    if text.startswith("?<", index + 1) and text[index + 3 : index + 4] not in ("=", "!"):
                        end = text.find(">", index + 3)
                        if end != -1:
                            count += 1
                            names.setdefault(text[index + 3 : end], count)
                else:
                    count += 1
            index += 1
        return count, names

    def parse(self) -> list[list[_Node]]:
        alternatives = self._disjunction()
        if self.pos < len(self.text):
            raise self._error("unmatched ')'")
        return alternatives

    def _disjunction(self) -> list[list[_Node]]:
        alternatives = [self._alternative()]
        while self._peek() == "|":
            self.pos += 1
            alternatives.append(self._alternative())
        return alternatives

    def _alternative(self) -> list[_Node]:
        nodes: list[_Node] = []
        while self.pos < len(self.text) and self._peek() not in "|)":
            nodes.append(self._term())
        return nodes

    def _quantifier_here(self) -> re.Match[str] | str | None:
        char = self._peek()
        if char in ("*", "+", "?"):
            return char
        if char == "{":
            return _BRACED_QUANTIFIER.match(self.text, self.pos)
        return None

    def _forbid_quantifier(self) -> None:
        if self._quantifier_here() is not None:
            raise self._error("nothing to repeat")

    def _term(self) -> _Node:
        char = self._peek()
        if char == "^":
            self.pos += 1
            self._forbid_quantifier()
            if self.multiline:
                return _Raw("(?:\\A|(?<=[\\n\\r\\u2028\\u2029]))", zero_width=True)
            return _Raw("\\A", zero_width=True)
        if char == "$":
            self.pos += 1
            self._forbid_quantifier()
            if self.multiline:
                return _Raw("(?=[\\n\\r\\u2028\\u2029]|\\Z)", zero_width=True)
            return _Raw("\\Z", zero_width=True)
        if char == "\\" and self._peek(1) in ("b", "B") and self._peek(1):
            self.pos += 2
            self._forbid_quantifier()
            return _WordBoundary(negated=self._peek(-1) == "B")
        if self.text.startswith("(?=", self.pos) or self.text.startswith("(?!", self.pos):
            group = self._group()
            if self.unicode:
                self._forbid_quantifier()
                return group
            return self._quantified(group)  # Annex B: lookaheads may be quantified.
        if self.text.startswith("(?<=", self.pos) or self.text.startswith("(?<!", self.pos):
            group = self._group()
            self._forbid_quantifier()
            return group
        return self._quantified(self._atom())

    def _quantified(self, node: _Node) -> _Node:
        found = self._quantifier_here()
        if found is None:
            return node
        if isinstance(found, str):
            self.pos += 1
            minimum, maximum = {"*": (0, None), "+": (1, None), "?": (0, 1)}[found]
        else:
            self.pos = found.end()
            minimum = int(found.group(1))
            maximum = minimum if found.group(2) is None else (int(found.group(3)) if found.group(3) else None)
            if maximum is not None and maximum < minimum:
                raise self._error("numbers out of order in {} quantifier")
        lazy = self._peek() == "?"
        if lazy:
            self.pos += 1
        self._forbid_quantifier()
        if minimum >= _PYTHON_MAXREPEAT:
            self.unsupported = True
            minimum = 0
        if maximum is not None and maximum >= _PYTHON_MAXREPEAT:
            maximum = None
        return _Quantified(node, minimum, maximum, lazy)

    def _atom(self) -> _Node:
        char = self._peek()
        if char == ".":
            self.pos += 1
            return _Set(((0, _MAX_CODE),)) if self.dotall else _Set(_LINE_TERMINATORS, negated=True)
        if char == "(":
            return self._group()
        if char == "[":
            return self._class()
        if char == "\\":
            return self._atom_escape()
        if char in ("*", "+", "?"):
            raise self._error("nothing to repeat")
        if char == "{":
            if self.unicode or _BRACED_QUANTIFIER.match(self.text, self.pos):
                raise self._error("nothing to repeat" if not self.unicode else "lone quantifier brackets")
        if char in ("}", "]") and self.unicode:
            raise self._error("lone bracket")
        self.pos += 1
        return _Char(ord(char))

    def _group(self) -> _Group:
        self.pos += 1  # "("
        kind, python_name = "capture", None
        if self._peek() == "?":
            for prefix, name in (("?:", "plain"), ("?=", "ahead"), ("?!", "not_ahead"),
                                 ("?<=", "behind"), ("?<!", "not_behind")):
                if self.text.startswith(prefix, self.pos):
                    kind = name
                    self.pos += len(prefix)
                    break
            else:
                if not self.text.startswith("?<", self.pos):
                    raise self._error("invalid group")
                end = self.text.find(">", self.pos + 2)
                name_text = self.text[self.pos + 2 : end] if end != -1 else ""
                if not name_text or not _GROUP_NAME.fullmatch(name_text) or name_text in self.seen_names:
                    raise self._error("invalid capture group name")
                self.captures_seen += 1
                python_name = f"g{self.captures_seen}"  # JS names need not be Python identifiers
                self.seen_names.add(name_text)
                self.pos = end + 1
                kind = "named"
        if kind == "capture":
            self.captures_seen += 1
        behind = kind in ("behind", "not_behind")
        self.lookbehind_depth += behind
        alternatives = self._disjunction()
        self.lookbehind_depth -= behind
        if self._peek() != ")":
            raise self._error("unterminated group")
        self.pos += 1
        return _Group(kind, alternatives, python_name)

    def _read_hex(self, count: int) -> int | None:
        digits = self.text[self.pos : self.pos + count]
        if len(digits) == count and all(ch in "0123456789abcdefABCDEF" for ch in digits):
            self.pos += count
            return int(digits, 16)
        return None

    def _legacy_octal(self) -> int:
        first = self._peek()
        self.pos += 1
        value = int(first)
        for _ in range(2 if first in "0123" else 1):
            if self._peek() and self._peek() in "01234567":
                value = value * 8 + int(self._peek())
                self.pos += 1
            else:
                break
        return value

    def _unicode_escape(self) -> int | None:
        """After `\\u`: a code unit (or code point in `u` mode), or None if malformed."""
        if self.unicode and self._peek() == "{":
            end = self.text.find("}", self.pos)
            digits = self.text[self.pos + 1 : end] if end != -1 else ""
            if digits and all(ch in "0123456789abcdefABCDEF" for ch in digits) and int(digits, 16) <= _MAX_CODE:
                self.pos = end + 1
                return int(digits, 16)
            return None
        unit = self._read_hex(4)
        if unit is not None and self.unicode and 0xD800 <= unit <= 0xDBFF and self.text.startswith("\\u", self.pos):
            saved = self.pos
            self.pos += 2
            low = self._read_hex(4)
            if low is not None and 0xDC00 <= low <= 0xDFFF:
                return 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
            self.pos = saved
        return unit

    def _property(self, negated: bool) -> Ranges:
        if self._peek() != "{":
            raise self._error("invalid property name")
        end = self.text.find("}", self.pos)
        if end == -1:
            raise self._error("invalid property name")
        expression = self.text[self.pos + 1 : end]
        self.pos = end + 1
        if not re.fullmatch(r"[A-Za-z_]+(=[A-Za-z0-9_]+)?", expression):
            raise self._error("invalid property name")
        try:
            ranges = _property_ranges(expression)
        except JsRegexUnsupported:
            self.unsupported = True
            return ()
        return _complement(ranges) if negated else ranges

    def _escape_set(self, letter: str) -> Ranges:
        base = {"d": _DIGIT, "w": _WORD, "s": _SPACE}[letter.lower()]
        if letter == "W" and self.unicode and self.ignore_case:
            # With `u` and `i`, \w also holds "ſ" and Kelvin "K", so \W leaves them out.
            base = _case_closure(base, True)
        return _complement(base) if letter.isupper() else base

    def _atom_escape(self) -> _Node:
        self.pos += 1  # backslash
        char = self._peek()
        if not char:
            raise self._error("\\ at end of pattern")
        if char in "dDwWsS":
            self.pos += 1
            return _Set(self._escape_set(char))
        if char in "pP" and self.unicode:
            self.pos += 1
            return _Set(self._property(char == "P"))
        if char.isdigit() and char != "0":
            start = self.pos
            while self._peek().isdigit():
                self.pos += 1
            number = int(self.text[start : self.pos])
            if number <= self.group_count:
                return self._backreference(f"{number}", f"\\{number}")
            if self.unicode:
                raise self._error("invalid escape")
            self.pos = start
            if char in "89":
                self.pos += 1
                return _Char(ord(char))
            return _Char(self._legacy_octal())
        if char == "0":
            if not self._peek(1).isdigit():
                self.pos += 1
                return _Char(0)
            if self.unicode:
                raise self._error("invalid decimal escape")
            return _Char(self._legacy_octal())
        if char == "k" and (self.unicode or self.group_names):
            end = self.text.find(">", self.pos)
            if not self.text.startswith("k<", self.pos) or end == -1:
                raise self._error("invalid named reference")
            name = self.text[self.pos + 2 : end]
            if name not in self.group_names:
                raise self._error("invalid named capture referenced")
            self.pos = end + 1
            python_name = f"g{self.group_names[name]}"
            return self._backreference(python_name, f"(?P={python_name})")
        if char in _CONTROL_ESCAPES:
            self.pos += 1
            return _Char(_CONTROL_ESCAPES[char])
        if char == "c":
            follower = self._peek(1)
            if follower.isascii() and follower.isalpha():
                self.pos += 2
                return _Char(ord(follower) % 32)
            if self.unicode:
                raise self._error("invalid unicode escape")
            return _Char(ord("\\"))  # Annex B: "\c" not followed by a letter is a literal backslash.
        if char == "x":
            self.pos += 1
            value = self._read_hex(2)
            if value is not None:
                return _Char(value)
            if self.unicode:
                raise self._error("invalid escape")
            return _Char(ord("x"))
        if char == "u":
            self.pos += 1
            value = self._unicode_escape()
            if value is not None:
                return _Char(value)
            if self.unicode:
                raise self._error("invalid unicode escape")
            return _Char(ord("u"))
        if self.unicode and char not in _SYNTAX_CHARACTERS:
            raise self._error("invalid escape")
        self.pos += 1
        return _Char(ord(char))  # identity escape: `\A` is a literal "A" in JavaScript.

    def _backreference(self, group: str, reference: str) -> _Raw:
        if self.lookbehind_depth:
            self.unsupported = True  # JavaScript matches lookbehind right to left; Python cannot
        # A group that has not matched matches the empty string in JavaScript.
        return _Raw(f"(?({group}){reference})", case_sensitive_only=False)

    def _class(self) -> _Set:
        self.pos += 1  # "["
        negated = self._peek() == "^"
        if negated:
            self.pos += 1
        members: list[tuple[int, int]] = []
        while True:
            if self.pos >= len(self.text):
                raise self._error("unterminated character class")
            if self._peek() == "]":
                self.pos += 1
                break
            first = self._class_atom()
            if self._peek() == "-" and self._peek(1) not in ("]", ""):
                self.pos += 1
                second = self._class_atom()
                if isinstance(first, tuple) or isinstance(second, tuple):
                    if self.unicode:
                        raise self._error("invalid character class")
                    # Annex B: a class escape cannot bound a range; "-" is then a literal.
                    members.extend([*_as_ranges(first), (0x2D, 0x2D), *_as_ranges(second)])
                    continue
                if first > second:
                    raise self._error("range out of order in character class")
                members.append((first, second))
            elif isinstance(first, tuple):
                members.extend(first)
            else:
                members.append((first, first))
        return _Set(_merge(members), negated)

    def _class_atom(self) -> int | Ranges:
        """A single code point, or the ranges of a class escape (``\\d``, ``\\p{..}``...)."""
        char = self._peek()
        if char != "\\":
            self.pos += 1
            return ord(char)
        self.pos += 1
        char = self._peek()
        if not char:
            raise self._error("\\ at end of pattern")
        if char == "b":
            self.pos += 1
            return 0x08
        if char == "-" and self.unicode:
            self.pos += 1
            return 0x2D
        if char in "dDwWsS":
            self.pos += 1
            return self._escape_set(char)
        if char in "pP" and self.unicode:
            self.pos += 1
            return self._property(char == "P")
        if char == "c":
            follower = self._peek(1)
            if follower.isascii() and (
                follower.isalpha() or (not self.unicode and (follower.isdigit() or follower == "_"))
            ):
                self.pos += 2
                return ord(follower) % 32
            if self.unicode:
                raise self._error("invalid class escape")
            return ord("\\")
        if char.isdigit():
            if char == "0" and not self._peek(1).isdigit():
                self.pos += 1
                return 0
            if self.unicode:
                raise self._error("invalid class escape")
            if char in "89":
                self.pos += 1
                return ord(char)
            return self._legacy_octal()
        if char in _CONTROL_ESCAPES:
            self.pos += 1
            return _CONTROL_ESCAPES[char]
        if char == "x":
            self.pos += 1
            value = self._read_hex(2)
            if value is None:
                if self.unicode:
                    raise self._error("invalid escape")
                return ord("x")
            return value
        if char == "u":
            self.pos += 1
            value = self._unicode_escape()
            if value is None:
                if self.unicode:
                    raise self._error("invalid unicode escape")
                return ord("u")
            return value
        if char == "k" and self.group_names and not self.unicode:
            raise self._error("invalid escape")
        if self.unicode and char not in _SYNTAX_CHARACTERS:
            raise self._error("invalid escape")
        self.pos += 1
        return ord(char)


def _as_ranges(item: int | Ranges) -> Ranges:
    return item if isinstance(item, tuple) else ((item, item),)


# --- emission --------------------------------------------------------------------


def _escape(code: int) -> str:
    char = chr(code)
    if char.isascii() and char.isalnum():
        return char
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _class_source(ranges: Ranges) -> str:
    return "".join(_escape(low) if low == high else f"{_escape(low)}-{_escape(high)}" for low, high in ranges)


class _Emitter:
    def __init__(self, *, ignore_case: bool, unicode: bool) -> None:
        self.ignore_case = ignore_case
        self.unicode = unicode

    def alternatives(self, alternatives: list[list[_Node]]) -> str:
        return "|".join("".join(self.node(node) for node in alternative) for alternative in alternatives)

    def _set(self, ranges: Ranges, negated: bool) -> str:
        if self.ignore_case:
            ranges = _case_closure(ranges, self.unicode)
        if not ranges:
            return "[\\x00-\\U0010ffff]" if negated else "(?!)"
        if not negated and len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            return _escape(ranges[0][0])
        return f"[{'^' if negated else ''}{_class_source(ranges)}]"

    def node(self, node: _Node) -> str:
        if isinstance(node, _Char):
            return self._set(((node.code, node.code),), False)
        if isinstance(node, _Set):
            return self._set(node.ranges, node.negated)
        if isinstance(node, _Raw):
            # Backreferences compare case-insensitively under /i (Python's folding: close enough).
            return node.python if node.case_sensitive_only or not self.ignore_case else f"(?i:{node.python})"
        if isinstance(node, _WordBoundary):
            word = self._set(_WORD, False)  # with `u` and `i`, \w also takes "ſ" and Kelvin "K"
            if node.negated:
                return f"(?:(?<={word})(?={word})|(?<!{word})(?!{word}))"
            return f"(?:(?<={word})(?!{word})|(?<!{word})(?={word}))"
        if isinstance(node, _Group):
            prefix = {
                "capture": "(", "plain": "(?:", "ahead": "(?=", "not_ahead": "(?!",
                "behind": "(?<=", "not_behind": "(?<!",
            }.get(node.kind, f"(?P<{node.python_name}>")
            return f"{prefix}{self.alternatives(node.alternatives)})"
        inner = node.node
        if isinstance(inner, _Group) and inner.kind in ("ahead", "not_ahead"):
            # A quantified lookahead (Annex B) either runs once or is skippable.
            return "" if node.minimum == 0 else self.node(inner)
        if node.maximum is None:
            quantifier = {0: "*", 1: "+"}.get(node.minimum, f"{{{node.minimum},}}")
        elif node.minimum == node.maximum:
            quantifier = f"{{{node.minimum}}}"
        elif (node.minimum, node.maximum) == (0, 1):
            quantifier = "?"
        else:
            quantifier = f"{{{node.minimum},{node.maximum}}}"
        atom = self.node(inner)
        if not isinstance(inner, (_Char, _Set, _Group)):
            atom = f"(?:{atom})"
        return f"{atom}{quantifier}{'?' if node.lazy else ''}"


# --- literals for the prefilter ---------------------------------------------------


def _literals(alternatives: list[list[_Node]], *, ignore_case: bool) -> tuple[str | None, str | None]:
    """(required, prefix): the longest literal run every match contains, and the run every match starts with.

    Runs stop at "\\n" and "\\x01" (the scan buffer's message separator), so a
    literal never straddles two messages and can be looked up per message.
    Both are casefolded under ``i`` (JavaScript's /i equivalences are a subset
    of ``casefold`` equality, so the literal stays a necessary condition).
    """
    if len(alternatives) != 1:
        return None, None
    runs: list[str] = []
    current: list[str] = []
    prefix: str | None = None
    clean = True  # nothing but zero-width nodes before the current run

    def flush() -> None:
        nonlocal clean, prefix
        if current:
            if clean and not runs:
                prefix = "".join(current)
            runs.append("".join(current))
            current.clear()
        clean = False

    def walk(nodes: list[_Node]) -> None:
        for node in nodes:
            if isinstance(node, _Char) and _literal_eligible(node.code):
                current.append(chr(node.code))
            elif isinstance(node, _Group) and node.kind in ("capture", "plain", "named") and len(node.alternatives) == 1:
                walk(node.alternatives[0])
            elif (
                isinstance(node, _Quantified) and node.minimum >= 1
                and isinstance(node.node, _Char) and _literal_eligible(node.node.code)
            ):
                current.append(chr(node.node.code))
                flush()
            elif isinstance(node, (_WordBoundary, _Raw)) and (not isinstance(node, _Raw) or node.zero_width):
                continue  # zero-width: neighbours stay adjacent
            elif isinstance(node, _Group) and node.kind in ("ahead", "not_ahead", "behind", "not_behind"):
                continue
            else:
                flush()

    walk(alternatives[0])
    flush()
    required = max(runs, key=len) if runs else None
    if ignore_case:
        return (required.casefold() if required else None), (prefix.casefold() if prefix else None)
    return required, prefix


def _literal_eligible(code: int) -> bool:
    return code not in (0x0A, 0x01) and not 0xD800 <= code <= 0xDFFF
