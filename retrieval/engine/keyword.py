"""What the keyword profiles (``classic``, ``server``) share.

* :func:`book_set_compile` turns the attached books into a
  :class:`CompiledBookSet`: one flat entry table (book order, then list
  order), one :class:`~retrieval.engine.matching.KeyMatcher` over every key of
  every entry, and the per-entry settings resolved once (decorators, scan
  depth, probability). Compiled sets are cached on the books' versions.
* :func:`chat_hits` scans the chat once, newest message first, up to the
  deepest scan depth any entry needs.
* :func:`entry_evidence` decides, for one entry, whether a primary key is
  within its scan depth (or in recursed lore) and whether its secondary logic
  passes (C-6, S-5).
* :func:`probability_passes` is the per-turn roll (C-13, S-6): a hash of the
  chat seed, the turn number and the entry id, never Python's random state,
  so the same turn always rolls the same.
* :func:`macros_apply` replaces ``{{user}}``, ``{{char}}``, ``{{bot}}`` (S-10).
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from .decorators import ParsedContent, decorators_parse
from .key_expressions import KeyExpression, KeyExpressionError, key_expression_parse
from .matching import (
    KNOWN_TEXT_CHARS,
    CompileCache,
    KeyMatcher,
    KeyPattern,
    book_set_key,
)
from .regex_budget import is_overrun_warning, turn_overran
from .rules import CLASSIC, SERVER
from .tokenizers import Tokenizer
from .values import Book, Entry, LogRecord, Message, Names, Outcome, Role

KeywordProfile = Literal["classic", "server"]

_MACRO = re.compile(r"\{\{\s*(user|char|bot)\s*\}\}", re.IGNORECASE)
_DIGITS = re.compile(r"(\d+)")


@dataclass(frozen=True, kw_only=True, slots=True)
class CompiledEntry:
    """One entry with its profile settings resolved; ``text`` is what the model sees before macros."""

    index: int
    book_index: int
    position: int
    book: Book
    entry: Entry
    decorators: ParsedContent
    text: str
    primary: tuple[int, ...]
    secondary: tuple[int, ...]
    depth: int
    order: int
    priority: int
    role: Role
    probability: int
    warnings: tuple[str, ...]
    # K-1: the parsed key expression; then ``primary`` holds its atoms' keys, in atom order.
    expression: KeyExpression | None
    # placement tie-break, precomputed: entry id with digit runs as numbers
    id_key: tuple[tuple[int, int | str], ...]

    @property
    def id(self) -> str:
        return self.entry.id

    @property
    def keyless(self) -> bool:
        return not self.primary


@dataclass(frozen=True, kw_only=True, slots=True)
class CompiledBookSet:
    """The attached books, compiled once per set of book versions."""

    profile: KeywordProfile
    books: tuple[Book, ...]
    entries: tuple[CompiledEntry, ...]
    matcher: KeyMatcher
    # key index -> index of the entry that owns it
    key_entry: tuple[int, ...]
    # key index -> True for a primary key, False for a secondary one
    key_primary: tuple[bool, ...]
    max_depth: int
    # the log record an entry gets when nothing happens to it this turn
    quiet_records: tuple[LogRecord, ...]
    # Quiet records a compact log lists anyway (disabled, collection off), and the indices of those
    # it only counts (simply not matched): a turn does no work for an entry nothing happened to.
    quiet_listed: frozenset[int]
    quiet_unlisted: frozenset[int]
    gated: tuple[int, ...]
    always: tuple[int, ...]
    keepers: tuple[int, ...]
    warnings: tuple[str, ...]
    # Each entry's place in the classic budget's survival order (C-10: priority, order, id, book,
    # position) and in placement order (C-11: order, priority, id, book, position), ranked once per
    # compile: a turn that activates thousands of entries sorts them by one int each.
    survival_rank: tuple[int, ...]
    placement_rank: tuple[int, ...]
    # Like the matcher's memo, the only state that changes after construction.
    token_counts: EntryTokenCounts

    def key_text(self, key: int) -> str:
        return self.matcher.keys[key].text


class EntryTokenCounts:
    """Token counts of a book set's rendered entries, per tokenizer: ``entry index -> (text, tokens)``.

    Every activated entry is counted on every turn (the over-budget detail names the activated
    total), so the counts must be remembered. The tokenizer's own memo is shared by every book and
    bounded in characters; a big book whose activated lore outgrew it (17,500 entries, ~5 MB, in a
    20,000-entry book with recursion) emptied it on every turn and re-tokenised everything. Here the
    bound is the book set itself: one count per entry per tokenizer, recounted only when the
    rendered text changes (other names in its macros). Races between threads only recount.
    """

    __slots__ = ("_by_tokenizer",)

    _MAX_TOKENIZERS = 8

    def __init__(self) -> None:
        # Keyed by the tokenizer object's id; the object is kept so that id is not reused.
        self._by_tokenizer: dict[int, tuple[Tokenizer, dict[int, tuple[str, int]]]] = {}

    def of(self, tokenizer: Tokenizer) -> dict[int, tuple[str, int]]:
        """The counts table for one tokenizer (read and filled by the caller)."""
        held = self._by_tokenizer.get(id(tokenizer))
        if held is None or held[0] is not tokenizer:
            if len(self._by_tokenizer) >= self._MAX_TOKENIZERS:
                self._by_tokenizer.clear()  # a new tokenizer per turn (tests, mostly): stay bounded
            held = self._by_tokenizer[id(tokenizer)] = (tokenizer, {})
        return held[1]

    def clear(self) -> None:
        self._by_tokenizer.clear()


def entry_tokens(
    compiled: CompiledBookSet, tokenizer: Tokenizer, rendered: Mapping[int, str], indices: Iterable[int]
) -> dict[int, int]:
    """Tokens of each of ``indices``' rendered text, counted once per entry text and tokenizer."""
    counts = compiled.token_counts.of(tokenizer)
    tokens: dict[int, int] = {}
    for index in indices:
        text = rendered[index]
        known = counts.get(index)
        if known is not None and known[0] == text:
            tokens[index] = known[1]
        else:
            count = tokenizer.count(text)
            counts[index] = (text, count)
            tokens[index] = count
    return tokens


