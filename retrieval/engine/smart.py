"""The smart profile: world books with canon, named and semantic retrieval, and a world index (W-1..W-7).

The writer configures nothing but canon and list order; this module decides
what reaches the model. Every number below is a field of :data:`.rules.SMART`.

1. Canon (W-1) is packed book by book, in list order, into the canon budget
   (``canon_share_percent`` of the input window, capped at
   ``canon_cap_tokens``) by :func:`canon_pack`, the one W-1 packing the canon
   meter uses too. The first enabled canon entry is always kept; one that does
   not fit is skipped and later ones are still tried (SPEC §10), and the rest
   are "canon over budget".
2. Whole book (W-2): a book whose when-relevant entries fit in what canon left
   free travels whole, in list order, in the cache-stable ``relevant`` slot.
3. Big books (W-3..W-5): entries named by title or alias in the user's last
   message or the character's last ``replies_searched`` replies come first (at
   most ``max_named``, at most ``max_named_from_replies`` from replies), then
   entries matched by meaning over the last ``meaning_window`` messages (a
   :class:`MeaningSearch` port), or list order while a book is not mostly
   indexed (W-7). At most ``max_full_entries`` are injected whole, each trimmed
   to ``trim_tokens``, within min(``lore_cap_tokens``, what canon left) tokens.
   The rest become the world index: at most ``index_topics`` topics,
   named-but-unfitted first, plus at most ``index_linked`` entries linked from
   the injected text (their title or alias appears in it).
4. Disabled entries reach the model by no path (W-6).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Generic, Protocol, TypeVar

from .matching import CompileCache, KeyMatcher, KeyPattern, book_set_key
from .rules import SMART
from .tokenizers import Tokenizer
from .values import Book, Entry, Injection, LogRecord, Message, Outcome, Selection, TurnRequest, WorldIndexLine

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")


class MeaningSearch(Protocol):
    """Semantic retrieval over indexed entries (W-4), provided by the platform."""

    def mostly_indexed(self, book_id: str) -> bool:
        """Whether enough of the book is indexed to trust meaning over list order (W-7)."""
        ...

    def rank(self, *, book_ids: Sequence[str], messages: Sequence[str], limit: int) -> list[str]:
        """Entry ids of these books, nearest in meaning to ``messages`` first."""
        ...


def meaning_window(chat: Sequence[Message]) -> list[str]:
    """The texts matched by meaning (W-4): the last messages that say something."""
    return [m.text for m in chat[-SMART.meaning_window:] if m.text.strip()]


def canon_budget(input_window: int | None) -> int:
    """W-1: the canon budget for a model's input window (the default window when None or 0)."""
    window = input_window or SMART.default_input_window
    return min(SMART.canon_cap_tokens, window * SMART.canon_share_percent // 100)


_T = TypeVar("_T")


@dataclass(frozen=True, kw_only=True, slots=True)
class CanonItem(Generic[_T]):
    """One canon entry as W-1 packing decided it."""

    entry: _T
    tokens: int
    fits: bool  # False = canon over budget: not injected
    first: bool  # the first canon entry, kept whatever its size
    used_before: int  # canon tokens already packed when this entry's turn came


@dataclass(frozen=True, kw_only=True, slots=True)
class CanonPacking(Generic[_T]):
    """W-1 packing of a run of canon entries into one budget."""

    budget: int
    items: tuple[CanonItem[_T], ...]

    @property
    def used(self) -> int:
        """Tokens of the canon that is injected."""
        return sum(item.tokens for item in self.items if item.fits)

    @property
    def total(self) -> int:
        """Tokens all of this canon asks for every turn."""
        return sum(item.tokens for item in self.items)

    @property
    def free(self) -> int:
        """What canon leaves of its budget (W-2, W-5)."""
        return max(0, self.budget - self.used)


def canon_pack(entries: Sequence[_T], *, budget: int, tokens: Callable[[_T], int]) -> CanonPacking[_T]:
    """W-1: pack canon entries, already in packing order (book by book, list order), into ``budget``.

    The first entry is always kept, even alone over the budget; an entry that
    does not fit is skipped and later ones are still tried (SPEC §10). The
    caller picks which entries are canon (enabled canon of live books).
    """
    items: list[CanonItem[_T]] = []
    used = 0
    for entry in entries:
        size = tokens(entry)
        first = not items
        fits = first or used + size <= budget
        items.append(CanonItem(entry=entry, tokens=size, fits=fits, first=first, used_before=used))
        if fits:
            used += size
    return CanonPacking(budget=budget, items=tuple(items))


@dataclass(frozen=True, kw_only=True, slots=True)
class _Candidate:
    book: Book
    entry: Entry
    position: int  # list position across the book set, for stable ordering


@dataclass(frozen=True, kw_only=True, slots=True)
class _BookPlan:
    """What a turn needs of one book that depends only on its version and the tokenizer.

    Built once per book version: a turn then does no work per entry beyond
    those it injects, indexes or must explain (C-15 lists the rest only when
    the call asks for the full log).
    """

    canon: tuple[tuple[Entry, int], ...]  # enabled canon entries in list order, with their tokens
    relevant: tuple[Entry, ...]  # enabled when-relevant entries in list order
    relevant_sizes: tuple[int, ...]
    relevant_tokens: int
    disabled: tuple[LogRecord, ...]  # W-6, in list order


@dataclass(frozen=True, kw_only=True, slots=True)
class _BigBooks:
    """The candidates of a set of big books (W-3..W-5), and their title/alias matcher."""

    candidates: tuple[_Candidate, ...]
    names: _NameMatcher
    by_id: dict[tuple[str, str], int]  # (book id, entry id) -> candidate index
    book_of: dict[str, str]  # entry id -> book id, for ids the meaning search answers


@dataclass(slots=True)
class _NameMatcher:
    matcher: KeyMatcher
    owners: tuple[int, ...]  # key index -> candidate index


_plans: CompileCache[_BookPlan] = CompileCache(maxsize=256)
_big: CompileCache[_BigBooks] = CompileCache(maxsize=64)
_switched_off: CompileCache[tuple[LogRecord, ...]] = CompileCache(maxsize=64)
_sizes: CompileCache[dict[str, int]] = CompileCache(maxsize=256)
_log_positions: CompileCache[dict[str, int]] = CompileCache(maxsize=256)


def entry_tokens(book: Book, tokenizer: Tokenizer) -> dict[str, int]:
    """Token count of every entry's content, computed once per book version and tokenizer.

    Every turn needs the whole book's size (W-2); counting 2,000 entries again
    each turn would cost more than the rest of the selection.
    """
    return _sizes.get(
        book_set_key((book,), "sizes", tokenizer.name),
        lambda: {entry.id: tokenizer.count(entry.content) for entry in book.entries},
    )


def _book_plan(book: Book, tokenizer: Tokenizer) -> _BookPlan:
    def build() -> _BookPlan:
        counted = entry_tokens(book, tokenizer)
        enabled = [e for e in book.entries if e.enabled]
        relevant = tuple(e for e in enabled if not (e.canon or e.constant))
        sizes = tuple(counted[e.id] for e in relevant)
        return _BookPlan(
            canon=tuple((e, counted[e.id]) for e in enabled if e.canon or e.constant),
            relevant=relevant,
            relevant_sizes=sizes,
            relevant_tokens=sum(sizes),
            disabled=tuple(
                LogRecord(entry=e.id, book=book.id, outcome=Outcome.DISABLED,
                          detail="disabled entries reach the model by no path (W-6)")
                for e in book.entries if not e.enabled
            ),
        )

    return _plans.get(book_set_key((book,), "smart-plan", tokenizer.name), build)


def _switched_off_records(book: Book) -> tuple[LogRecord, ...]:
    return _switched_off.get(book_set_key((book,), "smart-off"), lambda: tuple(
        LogRecord(entry=e.id, book=book.id, outcome=Outcome.COLLECTION_OFF, detail="the book is switched off")
        for e in book.entries
    ))


def _big_books_of(books: tuple[Book, ...], plans: Sequence[_BookPlan]) -> _BigBooks:
    def build() -> _BigBooks:
        candidates = tuple(
            _Candidate(book=book, entry=entry, position=position)
            for book, plan in zip(books, plans)
            for position, entry in enumerate(plan.relevant)
        )
        patterns: list[KeyPattern] = []
        owners: list[int] = []
        for index, candidate in enumerate(candidates):
            for name in (candidate.entry.title, *candidate.entry.aliases):
                if name.strip():
                    patterns.append(KeyPattern(text=name, whole_words=True))
                    owners.append(index)
        return _BigBooks(
            candidates=candidates,
            names=_NameMatcher(matcher=KeyMatcher(patterns), owners=tuple(owners)),
            by_id={(c.book.id, c.entry.id): i for i, c in enumerate(candidates)},
            book_of={c.entry.id: c.book.id for c in candidates},
        )

    return _big.get(book_set_key(books, "smart-big"), build)


def _unique(*runs: Iterable[int]) -> Iterator[int]:
    """Indexes of several runs in order, each once (lazily: list order may run over a whole book)."""
    seen: set[int] = set()
    for run in runs:
        for index in run:
            if index not in seen:
                seen.add(index)
                yield index


def _named(found: dict[int, int], owners: Sequence[int]) -> list[int]:
    """Candidate indexes named in a text, in order of first key found."""
    seen: dict[int, None] = {}
    for key in sorted(found):
        seen.setdefault(owners[key], None)
    return list(seen)


def trim_to_tokens(text: str, limit: int, tokenizer: Tokenizer) -> str:
    """The longest prefix of ``text`` (cut at a word when possible) within ``limit`` tokens."""
    if tokenizer.count(text) <= limit:
        return text
    marker = "…"
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if tokenizer.count(text[:middle].rstrip() + marker) <= limit:
            low = middle
        else:
            high = middle - 1
    cut = text[:low]
    space = cut.rfind(" ")
    if space > low * 0.8:
        cut = cut[:space]
    return cut.rstrip() + marker


def index_line(entry: Entry) -> str:
    """One line per topic: its title and a one-sentence idea (W-5)."""
    text = " ".join(entry.content.split())
    sentence = _SENTENCE_END.split(text, maxsplit=1)[0] if text else ""
    if len(sentence) > SMART.index_idea_chars:
        sentence = sentence[: SMART.index_idea_chars - 1].rstrip() + "…"
    return f"{entry.title} — {sentence}" if sentence else entry.title


def smart_assemble(request: TurnRequest, *, tokenizer: Tokenizer, meaning: MeaningSearch | None = None) -> Selection:
    log: dict[tuple[str, str], LogRecord] = {}
    injections: list[Injection] = []

    def record(book: Book, entry: Entry, outcome: str, detail: str = "", key: str | None = None,
               message: int | None = None) -> None:
        log[(book.id, entry.id)] = LogRecord(entry=entry.id, book=book.id, outcome=outcome, detail=detail, key=key,
                                             message=message)

    def inject(book: Book, entry: Entry, slot: str, content: str, tokens: int, *, stable: bool) -> None:
        injections.append(Injection(entry=entry.id, book=book.id, slot=slot, role="system", content=content,
                                    tokens=tokens, cache_stable=stable))

    live_books: list[tuple[Book, _BookPlan]] = []
    for book in request.books:
        if not book.settings.active:
            log.update(((book.id, r.entry), r) for r in _switched_off_records(book))
            continue
        plan = _book_plan(book, tokenizer)
        live_books.append((book, plan))
        log.update(((book.id, r.entry), r) for r in plan.disabled)

    # 1. Canon (W-1).
    budget = canon_budget(request.model.input_window)
    canon = [(book, entry, tokens) for book, plan in live_books for entry, tokens in plan.canon]
    packing = canon_pack(canon, budget=budget, tokens=lambda found: found[2])
    for item in packing.items:
        book, entry, _ = item.entry
        if item.fits:
            detail = "first canon entry, always kept" if item.first else f"canon, {item.tokens} tokens"
            inject(book, entry, "canon", entry.content, item.tokens, stable=True)
            record(book, entry, Outcome.INJECTED, detail)
        else:
            record(book, entry, Outcome.CANON_OVER_BUDGET,
                   f"{item.tokens} tokens do not fit: {item.used_before} of {budget} canon tokens used")
    free = packing.free

    # 2. Whole books (W-2).
    big: list[tuple[Book, _BookPlan]] = []
    for book, plan in live_books:
        if not plan.relevant:
            continue
        if plan.relevant_tokens <= free:
            free -= plan.relevant_tokens
            for entry, tokens in zip(plan.relevant, plan.relevant_sizes):
                inject(book, entry, "relevant", entry.content, tokens, stable=True)
                record(book, entry, Outcome.INJECTED, "the whole book fits in what canon left")
        else:
            big.append((book, plan))

    world_index: list[WorldIndexLine] = []
    if big:
        lore_budget = min(SMART.lore_cap_tokens, free)
        set_of = _big_books_of(tuple(b for b, _ in big), [p for _, p in big])
        world_index = _big_books(request, set_of, tuple(b for b, _ in big), lore_budget, tokenizer, meaning,
                                 inject, record)

    request_log, unlisted = _request_log(request, log)
    return Selection(
        injections=tuple(injections),
        request_log=request_log,
        state=request.state,
        world_index=tuple(world_index),
        tokenizer=tokenizer.name,
        tokens_estimated=tokenizer.is_estimate,
        not_matched_unlisted=unlisted,
    )


def _request_log(request: TurnRequest, log: dict[tuple[str, str], LogRecord]) -> tuple[tuple[LogRecord, ...], int]:
    """C-15, in book and list order: every entry for the full log; else only the entries the turn
    explains, the simply not matched counted (the second value)."""
    if request.log_full:
        return tuple(
            log.get((book.id, entry.id))
            or LogRecord(entry=entry.id, book=book.id, outcome=Outcome.NOT_MATCHED, detail="not named, not matched")
            for book in request.books
            for entry in book.entries
        ), 0
    by_book: dict[str, list[LogRecord]] = {}
    for (book_id, _), found in log.items():
        by_book.setdefault(book_id, []).append(found)
    records: list[LogRecord] = []
    total = 0
    for book in request.books:
        total += len(book.entries)
        found_here = by_book.get(book.id)
        if found_here:
            positions = _positions(book)
            records.extend(sorted(found_here, key=lambda r: positions[r.entry]))
    return tuple(records), total - len(records)


def _positions(book: Book) -> dict[str, int]:
    """Entry id -> list position (the log's order), once per book version."""
    return _log_positions.get(book_set_key((book,), "smart-positions"),
                              lambda: {e.id: i for i, e in enumerate(book.entries)})


_Inject = Callable[..., None]
_Record = Callable[..., None]


def _big_books(
    request: TurnRequest,
    set_of: _BigBooks,
    books: tuple[Book, ...],
    lore_budget: int,
    tokenizer: Tokenizer,
    meaning: MeaningSearch | None,
    inject: _Inject,
    record: _Record,
) -> list[WorldIndexLine]:
    """W-3..W-5 for books too big to travel whole: names, meaning, full entries, world index."""
    candidates = set_of.candidates
    names = set_of.names
    chat = request.chat
    user_last = next((i for i in range(len(chat) - 1, -1, -1) if chat[i].role == "user"), None)
    replies = [i for i in range(len(chat) - 1, -1, -1) if chat[i].role == "assistant"][:SMART.replies_searched]

    # W-3: named in the user's last message, then in the character's last replies.
    named: list[int] = []
    named_why: dict[int, tuple[str, int]] = {}
    if user_last is not None:
        for index in _named(names.matcher.find_first([chat[user_last].text]), names.owners):
            named.append(index)
            named_why[index] = ("named in the user's last message", user_last)
    from_replies = 0
    for message_index in replies:
        for index in _named(names.matcher.find_first([chat[message_index].text]), names.owners):
            if index in named_why or from_replies >= SMART.max_named_from_replies:
                continue
            named.append(index)
            named_why[index] = ("named in the character's reply", message_index)
            from_replies += 1
    named = named[:SMART.max_named]

    # W-4 / W-7: meaning when every big book is mostly indexed, else plain list order.
    ranked: Iterable[int]
    how = "list order (the book is not mostly indexed yet, W-7)"
    if meaning is not None and all(meaning.mostly_indexed(book.id) for book in books):
        window = meaning_window(chat)
        ids = meaning.rank(book_ids=[b.id for b in books], messages=window,
                           limit=SMART.max_full_entries + SMART.index_topics + SMART.max_named) if window else []
        ranked = [set_of.by_id[(set_of.book_of[i], i)] for i in ids if i in set_of.book_of]
        how = "matched by meaning"
    else:
        ranked = range(len(candidates))

    # Walked lazily: in list order it may reach the whole book, but stops when the world index is full.
    order = _unique(named, ranked)
    injected: list[int] = []
    unfitted_named: list[int] = []
    passed: list[int] = []  # in order, not injected: the world index's topics after unfitted named ones
    spent = 0
    for index in order:
        if len(injected) >= SMART.max_full_entries:
            passed.append(index)
            break
        candidate = candidates[index]
        content = trim_to_tokens(candidate.entry.content, SMART.trim_tokens, tokenizer)
        tokens = tokenizer.count(content)
        if spent + tokens > lore_budget:
            if index in named_why:
                unfitted_named.append(index)
            passed.append(index)
            continue
        spent += tokens
        injected.append(index)
        inject(candidate.book, candidate.entry, "matched", content, tokens, stable=False)
        why, message = named_why.get(index, (how, None))
        trimmed = f" (trimmed to {SMART.trim_tokens} tokens)" if content != candidate.entry.content else ""
        record(candidate.book, candidate.entry, Outcome.INJECTED, why + trimmed, message=message)

    # W-5: the world index — unfitted named first, then by rank; plus entries linked from injected text.
    taken = set(injected)
    topics = list(islice(_unique(unfitted_named, passed, order), SMART.index_topics))
    taken.update(topics)
    linked: list[int] = []
    if injected:
        found = names.matcher.find_first([candidates[i].entry.content for i in injected])
        for index in _named(found, names.owners):
            if index not in taken and len(linked) < SMART.index_linked:
                linked.append(index)
                taken.add(index)
    lines = []
    for index in [*topics, *linked]:
        candidate = candidates[index]
        lines.append(WorldIndexLine(entry=candidate.entry.id, line=index_line(candidate.entry)))
        detail = "linked from an injected entry" if index in linked else "in the world index"
        if index in unfitted_named:
            detail = "named, but the lore budget was spent: first lines of the world index"
        record(candidate.book, candidate.entry, Outcome.INDEXED_ONLY, detail)
    return lines
