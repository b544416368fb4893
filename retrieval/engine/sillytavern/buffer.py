"""The scan buffer of one generation (SillyTavern's ``WorldInfoBuffer``) with indexed key hits.

SillyTavern's text for an entry is ``"\\x01"`` + the newest ``depth`` messages
(each trimmed) joined by ``"\\n\\x01"``, then (1.13+) the extra sources the entry
asks for (persona, character description...), then the scan-enabled injected prompts,
then the recursion buffer (left out during min-activation passes). An entry
with depth <= 0 sees an empty string, recursion text included.

Here the same text is kept as segments, and each segment is run through the
key index once: chat messages lazily up to the deepest depth needed, injected
prompts once, each recursion piece when it is added. Queries are then lookups;
the joined text is only built for regex keys and the rare keys matched
directly, and cached.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from .entries import MAX_SCAN_DEPTH, MatchSource
from .jscompat import js_trim
from .jsregex import TextView
from .matching import KeyIndex

JOINER = "\n\x01"


class ScanBuffer:
    def __init__(
        self,
        index: KeyIndex,
        chat: Sequence[str],
        injections: Sequence[str],
        global_depth: int,
        sources: Mapping[MatchSource, str] | None = None,
    ) -> None:
        self._index = index
        # Extra sources are appended untrimmed, and only when not empty; each is indexed lazily.
        self.sources = {source: text for source, text in (sources or {}).items() if text}
        self._source_hits: dict[MatchSource, tuple[frozenset[int], frozenset[int]]] = {}
        self.global_depth = global_depth
        self.skew = 0
        # Quirk: empty messages leave holes that join as "", but trailing ones drop out.
        segments: list[str | None] = [js_trim(message) if message else None for message in chat[:MAX_SCAN_DEPTH]]
        while segments and segments[-1] is None:
            segments.pop()
        self.chat_segments = [segment or "" for segment in segments]
        self.injections = list(injections)
        self.recursion: list[str] = []
        self._chat_scanned = 0
        self._chat_first: dict[int, int] = {}
        self._chat_first_whole: dict[int, int] = {}
        first, first_whole = index.scan(self.injections)
        self._injected = set(first)
        self._injected_whole = set(first_whole)
        self._recursed: set[int] = set()
        self._recursed_whole: set[int] = set()
        self._views: dict[tuple[int, bool, int, tuple[MatchSource, ...]], TextView] = {}
        # Offset of each chat segment in the joined text: "\x01" + segments joined by "\n\x01".
        self._chat_offsets: list[int] = []
        offset = 1
        for segment in self.chat_segments:
            self._chat_offsets.append(offset)
            offset += len(segment) + len(JOINER)
        self._injection_length = len(JOINER.join(self.injections))

    @property
    def depth(self) -> int:
        """Settings' depth plus the min-activations skew."""
        return self.global_depth + self.skew

    def initial_tokens(self) -> set[int]:
        return set(self._injected)

    def ensure_chat(self, depth: int) -> set[int]:
        """Index messages up to ``depth``; returns tokens seen for the first time."""
        limit = min(depth, len(self.chat_segments))
        if limit <= self._chat_scanned:
            return set()
        first, first_whole = self._index.scan(self.chat_segments[self._chat_scanned : limit])
        offset = self._chat_scanned
        self._chat_scanned = limit
        new = {token for token in first if token not in self._chat_first}
        for token, segment in first.items():
            self._chat_first.setdefault(token, segment + offset)
        for token, segment in first_whole.items():
            self._chat_first_whole.setdefault(token, segment + offset)
        return new

    def add_recursion(self, text: str) -> set[int]:
        """Append recursion text; returns tokens it contains."""
        self.recursion.append(text)
        first, first_whole = self._index.scan([text])
        self._recursed.update(first)
        self._recursed_whole.update(first_whole)
        return set(first)

    def _hits(self, source: MatchSource) -> tuple[frozenset[int], frozenset[int]]:
        hits = self._source_hits.get(source)
        if hits is None:
            first, first_whole = self._index.scan([self.sources[source]])
            hits = (frozenset(first), frozenset(first_whole))
            self._source_hits[source] = hits
        return hits

    def source_tokens(self) -> set[int]:
        """Every token found in any extra source (candidates for entries that scan one)."""
        found: set[int] = set()
        for source in self.sources:
            found.update(self._hits(source)[0])
        return found

    def token_in_sources(self, token: int, whole_word: bool, sources: Sequence[MatchSource]) -> bool:
        """Whether one of the entry's extra sources holds the token (a plain key never spans two)."""
        for source in sources:
            if source in self.sources and token in self._hits(source)[1 if whole_word else 0]:
                return True
        return False

    def token_present(self, token: int, whole_word: bool, depth: int, with_recursion: bool) -> bool:
        """Whether the text for (depth, with_recursion) contains the token. ``depth`` must be >= 1."""
        depth = min(depth, MAX_SCAN_DEPTH)
        if whole_word:
            segment = self._chat_first_whole.get(token)
            if segment is not None and segment < depth:
                return True
            return token in self._injected_whole or (with_recursion and token in self._recursed_whole)
        segment = self._chat_first.get(token)
        if segment is not None and segment < depth:
            return True
        return token in self._injected or (with_recursion and token in self._recursed)

    def region_start(self, token: int, depth: int, with_recursion: bool) -> int:
        """An offset in ``view(depth, ...)`` before which the token does not occur (0 if unknown)."""
        if depth <= 0:
            return 0
        depth = min(depth, MAX_SCAN_DEPTH)
        segment = self._chat_first.get(token)
        if segment is not None and segment < depth:
            return self._chat_offsets[segment]
        shown = min(depth, len(self.chat_segments))
        chat_end = self._chat_offsets[shown - 1] + len(self.chat_segments[shown - 1]) if shown else 1
        if token in self._injected:
            return chat_end + len(JOINER)
        if self.injections:
            chat_end += len(JOINER) + self._injection_length
        return chat_end + len(JOINER) if with_recursion and token in self._recursed else 0

    def text(self, depth: int, with_recursion: bool, sources: tuple[MatchSource, ...] = ()) -> str:
        """``WorldInfoBuffer.get``: the exact text an entry with this depth (and these sources) scans."""
        return self.view(depth, with_recursion, sources).text

    def view(self, depth: int, with_recursion: bool, sources: tuple[MatchSource, ...] = ()) -> TextView:
        depth = max(0, min(depth, MAX_SCAN_DEPTH))
        shown = tuple(source for source in sorted(sources) if source in self.sources)
        cache_key = (depth, with_recursion, len(self.recursion) if with_recursion else 0, shown)
        cached = self._views.get(cache_key)
        if cached is not None:
            return cached
        if depth == 0:
            result = ""  # depth 0 sees nothing: no messages, no sources, no injections, no recursion
        else:
            result = "\x01" + JOINER.join(self.chat_segments[:depth])
            for source in shown:
                result += JOINER + self.sources[source]
            if self.injections:
                result += JOINER + JOINER.join(self.injections)
            if with_recursion and self.recursion:
                result += JOINER + JOINER.join(self.recursion)
        view = TextView(result)
        self._views[cache_key] = view
        return view