_compiled: CompileCache[CompiledBookSet] = CompileCache(maxsize=64)


def natural_id_key(entry_id: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key for entry ids: digit runs compare as numbers (``e9`` before ``e10``)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS.split(entry_id) if part)


def book_set_compile(books: Sequence[Book], *, profile: KeywordProfile) -> CompiledBookSet:
    """Compile (or fetch from the cache) the book set for a keyword profile."""
    books = tuple(books)
    return _compiled.get(book_set_key(books, profile), lambda: _compile(books, profile))


def compile_cache_clear() -> None:
    _compiled.clear()


def _compile(books: tuple[Book, ...], profile: KeywordProfile) -> CompiledBookSet:
    classic = profile == "classic"
    patterns: list[KeyPattern] = []
    key_entry: list[int] = []
    key_primary: list[bool] = []
    entries: list[CompiledEntry] = []
    quiet: list[LogRecord] = []
    gated: list[int] = []
    always: list[int] = []
    keepers: list[int] = []
    warnings: list[str] = []
    max_depth = 0
    for book_index, book in enumerate(books):
        settings = book.settings
        for position, entry in enumerate(book.entries):
            index = len(entries)
            # Decorators are a classic feature; in server content "@@" is text.
            parsed = decorators_parse(entry.content) if classic else ParsedContent(text=entry.content)
            entry_warnings = tuple(f"{entry.id}: {warning}" for warning in parsed.warnings)
            warnings.extend(entry_warnings)
            default_depth = CLASSIC.default_scan_depth if classic else SERVER.default_scan_depth
            depth = _first_int(parsed.scan_depth, entry.scan_depth, settings.scan_depth, default_depth)
            case_sensitive = False if not classic else _first_bool(entry.case_sensitive, settings.case_sensitive)
            whole_words = _first_bool(entry.whole_words, settings.whole_words)

            expression = None
            if entry.key_expression.strip():
                try:
                    expression = key_expression_parse(entry.key_expression)
                except KeyExpressionError as error:
                    # Saved entries were checked; this is an import or an older engine's text.
                    entry_warnings += (
                        f"{entry.id}: key expression does not parse ({error}); its keys apply instead",
                    )
                    warnings.append(entry_warnings[-1])
            start = len(patterns)
            if expression is not None:
                # The atoms join the one automaton like any key; a regex atom is a regex where keys
                # are (classic), literal text in server (S-7); a quoted phrase is always literal.
                patterns.extend(
                    KeyPattern(atom.text, case_sensitive, whole_words, classic and atom.regex)
                    for atom in expression.atoms
                )
                primary = tuple(range(start, len(patterns)))
                secondary: tuple[int, ...] = ()
                key_entry.extend([index] * len(primary))
                # Only a key that can make the expression true "explains" a miss (never a NOT's).
                key_primary.extend(i in expression.positive for i in range(len(primary)))
            else:
                patterns.extend(
                    KeyPattern(k, case_sensitive, whole_words, classic) for k in map(str.strip, entry.keys) if k
                )
                primary = tuple(range(start, len(patterns)))
                start = len(patterns)
                patterns.extend(
                    KeyPattern(k, case_sensitive, whole_words, classic)
                    for k in map(str.strip, entry.secondary_keys)
                    if k
                )
                secondary = tuple(range(start, len(patterns)))
                key_entry.extend([index] * (len(primary) + len(secondary)))
                key_primary.extend([True] * len(primary))
                key_primary.extend([False] * len(secondary))
            probability = _first_int(parsed.probability, entry.probability, 100)
            compiled = CompiledEntry(
                index=index,
                book_index=book_index,
                position=position,
                book=book,
                entry=entry,
                decorators=parsed,
                text=parsed.text,
                primary=primary,
                secondary=secondary,
                depth=depth,
                order=_first_int(parsed.order, entry.order),
                priority=_first_int(parsed.priority, entry.priority),
                role=parsed.role or entry.role,
                probability=probability,
                warnings=entry_warnings,
                expression=expression,
                id_key=natural_id_key(entry.id),
            )
            entries.append(compiled)
            if primary or secondary:
                max_depth = max(max_depth, depth)
            if parsed.has_gates:
                gated.append(index)
            if entry.constant or (not classic and not primary):
                always.append(index)
            if parsed.keep:
                keepers.append(index)
            quiet.append(_quiet_record(compiled, profile))
    # Remember the keys of every entry's text (recursion rescans them each turn) and of about
    # a megabyte of chat messages besides.
    lore_chars = sum(len(compiled.text) for compiled in entries)
    matcher = KeyMatcher(patterns, fold_width=not classic, memo_chars=2 * lore_chars + KNOWN_TEXT_CHARS)
    warnings.extend(matcher.warnings)
    return CompiledBookSet(
        profile=profile,
        books=books,
        entries=tuple(entries),
        matcher=matcher,
        key_entry=tuple(key_entry),
        key_primary=tuple(key_primary),
        max_depth=max_depth,
        quiet_records=tuple(quiet),
        quiet_listed=frozenset(i for i, record in enumerate(quiet) if _compact_lists(record)),
        quiet_unlisted=frozenset(i for i, record in enumerate(quiet) if not _compact_lists(record)),
        gated=tuple(gated),
        always=tuple(always),
        keepers=tuple(keepers),
        warnings=tuple(warnings),
        survival_rank=_ranks(entries, lambda e: (-e.priority, -e.order, e.id_key, e.book_index, e.position)),
        placement_rank=_ranks(entries, lambda e: (-e.order, -e.priority, e.id_key, e.book_index, e.position)),
        token_counts=EntryTokenCounts(),
    )


