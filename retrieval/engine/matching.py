"""Literal and regex key matching over many keys at once.

One compiled :class:`KeyMatcher` holds every key of every entry of a book set
in a single Aho-Corasick automaton (``ahocorasick-rs``), so a scan costs one
pass over the text however many keys there are. A per-entry loop is O(keys x
text) and a single regex alternation misses overlapping keys; neither is used.

Contract
--------
* Build: ``KeyMatcher([KeyPattern(text=..., ...), ...], fold_width=...)``.
  The matcher answers with **indices into that list**; what a key means
  (primary key, secondary key, alias, title) is the caller's business.
* Scan: ``matcher.find(text)`` -> indices of keys present in ``text``;
  ``matcher.find_first(texts)`` -> ``{key index: index of the first text that
  contains it}``. Give ``texts`` newest-first and the value is how many
  messages back the key was last said, which is what scan depths need.
  A key never spans two texts. (Internally all texts go through the
  automaton in one call, joined by a separator no hit may cross, and the
  folded form of each distinct text is cached: a chat is re-scanned every
  turn with almost every message unchanged.)
* Folding: unless a key is case-sensitive, key and text are compared after
  ``str.casefold`` (accented capitals fold too: ``ORÁCULO`` = ``oráculo``).
  Text is NFC-normalised (composed and decomposed accents are the same
  letter); with ``fold_width=True`` it is NFKC-normalised instead, so
  full-width and half-width forms match (``ｍｉｔｈｒｉｌ`` = ``mithril``,
  ``ｶﾀﾅ`` = ``カタナ``; server profile, S-3).
* Whole words (C-8): a whole-word key must not have a letter or digit of a
  space-separated script right before or after it: ``fuego`` does not match in
  ``cortafuegos`` or ``fogueo``. Scripts written without spaces (Han, kana,
  Hangul, Thai, ...) are always matched as substrings, on the key side and as
  neighbours, so ``小红帽`` is found inside Chinese text. The check is per key
  edge: an edge that is punctuation (``/a+/``) needs no boundary.
* Regex keys: with ``regex=True`` a key shaped ``/pattern/flags`` is a Python
  regular expression (flags ``i``, ``m``, ``s``; JavaScript's ``g``, ``u``,
  ``y`` are accepted and ignored), run on each text separately over the
  NFC text, not case-folded: its own ``i`` flag decides case, and ``^``/``$``
  are a message's start and end (classic).
  Each regex's longest mandatory literal (``kalora`` in ``kalora(s|es)?``)
  joins the automaton as a prefilter, so a regex only runs on the texts that
  contain that literal; the prefilter is a necessary condition, never a
  change of meaning. Regexes without such a literal run on every text. With
  ``regex=False`` the same key is four literal characters (server, S-7). A
  regex that does not compile is matched literally and reported in
  :attr:`KeyMatcher.warnings`.
* Caching: compiling 20,000 keys takes tens of milliseconds, so callers keep
  compiled matchers in a :class:`CompileCache` keyed by book versions
  (:func:`book_set_key`). A matcher also remembers which keys each distinct
  text held (bounded by ``memo_chars`` characters): old messages and entry
  contents are answered without a scan on later turns.

The smart profile reuses this module for W-3 (entries named by title or alias:
whole-word for Latin script, substring for CJK) with ``KeyPattern(text=alias)``
and ``find`` on each of the last messages.
"""
from __future__ import annotations

import re
import threading
import unicodedata
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

import ahocorasick_rs

from .regex_budget import bounded_search
from .values import Book

__all__ = [
    "CompileCache",
    "KeyMatcher",
    "KeyPattern",
    "book_set_key",
    "is_spaceless_char",
    "is_word_char",
    "parse_regex_key",
    "required_literal",
    "text_fold",
]

T = TypeVar("T")
V = TypeVar("V")

