"""Key matching: SillyTavern's ``matchKeys`` and the multi-pattern index that replaces its loop.

SillyTavern tests every key of every entry with a fresh regex on every pass.
Here all plain keys of a book set go into Aho-Corasick automata, one per way
of folding text (JavaScript ``toLowerCase``, raw, and ``casefold`` for the
literal prefilter of case-insensitive regex keys). A scan finds, per key, the
newest message it occurs in (as a substring and as a whole word under
SillyTavern's ASCII ``(?:^|\\W)key(?:$|\\W)`` rule), so "does this key match
at depth d" is a lookup.

The scan text is a list of segments (messages, injected prompts, recursion
text) joined by ``"\\n\\x01"``. A key without ``\\x01`` can never straddle a
joiner, and the joiner's characters are non-word characters, so matching each
segment on its own gives exactly SillyTavern's answer on the joined text. Keys
containing ``\\x01`` are matched directly on the joined text.
"""
from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from enum import IntEnum
from typing import NamedTuple

import ahocorasick_rs

from .jscompat import ASCII_WORD_CHARS, js_has_whitespace, js_lower, js_trim, to_utf16_units
from .jsregex import JsRegex, parse_regex_key


class TextSpace(IntEnum):
    """How a text and its keys are folded before comparison."""

    FOLDED = 0  # JavaScript toLowerCase: plain keys of case-insensitive entries
    RAW = 1  # as written: case-sensitive keys, literals of regex keys without `i`
    CASEFOLD = 2  # str.casefold: literals of regex keys with `i`


def fold(space: TextSpace, text: str) -> str:
    if space is TextSpace.FOLDED:
        return js_lower(text)
    if space is TextSpace.CASEFOLD:
        return text.casefold()
    return text


_SURROGATES = re.compile("[\ud800-\udfff]")
_ASCII_WORD = re.compile("[A-Za-z0-9_]+")
_WORD_BYTES = frozenset(ord(char) for char in ASCII_WORD_CHARS)
_WORDS_ONLY = bytes(code if code in _WORD_BYTES else 0x20 for code in range(256))  # other bytes -> space


def match_key(haystack: str, needle: str, *, case_sensitive: bool, whole_words: bool) -> bool:
    """``WorldInfoBuffer.matchKeys`` on one text (no index): regex keys, folding, whole words."""
    key_regex = parse_regex_key(needle)
    if key_regex is not None:
        return key_regex.test(haystack)
    if not case_sensitive:
        haystack, needle = js_lower(haystack), js_lower(needle)
    if whole_words and not js_has_whitespace(needle):
        return contains_whole_word(haystack, needle)
    return needle in haystack


def contains_whole_word(haystack: str, needle: str) -> bool:
    """``(?:^|\\W)needle(?:$|\\W)`` without the ``u`` flag: boundaries are ASCII non-word chars."""
    if not needle:
        # An empty needle can even sit between the two UTF-16 halves of an astral character.
        haystack = to_utf16_units(haystack)
    start = haystack.find(needle)
    while start != -1:
        end = start + len(needle)
        if (start == 0 or haystack[start - 1] not in ASCII_WORD_CHARS) and (
            end == len(haystack) or haystack[end] not in ASCII_WORD_CHARS
        ):
            return True
        start = haystack.find(needle, start + 1)
    return False


class KeyKind(IntEnum):
    NEVER = 0  # empty after macro substitution: `substituted && ...` is false
    ALWAYS = 1  # only whitespace: trims to "", which every text contains
    PLAIN = 2  # looked up in the index
    REGEX = 3  # a /pattern/flags key
    DIRECT = 4  # contains "\x01": matched on the joined text


class PreparedKey(NamedTuple):
    """A key after ``substituteParams`` and ``trim``, resolved against its entry's settings."""

    kind: KeyKind
    text: str
    token: int = -1  # PLAIN: index token; REGEX: token of the required literal, or -1
    whole_word: bool = False
    case_sensitive: bool = False
    match_whole_words: bool = False
    regex: JsRegex | None = None