def _ranks(entries: Sequence[CompiledEntry], key: Callable[[CompiledEntry], Any]) -> tuple[int, ...]:
    """Each entry's position when all of them are sorted by ``key`` (a total order: position breaks ties)."""
    ranks = [0] * len(entries)
    for rank, entry in enumerate(sorted(entries, key=key)):
        ranks[entry.index] = rank
    return tuple(ranks)


def _first_int(*values: int | None) -> int:
    for value in values:
        if value is not None:
            return value
    raise ValueError("no value")


def _first_bool(*values: bool | None) -> bool:
    for value in values:
        if value is not None:
            return value
    raise ValueError("no value")


def _quiet_record(compiled: CompiledEntry, profile: KeywordProfile) -> LogRecord:
    entry = compiled.entry
    if not compiled.book.settings.active and profile == "server":
        note = " (the entry itself is disabled too)" if not entry.enabled else ""
        return log_record(compiled, Outcome.COLLECTION_OFF, f"collection {compiled.book.name!r} is switched off{note}")
    if not entry.enabled:
        return log_record(compiled, Outcome.DISABLED, "entry is disabled")
    if compiled.keyless:
        return log_record(compiled, Outcome.NOT_MATCHED, "entry has no keys and is not constant")
    return log_record(
        compiled, Outcome.NOT_MATCHED, f"no key found in the last {compiled.depth} message(s)"
    )