# Scripts written without spaces between words: whole-word checks would make
# their keys unmatchable inside running text, so they always match as
# substrings (recipes/README.md, keyword matching). Hangul is spaced, but
# particles attach to nouns ("서울에서"), so it is treated the same way.
_SPACELESS_RANGES: tuple[tuple[int, int], ...] = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x318F),  # Bopomofo, Hangul compatibility Jamo
    (0x31A0, 0x31FF),  # Bopomofo ext., Katakana phonetic ext.
    (0x3400, 0x4DBF),  # CJK ext. A
    (0x4E00, 0x9FFF),  # CJK unified
    (0xA960, 0xA97F),  # Hangul Jamo ext. A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo ext. B
    (0xF900, 0xFAFF),  # CJK compatibility
    (0xFF66, 0xFFDC),  # half-width Katakana and Hangul
    (0x1B000, 0x1B16F),  # Kana supplement/ext.
    (0x20000, 0x3FFFF),  # CJK ext. B and later
)

_REGEX_KEY = re.compile(r"^/(?P<pattern>.+)/(?P<flags>[a-z]*)$", re.DOTALL)
_REGEX_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "g": 0, "u": 0, "y": 0, "d": 0}

_word_cache: dict[str, bool] = {}


def is_spaceless_char(ch: str) -> bool:
    """True for characters of scripts written without spaces (CJK, Thai, ...)."""
    code = ord(ch)
    if code < 0x0E00:
        return False
    return any(lo <= code <= hi for lo, hi in _SPACELESS_RANGES)


def is_word_char(ch: str) -> bool:
    """A letter, digit, underscore or combining mark of a space-separated script.

    Only such characters can glue a key to its neighbour and break a
    whole-word match.
    """
    cached = _word_cache.get(ch)
    if cached is None:
        cached = (ch.isalnum() or ch == "_" or unicodedata.category(ch).startswith("M")) and not is_spaceless_char(ch)
        if len(_word_cache) < 65536:
            _word_cache[ch] = cached
    return cached


def text_fold(text: str, *, casefold: bool = True, fold_width: bool = False) -> str:
    """Normalise text the way keys are compared (see the module contract)."""
    if text.isascii():
        # ASCII is already NFC and NFKC, and casefold equals lower there.
        return text.lower() if casefold else text
    normal = unicodedata.normalize("NFKC" if fold_width else "NFC", text)
    return normal.casefold() if casefold else normal


def parse_regex_key(key: str) -> re.Pattern[str] | None:
    """Compile a ``/pattern/flags`` key; ``None`` when the key is not regex-shaped.

    Raises ``re.error`` for a regex-shaped key that does not compile.
    """
    key = key.strip()
    if not (key.startswith("/") and len(key) > 2):
        return None
    shaped = _REGEX_KEY.match(key)
    if shaped is None or any(flag not in _REGEX_FLAGS for flag in shaped["flags"]):
        return None
    flags = 0
    for flag in shaped["flags"]:
        flags |= _REGEX_FLAGS[flag]
    return re.compile(shaped["pattern"], flags)


_DOTLESS_I = "\u0131"


def _literal_safe(ch: str, ignorecase: bool) -> bool:
    # Under re.IGNORECASE a literal may also match characters that casefold
    # differently. For ASCII the only such pair is "i" / dotless "ı" (handled
    # by searching texts that contain "ı" directly); non-ASCII literals are
    # left out of case-insensitive prefilters to stay sure.
    return not ignorecase or ch.isascii()