class KeyIndex:
    """All plain keys (and regex literals) of a compiled book set, one automaton per text space.

    Matching runs on UTF-8 bytes: a valid UTF-8 key can only match at
    character boundaries, and every byte of a non-ASCII character is >= 0x80,
    so it is a non-word byte exactly as the character is a non-word character
    for JavaScript's ASCII ``\\W``.
    """

    def __init__(self) -> None:
        self._tokens: dict[tuple[TextSpace, str], int] = {}
        self.token_space: list[TextSpace] = []
        self.token_text: list[str] = []
        self.needs_whole_word: list[bool] = []
        self.needs_substring: list[bool] = []
        self._automata: list[tuple[TextSpace, ahocorasick_rs.BytesAhoCorasick, list[int]]] = []
        self._words: dict[TextSpace, dict[bytes, int]] = {}

    def token(self, space: TextSpace, text: str, *, whole_word: bool) -> int:
        key = (space, text)
        token = self._tokens.get(key)
        if token is None:
            token = len(self.token_space)
            self._tokens[key] = token
            self.token_space.append(space)
            self.token_text.append(text)
            self.needs_whole_word.append(False)
            self.needs_substring.append(False)
        if whole_word:
            self.needs_whole_word[token] = True
        else:
            self.needs_substring[token] = True
        return token

    def prepare(self, raw_key: str, substituted: str, *, case_sensitive: bool, match_whole_words: bool) -> PreparedKey:
        """Resolve one key as SillyTavern would test it for an entry with these settings."""
        if not substituted:
            return PreparedKey(KeyKind.NEVER, raw_key)
        text = js_trim(substituted)
        if not text:
            return PreparedKey(KeyKind.ALWAYS, text)
        regex = parse_regex_key(text) if text.startswith("/") else None
        if regex is not None:
            token = -1
            literal = regex.required_literal
            if literal and "\x01" not in literal and not _SURROGATES.search(literal):
                space = TextSpace.CASEFOLD if regex.ignore_case else TextSpace.RAW
                token = self.token(space, literal, whole_word=False)
            return PreparedKey(KeyKind.REGEX, text, token=token, regex=regex)
        if "\x01" in text or (not text.isascii() and _SURROGATES.search(text)):
            return PreparedKey(
                KeyKind.DIRECT, text, case_sensitive=case_sensitive, match_whole_words=match_whole_words
            )
        space = TextSpace.RAW if case_sensitive else TextSpace.FOLDED
        folded = fold(space, text)
        whole_word = match_whole_words and not js_has_whitespace(folded)
        return PreparedKey(
            KeyKind.PLAIN,
            text,
            token=self.token(space, folded, whole_word=whole_word),
            whole_word=whole_word,
            case_sensitive=case_sensitive,
            match_whole_words=match_whole_words,
        )

    def build(self) -> None:
        """Compile the automata; call once after all keys are prepared.

        A whole-word key made only of ASCII word characters matches exactly
        when it equals a maximal run of such characters in the text, so those
        keys are looked up in each segment's set of words instead of going
        through the automaton.
        """
        self._automata = []
        self._words = {}
        for space in TextSpace:
            tokens: list[int] = []
            for token, token_space in enumerate(self.token_space):
                if token_space is not space:
                    continue
                text = self.token_text[token]
                if not self.needs_substring[token] and _ASCII_WORD.fullmatch(text):
                    self._words.setdefault(space, {})[text.encode("ascii")] = token
                else:
                    tokens.append(token)
            if tokens:
                patterns = [self.token_text[token].encode("utf-8") for token in tokens]
                automaton = ahocorasick_rs.BytesAhoCorasick(patterns, matchkind=ahocorasick_rs.MatchKind.Standard)
                self._automata.append((space, automaton, tokens))

    def scan(self, segments: Sequence[str]) -> tuple[dict[int, int], dict[int, int]]:
        """For each token present: the lowest segment index holding it, and the lowest holding it as a whole word."""
        first: dict[int, int] = {}
        first_whole: dict[int, int] = {}
        if not segments:
            return first, first_whole
        encoded: dict[TextSpace, list[bytes]] = {}

        def pieces_for(space: TextSpace) -> list[bytes]:
            pieces = encoded.get(space)
            if pieces is None:
                pieces = [fold(space, segment).encode("utf-8", "surrogatepass") for segment in segments]
                encoded[space] = pieces
            return pieces

        for space, words in self._words.items():
            for segment, piece in enumerate(pieces_for(space)):
                for word in words.keys() & piece.translate(_WORDS_ONLY).split():
                    token = words[word]
                    if token not in first_whole:
                        first.setdefault(token, segment)
                        first_whole[token] = segment

        needs_whole_word = self.needs_whole_word
        for space, automaton, tokens in self._automata:
            pieces = pieces_for(space)
            starts: list[int] = []
            offset = 1
            for piece in pieces:
                starts.append(offset)
                offset += len(piece) + 2
            joined = b"\x01" + b"\n\x01".join(pieces)
            single = len(pieces) == 1
            length = len(joined)
            for local, start, end in automaton.find_matches_as_indexes(joined, overlapping=True):
                token = tokens[local]
                segment = 0 if single else bisect_right(starts, start) - 1
                known = first.get(token)
                if known is None or segment < known:
                    first[token] = segment
                if not needs_whole_word[token]:
                    continue
                known = first_whole.get(token)
                if known is not None and known <= segment:
                    continue
                # start >= 1: joined[0] is "\x01", which no key contains.
                if joined[start - 1] not in _WORD_BYTES and (end == length or joined[end] not in _WORD_BYTES):
                    first_whole[token] = segment
        return first, first_whole