def _compact_lists(record: LogRecord) -> bool:
    """C-15's compact log: every record but the simply not matched (one whose regex key was
    skipped for time stays: the reason is in its warnings)."""
    return record.outcome != Outcome.NOT_MATCHED or any(map(is_overrun_warning, record.warnings))


def turn_log(
    compiled: CompiledBookSet, touched: Mapping[int, LogRecord], *, full: bool
) -> tuple[tuple[LogRecord, ...], int]:
    """The turn's request log in entry order, and how many simply-not-matched entries it leaves out.

    ``touched`` holds the records this turn wrote (entry index -> record); every other entry keeps
    its quiet record. The full log lists every entry; a compact one lists the touched entries and
    the quiet records a compact log shows, and counts the rest, so a turn costs what it touched,
    not the size of the books. A turn in which a regex key overran lists every entry: the caller
    adds the overrun's warning to whichever record is that key's entry.
    """
    quiet = compiled.quiet_records
    if full or turn_overran():
        records = list(quiet)
        for index, record in touched.items():
            records[index] = record
        return tuple(records), 0
    listed = sorted(touched.keys() | compiled.quiet_listed)
    unlisted = len(compiled.quiet_unlisted) - sum(1 for index in touched if index in compiled.quiet_unlisted)
    return tuple(touched.get(index) or quiet[index] for index in listed), unlisted


def log_record(
    compiled: CompiledEntry,
    outcome: str,
    detail: str = "",
    *,
    key: str | None = None,
    message: int | None = None,
    via_entry: str | None = None,
) -> LogRecord:
    return LogRecord(
        entry=compiled.entry.id,
        book=compiled.book.name,
        outcome=outcome,
        detail=detail,
        key=key,
        message=message,
        via_entry=via_entry,
        warnings=compiled.warnings,
    )


def chat_hits(compiled: CompiledBookSet, chat: Sequence[Message]) -> dict[int, int]:
    """Scan the chat newest-first; ``{key index: messages back}`` (0 = the last message)."""
    depth = min(compiled.max_depth, len(chat))
    if depth <= 0 or not compiled.matcher.keys:
        return {}
    return compiled.matcher.find_first(chat[len(chat) - 1 - back].text for back in range(depth))


class Evidence(NamedTuple):
    """Why an entry matched (or not): the deciding key and where it was found.

    Internal to the engine and built for every candidate entry on every turn,
    hence a named tuple rather than a frozen dataclass.
    """

    matched: bool
    secondary_ok: bool
    key: int | None = None
    back: int | None = None  # messages back in the chat
    via: int | None = None  # entry index whose content held the key
    detail: str = ""
    expression: bool = False  # K-1: ``detail`` explains a key expression (said when it activates too)


_NO_MATCH = Evidence(False, False)


def entry_evidence(
    compiled: CompiledBookSet,
    entry: CompiledEntry,
    chat: Mapping[int, int],
    recursed: Mapping[int, int] | None = None,
) -> Evidence:
    """Primary match within the entry's scan depth (or in recursed content), then secondary logic.

    The deciding key is the one said most recently; recursed lore counts only
    when no primary key is in the chat window.
    """
    depth = entry.depth
    if entry.expression is not None:
        return _expression_evidence(compiled, entry, entry.expression, chat, recursed)
    key: int | None = None
    back: int | None = None
    via: int | None = None
    nearest = depth
    for candidate in entry.primary:
        said = chat.get(candidate)
        if said is not None and said < nearest:
            key, nearest = candidate, said
            if said == 0:
                break  # nothing is more recent than the last message
    if key is not None:
        back = nearest
    elif recursed:
        for candidate in entry.primary:
            if candidate in recursed:
                key, via = candidate, recursed[candidate]
                break
    if key is None:
        return _NO_MATCH
    if not entry.secondary:
        return Evidence(True, True, key, back, via)
    present = [
        k for k in entry.secondary if chat.get(k, depth) < depth or (recursed is not None and k in recursed)
    ]
    logic = entry.entry.secondary_logic
    total = len(entry.secondary)
    if logic == "and_any":
        ok = bool(present)
    elif logic == "and_all":
        ok = len(present) == total
    elif logic == "not_any":
        ok = not present
    else:  # not_all
        ok = len(present) < total
    found = ", ".join(repr(compiled.key_text(k)) for k in present) or "none"
    detail = f"secondary logic {logic}: {len(present)} of {total} secondary keys present ({found})"
    return Evidence(True, ok, key, back, via, detail)