def required_literal(regex: re.Pattern[str]) -> str | None:
    """The longest literal every match of ``regex`` must contain, case-folded; ``None`` if shorter than 2.

    Used as a necessary condition only: if a text holds no such literal the
    regex cannot match it, so it is not run. Anything the walk does not
    understand ends a literal run, which can only make the prefilter weaker.
    """
    try:
        from re import _constants as sre, _parser as sre_parse  # type: ignore[attr-defined]

        parsed = sre_parse.parse(regex.pattern, regex.flags)
    except Exception:  # noqa: BLE001 - a private parser: any surprise means "no prefilter"
        return None
    runs: list[str] = []
    repeats = {sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT)}
    zero_width = {sre.AT, sre.ASSERT, sre.ASSERT_NOT}

    def close(run: list[str]) -> list[str]:
        if run:
            runs.append("".join(run))
        return []

    def walk(items: Iterable[tuple[object, object]], ignorecase: bool, run: list[str]) -> list[str]:
        for op, arg in items:
            if op is sre.LITERAL and isinstance(arg, int) and _literal_safe(chr(arg), ignorecase):
                run.append(chr(arg))
            elif op is sre.SUBPATTERN and isinstance(arg, tuple):
                _group, add_flags, _del_flags, inner = arg
                run = walk(inner, ignorecase or bool(add_flags & re.IGNORECASE), run)
            elif op in repeats and isinstance(arg, tuple) and arg[0] >= 1:
                run = close(run)
                close(walk(arg[2], ignorecase, []))  # present at least once, but not next to its neighbours
            elif op in zero_width:
                continue  # consumes nothing, so the literals around it stay adjacent
            else:
                run = close(run)
        return run

    try:
        close(walk(parsed.data, bool(parsed.state.flags & re.IGNORECASE), []))
    except Exception:  # noqa: BLE001
        return None
    best = max(runs, key=len, default="")
    return best.casefold() if len(best) >= 2 else None


class KeyPattern(NamedTuple):
    """One key to look for (immutable; build it with keywords).

    ``whole_words`` applies to edges in space-separated scripts only (see the
    module contract); ``regex`` lets a ``/pattern/flags`` key act as a regex.
    A named tuple rather than a dataclass: a book set holds tens of thousands
    of keys and tuples are several times cheaper to build.
    """

    text: str
    case_sensitive: bool = False
    whole_words: bool = True
    regex: bool = False


@dataclass(slots=True)
class _Pattern:
    """One distinct needle in an automaton and the keys that share it.

    Key lists stay ``None`` until used: a 20,000-key book has as many needles,
    and most carry a single key.
    """

    needle: str
    check_left: bool
    check_right: bool
    substring_keys: list[int] | None = None
    whole_keys: list[int] | None = None
    # regex keys for which this needle is a mandatory literal (prefilter)
    regexes: list[tuple[int, re.Pattern[str]]] | None = None


class _Needle(NamedTuple):
    """A :class:`_Pattern` frozen once the matcher is built.

    A compiled matcher is shared between requests and threads, so nothing in
    it may change after construction; tuples also drop the build-time lists.
    """

    needle: str
    check_left: bool
    check_right: bool
    substring_keys: tuple[int, ...] | None
    whole_keys: tuple[int, ...] | None
    regexes: tuple[tuple[int, re.Pattern[str]], ...] | None

    @classmethod
    def freeze(cls, pattern: _Pattern) -> _Needle:
        return cls(
            pattern.needle,
            pattern.check_left,
            pattern.check_right,
            None if pattern.substring_keys is None else tuple(pattern.substring_keys),
            None if pattern.whole_keys is None else tuple(pattern.whole_keys),
            None if pattern.regexes is None else tuple(pattern.regexes),
        )


