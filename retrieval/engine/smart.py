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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


@dataclass(slots=True)
class _NameMatcher:
    matcher: KeyMatcher
    owners: tuple[int, ...]  # key index -> candidate index


_name_matchers: CompileCache[_NameMatcher] = CompileCache(maxsize=64)
_sizes: CompileCache[dict[str, int]] = CompileCache(maxsize=256)


def entry_tokens(book: Book, tokenizer: Tokenizer) -> dict[str, int]:
    """Token count of every entry's content, computed once per book version and tokenizer.

    Every turn needs the whole book's size (W-2); counting 2,000 entries again
    each turn would cost more than the rest of the selection.
    """
    return _sizes.get(
        book_set_key((book,), "sizes", tokenizer.name),
        lambda: {entry.id: tokenizer.count(entry.content) for entry in book.entries},
    )


def _name_matcher(books: tuple[Book, ...], candidates: Sequence[_Candidate]) -> _NameMatcher:
    def build() -> _NameMatcher:
        patterns: list[KeyPattern] = []
        owners: list[int] = []
        for index, candidate in enumerate(candidates):
            for name in (candidate.entry.title, *candidate.entry.aliases):
                if name.strip():
                    patterns.append(KeyPattern(text=name, whole_words=True))
                    owners.append(index)
        return _NameMatcher(matcher=KeyMatcher(patterns), owners=tuple(owners))

    return _name_matchers.get(book_set_key(books, "smart-names"), build)


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

    live_books: list[Book] = []
    for book in request.books:
        if not book.settings.active:
            for entry in book.entries:
                record(book, entry, Outcome.COLLECTION_OFF, "the book is switched off")
            continue
        live_books.append(book)
        for entry in book.entries:
            if not entry.enabled:
                record(book, entry, Outcome.DISABLED, "disabled entries reach the model by no path (W-6)")

    # 1. Canon (W-1).
    budget = canon_budget(request.model.input_window)
    canon: list[tuple[Book, Entry, int]] = []
    for book in live_books:
        counted = entry_tokens(book, tokenizer)
        canon.extend((book, entry, counted[entry.id]) for entry in book.entries
                     if entry.enabled and (entry.canon or entry.constant))
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
    big: list[Book] = []
    for book in live_books:
        relevant = [e for e in book.entries if e.enabled and not (e.canon or e.constant)]
        if not relevant:
            continue
        counted = entry_tokens(book, tokenizer)
        sizes = [counted[e.id] for e in relevant]
        if sum(sizes) <= free:
            free -= sum(sizes)
            for entry, tokens in zip(relevant, sizes):
                inject(book, entry, "relevant", entry.content, tokens, stable=True)
                record(book, entry, Outcome.INJECTED, "the whole book fits in what canon left")
        else:
            big.append(book)

    world_index: list[WorldIndexLine] = []
    if big:
        lore_budget = min(SMART.lore_cap_tokens, free)
        world_index = _big_books(request, tuple(big), lore_budget, tokenizer, meaning, inject, record)

    request_log = tuple(
        log[(book.id, entry.id)] if (book.id, entry.id) in log
        else LogRecord(entry=entry.id, book=book.id, outcome=Outcome.NOT_MATCHED, detail="not named, not matched")
        for book in request.books
        for entry in book.entries
    )
    return Selection(
        injections=tuple(injections),
        request_log=request_log,
        state=request.state,
        world_index=tuple(world_index),
        tokenizer=tokenizer.name,
        tokens_estimated=tokenizer.is_estimate,
    )


_Inject = Callable[..., None]
_Record = Callable[..., None]


def _big_books(
    request: TurnRequest,
    books: tuple[Book, ...],
    lore_budget: int,
    tokenizer: Tokenizer,
    meaning: MeaningSearch | None,
    inject: _Inject,
    record: _Record,
) -> list[WorldIndexLine]:
    """W-3..W-5 for books too big to travel whole: names, meaning, full entries, world index."""
    candidates = [
        _Candidate(book=book, entry=entry, position=position)
        for book in books
        for position, entry in enumerate(e for e in book.entries if e.enabled and not (e.canon or e.constant))
    ]
    names = _name_matcher(books, candidates)
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
    by_id = {(c.book.id, c.entry.id): i for i, c in enumerate(candidates)}
    ranked: list[int] = []
    how = "list order (the book is not mostly indexed yet, W-7)"
    if meaning is not None and all(meaning.mostly_indexed(book.id) for book in books):
        window = meaning_window(chat)
        entry_book = {c.entry.id: c.book.id for c in candidates}
        ids = meaning.rank(book_ids=[b.id for b in books], messages=window,
                           limit=SMART.max_full_entries + SMART.index_topics + SMART.max_named) if window else []
        ranked = [by_id[(entry_book[i], i)] for i in ids if i in entry_book]
        how = "matched by meaning"
    else:
        ranked = list(range(len(candidates)))

    order = list(dict.fromkeys([*named, *ranked]))
    injected: list[int] = []
    unfitted_named: list[int] = []
    spent = 0
    for index in order:
        if len(injected) >= SMART.max_full_entries:
            break
        candidate = candidates[index]
        content = trim_to_tokens(candidate.entry.content, SMART.trim_tokens, tokenizer)
        tokens = tokenizer.count(content)
        if spent + tokens > lore_budget:
            if index in named_why:
                unfitted_named.append(index)
            continue
        spent += tokens
        injected.append(index)
        inject(candidate.book, candidate.entry, "matched", content, tokens, stable=False)
        why, message = named_why.get(index, (how, None))
        trimmed = f" (trimmed to {SMART.trim_tokens} tokens)" if content != candidate.entry.content else ""
        record(candidate.book, candidate.entry, Outcome.INJECTED, why + trimmed, message=message)

    # W-5: the world index — unfitted named first, then by rank; plus entries linked from injected text.
    taken = set(injected)
    topics = [i for i in dict.fromkeys([*unfitted_named, *[i for i in order if i not in taken]])][:SMART.index_topics]
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