def _expression_evidence(
    compiled: CompiledBookSet,
    entry: CompiledEntry,
    expression: KeyExpression,
    chat: Mapping[int, int],
    recursed: Mapping[int, int] | None,
) -> Evidence:
    """K-1: the expression over the atoms found within the entry's scan depth (or in recursed lore).

    An entry none of whose positive keys is present did not match at all (quiet, like a keyless
    miss); one with a positive key present but the expression false is logged as its key logic
    failing (``secondary_failed``), naming the keys present.
    """
    depth = entry.depth
    atoms = entry.primary
    present = [
        chat.get(key, depth) < depth or (recursed is not None and key in recursed) for key in atoms
    ]
    key: int | None = None
    back: int | None = None
    via: int | None = None
    nearest = depth
    for atom in expression.positive:
        said = chat.get(atoms[atom])
        if said is not None and said < nearest:
            key, nearest = atoms[atom], said
    if key is not None:
        back = nearest
    elif recursed:
        for atom in expression.positive:
            if atoms[atom] in recursed:
                key, via = atoms[atom], recursed[atoms[atom]]
                break
    if key is None:
        return _NO_MATCH
    ok = expression.evaluate(present.__getitem__)
    found = ", ".join(repr(compiled.key_text(atoms[i])) for i, here in enumerate(present) if here)
    verdict = "holds" if ok else "does not hold"
    detail = f"key expression {expression.text} {verdict} (keys present: {found})"
    return Evidence(True, ok, key, back, via, detail, expression=True)


def probability_roll(seed: str, turn: int, entry_id: str) -> float:
    """A number in [0, 100) fixed by chat seed, turn and entry: stable within a turn."""
    digest = hashlib.blake2b(f"{seed}\x1f{turn}\x1f{entry_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 * 100


def probability_passes(probability: int, *, seed: str, turn: int, entry_id: str) -> bool:
    """100 always passes, 0 never does (even without keys, S-6); otherwise the roll decides."""
    if probability >= 100:
        return True
    if probability <= 0:
        return False
    return probability_roll(seed, turn, entry_id) < probability


def probability_detail(probability: int) -> str:
    if probability <= 0:
        return "probability 0%: never activates"
    return f"probability {probability}%: this turn's roll failed"


def macros_apply(text: str, names: Names) -> str:
    """Replace the name macros; every other ``{{...}}`` stays exactly as written (S-10)."""
    if "{{" not in text:
        return text
    values = {"user": names.user, "char": names.char, "bot": names.bot or names.char}
    return _MACRO.sub(lambda found: values[found.group(1).lower()], text)


class Trigger(NamedTuple):
    """What activated an entry, in request-log terms (internal, like :class:`Evidence`)."""

    detail: str
    key: str | None = None
    message: int | None = None
    via_entry: str | None = None


def trigger_of(evidence: Evidence, compiled: CompiledBookSet, chat: Sequence[Message]) -> Trigger:
    """The key and the message (or recursed entry) behind an evidence."""
    key_text = compiled.key_text(evidence.key) if evidence.key is not None else None
    # A key expression that held is part of why the entry fired; one that failed is said by the caller.
    why = f"; {evidence.detail}" if evidence.expression and evidence.secondary_ok else ""
    if evidence.back is not None:
        index = len(chat) - 1 - evidence.back
        speaker = chat[index].name or chat[index].role
        return Trigger(detail=f"key {key_text!r} in message {index} ({speaker}){why}", key=key_text, message=index)
    if evidence.via is not None:
        source = compiled.entries[evidence.via].entry.id
        return Trigger(
            detail=f"key {key_text!r} in the content of entry {source} (recursion){why}",
            key=key_text,
            via_entry=source,
        )
    return Trigger(detail="")