class _Automaton:
    """Distinct needles of one text form (case-folded or exact) in one automaton."""

    __slots__ = ("_ac", "_patterns", "casefold")

    def __init__(self, patterns: list[_Pattern], *, casefold: bool) -> None:
        self._patterns = [_Needle.freeze(pattern) for pattern in patterns]
        self.casefold = casefold
        # A contiguous NFA builds in about half the time of a DFA at the same
        # scan speed for 20,000 keys; compile time matters on every book edit.
        self._ac = (
            ahocorasick_rs.AhoCorasick(
                [p.needle for p in patterns],
                implementation=ahocorasick_rs.Implementation.ContiguousNFA,
                store_patterns=False,
            )
            if patterns
            else None
        )

    def __bool__(self) -> bool:
        return self._ac is not None

    def pattern(self, pid: int) -> _Needle:
        return self._patterns[pid]

    def scan(
        self,
        text: str,
        starts: Sequence[int],
        ends: Sequence[int],
        found: list[set[int]],
        prefiltered: list[tuple[int, int]],
    ) -> None:
        """Add to ``found[i]`` every key that text ``i`` holds.

        ``text`` is all texts, folded and joined; text ``i`` spans
        ``starts[i]:ends[i]``. A hit that crosses from one text into the next
        is not a hit. Needles that stand for regex keys are reported in
        ``prefiltered`` as ``(needle, text index)`` pairs, in text order.
        """
        if self._ac is None:
            return
        patterns = self._patterns
        count = len(starts)
        # (needle, text) pairs as one int: the loop runs once per hit.
        done_sub: set[int] = set()
        done_whole: set[int] = set()
        for pid, start, end in self._ac.find_matches_as_indexes(text, overlapping=True):
            where = bisect_right(starts, start) - 1
            if end > ends[where]:
                continue
            tag = pid * count + where
            if tag in done_whole:
                continue
            pattern = patterns[pid]
            if tag not in done_sub:
                done_sub.add(tag)
                if pattern.regexes:
                    prefiltered.append((pid, where))
                if pattern.substring_keys is not None:
                    found[where].update(pattern.substring_keys)
                if pattern.whole_keys is None:
                    done_whole.add(tag)
                    continue
            # Text edges border the separator, which is not a word character.
            if pattern.check_left and start > 0 and is_word_char(text[start - 1]):
                continue
            if pattern.check_right and end < len(text) and is_word_char(text[end]):
                continue
            done_whole.add(tag)
            found[where].update(pattern.whole_keys or ())


class KeyMatcher:
    """A compiled set of keys; immutable after construction and thread-safe."""

    __slots__ = ("_dotless", "_exact", "_fold_width", "_folded", "_known", "_regexes", "keys", "warnings")

    def __init__(self, keys: Sequence[KeyPattern], *, fold_width: bool = False,
                 memo_chars: int | None = None) -> None:
        self.keys: tuple[KeyPattern, ...] = tuple(keys)
        self._fold_width = fold_width
        warnings: list[str] = []
        regexes: list[tuple[int, re.Pattern[str]]] = []
        dotless: list[tuple[int, re.Pattern[str]]] = []
        folded: dict[str, _Pattern] = {}
        exact: dict[str, _Pattern] = {}

        def pattern_for(table: dict[str, _Pattern], needle: str) -> _Pattern:
            found = table.get(needle)
            if found is None:
                first, last = needle[0], needle[-1]
                left = _word_cache.get(first)
                right = _word_cache.get(last)
                found = table[needle] = _Pattern(
                    needle,
                    is_word_char(first) if left is None else left,
                    is_word_char(last) if right is None else right,
                )
            return found

        # This loop runs once per key (20,000 for a big book) on every book
        # edit, so it avoids per-key calls where a check inline will do.
        for index, (text, case_sensitive, whole_words, regex) in enumerate(self.keys):
            stripped = text.strip()
            if regex and stripped.startswith("/"):
                try:
                    compiled = parse_regex_key(stripped)
                except re.error as error:
                    warnings.append(f"regex key {text!r} does not compile ({error}); matched as literal text")
                    compiled = None
                if compiled is not None:
                    # The prefilter holds only where the automaton folds text
                    # the way the regex sees it (NFC, no width folding).
                    literal = None if fold_width else required_literal(compiled)
                    if literal:
                        holder = pattern_for(folded, literal)
                        if holder.regexes is None:
                            holder.regexes = []
                        holder.regexes.append((index, compiled))
                        if "i" in literal:
                            # re.I lets "i" match dotless "ı", which casefold keeps apart.
                            dotless.append((index, compiled))
                    else:
                        regexes.append((index, compiled))
                    continue
            if stripped.isascii():
                needle = stripped if case_sensitive else stripped.lower()
            else:
                needle = text_fold(stripped, casefold=not case_sensitive, fold_width=fold_width)
            if not needle:
                continue
            table = exact if case_sensitive else folded
            pattern = table.get(needle) or pattern_for(table, needle)
            # A key whose edges need no boundary is a substring key even when
            # whole words are asked for (CJK keys, punctuation edges).
            if whole_words and (pattern.check_left or pattern.check_right):
                if pattern.whole_keys is None:
                    pattern.whole_keys = [index]
                else:
                    pattern.whole_keys.append(index)
            elif pattern.substring_keys is None:
                pattern.substring_keys = [index]
            else:
                pattern.substring_keys.append(index)
        self._folded = _Automaton(list(folded.values()), casefold=True)
        self._exact = _Automaton(list(exact.values()), casefold=False)
        self._regexes = tuple(regexes)
        self._dotless = tuple(dotless)
        self.warnings: tuple[str, ...] = tuple(warnings)
        # The only state that changes after construction: a bounded memo of keys per text.
        self._known: TextCache[tuple[int, ...]] = TextCache(limit_chars=memo_chars or KNOWN_TEXT_CHARS)

    def __len__(self) -> int:
        return len(self.keys)

    def find(self, text: str) -> frozenset[int]:
        """Indices of the keys that occur in ``text``."""
        return frozenset(self.find_first((text,)))

    def find_first(self, texts: Iterable[str]) -> dict[int, int]:
        """Map each key found to the index of the first text (in the given order) holding it.

        Feed messages newest-first and the value is the distance back to the
        latest mention, so "within scan depth d" is ``value < d``. The keys of
        each distinct text are remembered: a chat is scanned again every turn
        with all but its newest messages unchanged, and recursion rescans the
        same entry contents turn after turn. Texts not seen before go through
        the automaton in one call (joined with a separator that no hit may
        cross), which is what keeps a 100-message scan in milliseconds.
        """
        items = list(texts)
        first: dict[int, int] = {}
        if not items:
            return first
        known = self._known
        per_text: list[tuple[int, ...] | None] = [known.get(text) for text in items]
        missing = [where for where, keys in enumerate(per_text) if keys is None]
        if missing:
            fresh, unsure = self._find_each([items[where] for where in missing])
            for position, (where, found) in enumerate(zip(missing, fresh, strict=True)):
                per_text[where] = found
                if position not in unsure:  # a key skipped by the time budget is tried again next turn
                    known.put(items[where], found)
        for where, keys in enumerate(per_text):
            for key in keys or ():
                if key not in first:
                    first[key] = where
        return first

    def _find_each(self, items: list[str]) -> tuple[list[tuple[int, ...]], set[int]]:
        """The keys each text holds (every text scanned; no cache), and the texts a regex overran on."""
        normals: list[str] = []
        folded: list[str] = []
        for text in items:
            normal, fold = _text_forms(text, fold_width=self._fold_width)
            normals.append(normal)
            folded.append(fold)
        found: list[set[int]] = [set() for _ in items]
        prefiltered: list[tuple[int, int]] = []
        if self._folded:
            joined, starts, ends = _join(folded)
            self._folded.scan(joined, starts, ends, found, prefiltered)
        if self._exact:
            joined, starts, ends = _join(normals)
            self._exact.scan(joined, starts, ends, found, [])
        # Regexes run on one text at a time, never on the joined string, so
        # anchors and lookarounds see each message as it is.
        unsure: set[int] = set()
        keys = self.keys

        def holds(key: int, regex: re.Pattern[str], where: int, text: str) -> bool:
            hit = bounded_search(regex, text, key=keys[key].text)
            if hit is None:
                unsure.add(where)
            return bool(hit)

        for pid, where in prefiltered:
            for key, regex in self._folded.pattern(pid).regexes or ():
                if key not in found[where] and holds(key, regex, where, normals[where]):
                    found[where].add(key)
        if self._dotless:
            for where, text in enumerate(normals):
                if _DOTLESS_I in text:
                    for key, regex in self._dotless:
                        if key not in found[where] and holds(key, regex, where, text):
                            found[where].add(key)
        if self._regexes:
            regex_texts = normals if not self._fold_width else [unicodedata.normalize("NFC", t) for t in items]
            for key, regex in self._regexes:
                for where, text in enumerate(regex_texts):
                    if holds(key, regex, where, text):
                        found[where].add(key)
        return [tuple(hits) for hits in found], unsure


_SEPARATOR = "\x00"


class TextCache(Generic[V]):
    """Values computed from recently seen texts, bounded by their total characters.

    Thread-safe enough for a memo: each operation is a few dict calls under
    CPython, and a race can only miscount the size a little.
    """

    __slots__ = ("_chars", "_items", "_limit")

    def __init__(self, *, limit_chars: int) -> None:
        self._items: dict[str, V] = {}
        self._chars = 0
        self._limit = limit_chars

    def get(self, text: str) -> V | None:
        return self._items.get(text)

    def put(self, text: str, value: V) -> None:
        if len(text) > 20_000:
            return  # very long texts are rare and not worth keeping
        if self._chars + len(text) > self._limit:
            self._items.clear()  # crude but bounded: start over rather than track ages
            self._chars = 0
        self._items[text] = value
        self._chars += len(text)


# Folded forms are shared by every matcher (a message is scanned by several book sets).
_FOLDS: TextCache[tuple[str, str]] = TextCache(limit_chars=2_000_000)
_FOLDS_WIDTH: TextCache[tuple[str, str]] = TextCache(limit_chars=2_000_000)
# Per matcher: keys found in each text (messages, entry contents), unless the builder says more.
KNOWN_TEXT_CHARS = 1_000_000


def _text_forms(text: str, *, fold_width: bool) -> tuple[str, str]:
    """(normalised, case-folded) forms of ``text``: NFC, or NFKC with ``fold_width``."""
    cache = _FOLDS_WIDTH if fold_width else _FOLDS
    pair = cache.get(text)
    if pair is None:
        if text.isascii():
            pair = (text, text.lower())
        else:
            normal = unicodedata.normalize("NFKC" if fold_width else "NFC", text)
            pair = (normal, normal.casefold())
        cache.put(text, pair)
    return pair


def _join(texts: Sequence[str]) -> tuple[str, list[int], list[int]]:
    starts: list[int] = []
    ends: list[int] = []
    position = 0
    for text in texts:
        starts.append(position)
        position += len(text)
        ends.append(position)
        position += len(_SEPARATOR)
    return _SEPARATOR.join(texts), starts, ends


class CompileCache(Generic[T]):
    """A small thread-safe LRU of compiled values (matchers, compiled book sets).

    Keys must change whenever what was compiled changes: use
    :func:`book_set_key`, which relies on the book version counter.
    """

    def __init__(self, maxsize: int = 64) -> None:
        self._maxsize = maxsize
        self._items: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = build()  # outside the lock: a slow compile must not block other books
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._maxsize:
                self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


def book_set_key(books: Iterable[Book], *extra: Hashable) -> tuple[Hashable, ...]:
    """Cache key of a book set: ``(id, version)`` per book, or the book itself when unversioned.

    Book order is part of the key (it decides placement ties and log order).
    """
    parts: list[Hashable] = list(extra)
    for book in books:
        parts.append((book.id, book.version) if book.version is not None else book)
    return tuple(parts)
