"""Reads for books and entries: the editor list, its warnings, the canon meter."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from django.db.models import Count, Q, QuerySet
from django.db.models.functions import Lower

from books.access import books_visible_to
from books.decorators import Decorator, decorators_read
from books.models import Book, Entry, Lineage, Profile
from books.tokens import model_input_window, model_tokenizer
from books.warnings import EntryWarning, entry_warnings
from lore_platform.errors import ValidationFailed
from lore_platform.tenancy.actor import Actor
from retrieval.engine.rules import SMART
from retrieval.engine.smart import canon_budget, canon_pack

EntrySort = Literal["position", "title", "most_used", "recently_edited"]

ENTRY_SORTS: dict[str, tuple[Any, ...]] = {
    # List order: what canon packing and "whole book travels" follow (W-1, W-2).
    "position": ("position", "id"),
    # C-9: the display name sorts the editor list (case-insensitive; list order breaks ties).
    "title": (Lower("title"), "title", "position", "id"),
    # W-11: surfaces dead lore from the other end.
    "most_used": ("-usage_count", "position", "id"),
    "recently_edited": ("-updated_at", "-id"),
}


def book_list(
    *,
    actor: Actor,
    profile: str | None = None,
    scope: str | None = None,
    lineage: Lineage | None = None,
    q: str | None = None,
) -> QuerySet[Book]:
    """Books the actor may read, newest change first, with their entry counts."""
    books = books_visible_to(actor)
    if profile:
        books = books.filter(profile=profile)
    if scope:
        books = books.filter(scope=scope)
    if lineage is not None:
        books = books.filter(lineage=lineage)
    if q:
        books = books.filter(Q(title__icontains=q) | Q(description__icontains=q))
    return books.annotate(entry_count=Count("entries")).order_by("-updated_at", "-id")


def book_entry_count(book: Book) -> int:
    return Entry.objects.for_tenant(book.tenant).filter(book=book).count()


def entry_list(
    *,
    book: Book,
    enabled: bool | None = None,
    canon: bool | None = None,
    never_used: bool | None = None,
    q: str | None = None,
    sort: str = "position",
) -> QuerySet[Entry]:
    """The editor list of ``book`` (already accessed), filtered and sorted.

    ``enabled`` True/False is the enabled/disabled filter (W-6); ``canon``
    picks canon or when-relevant entries; ``never_used`` True keeps entries no
    chat has used (W-11); ``q`` searches title, content and keys/aliases.
    """
    if sort not in ENTRY_SORTS:
        raise ValidationFailed("Sort by one of {sorts}.", values={"sorts": ", ".join(ENTRY_SORTS)}, field="sort")
    entries = Entry.objects.for_tenant(book.tenant).filter(book=book)
    if enabled is not None:
        entries = entries.filter(enabled=enabled)
    if canon is not None:
        entries = entries.filter(constant=canon)
    if never_used is not None:
        entries = entries.filter(usage_count=0) if never_used else entries.filter(usage_count__gt=0)
    if q and q.strip():
        text = q.strip()
        entries = entries.filter(
            Q(title__icontains=text) | Q(content__icontains=text) | Q(keys__icontains=text)
        )
    return entries.order_by(*ENTRY_SORTS[sort])


def book_in_use(book: Book) -> bool:
    """Has any entry of the book reached a chat? (Gates the never-surfaced warning.)"""
    return Entry.objects.for_tenant(book.tenant).filter(book=book, usage_count__gt=0).exists()


@dataclass(frozen=True, kw_only=True)
class EntryNotes:
    """What the editor shows beside an entry's own fields."""

    warnings: list[EntryWarning]
    decorators: list[Decorator]


def entries_notes(
    book: Book, entries: list[Entry], *, model_id: str | None = None, tokenizer: str | None = None
) -> dict[int, EntryNotes]:
    """Warnings and decorators for a page of entries of ``book``."""
    in_use = book_in_use(book) if book.profile == Profile.SMART else False
    count = model_tokenizer(model_id, tokenizer).count
    notes: dict[int, EntryNotes] = {}
    for entry in entries:
        report = decorators_read(entry.content) if book.profile == Profile.CLASSIC else None
        notes[entry.pk] = EntryNotes(
            warnings=entry_warnings(entry, book=book, book_in_use=in_use, count_tokens=count, decorators=report),
            decorators=list(report.decorators) if report else [],
        )
    return notes


@dataclass(frozen=True, kw_only=True)
class CanonLine:
    entry_id: int
    title: str
    tokens: int
    fits: bool


@dataclass(frozen=True, kw_only=True)
class CanonMeter:
    model_id: str
    tokenizer: str
    tokens_are_estimate: bool  # the model has no bundled tokenizer: counts err high
    input_window: int
    budget: int
    tokens: int  # what the book's canon asks for every turn
    injected_tokens: int  # what W-1 packing would actually inject from this book alone
    over_budget: bool
    heavy_at: int  # canon tokens from which canon counts as heavy for this budget
    heavy: bool  # tokens >= heavy_at (over budget is heavy too)
    message: str
    warning: str | None
    entries: list[CanonLine]


def book_canon_meter(
    *, book: Book, model_id: str = "", input_window: int | None = None, tokenizer: str | None = None
) -> CanonMeter:
    """ "Core canon: N tokens per turn" for a model, with W-1's packing of this book alone.

    Canon is the book's enabled canon entries in list order, packed by the
    engine's :func:`~retrieval.engine.smart.canon_pack` (the live selection's
    own W-1 packing): the first always stays, later ones that do not fit are
    skipped (SPEC §10). The meter warns when canon is over budget and, before
    that, when it gets heavy: from ``SMART.canon_heavy_percent`` of the budget.
    """
    window = input_window or model_input_window(model_id)
    if not window:
        raise ValidationFailed(
            "Give the model's input window (input_window): the canon budget is {percent}% of it (W-1).",
            values={"percent": SMART.canon_share_percent},
            field="input_window",
            rule="W-1",
        )
    if window <= 0:
        raise ValidationFailed("The model's input window must be positive.", field="input_window", rule="W-1")
    budget = canon_budget(window)
    counter = model_tokenizer(model_id, tokenizer)
    canon = Entry.objects.for_tenant(book.tenant).filter(book=book, constant=True, enabled=True).order_by(
        "position", "id"
    )
    packing = canon_pack(list(canon), budget=budget, tokens=lambda entry: counter.count(entry.content))
    lines = [
        CanonLine(entry_id=item.entry.pk, title=item.entry.title, tokens=item.tokens, fits=item.fits)
        for item in packing.items
    ]
    total = packing.total
    over = total > budget
    heavy_at = SMART.canon_heavy_at(budget)
    heavy = total > 0 and total >= heavy_at
    dropped = sum(1 for line in lines if not line.fits)
    warning = None
    if over:
        warning = (
            f"Canon needs {total:,} tokens but this model's canon budget is {budget:,} (W-1)"
            + (f"; {dropped} canon entr{'y' if dropped == 1 else 'ies'} would not be injected." if dropped else ".")
        )
    elif heavy:
        share = total * 100 // budget
        warning = (
            f"Canon is getting heavy: {total:,} tokens take {share}% of this model's {budget:,}-token canon budget "
            f"(heavy from {SMART.canon_heavy_percent}%, {heavy_at:,} tokens; W-1). Canon is spent every turn and "
            "leaves less room for when-relevant lore."
        )
    return CanonMeter(
        model_id=model_id,
        tokenizer=counter.name,
        tokens_are_estimate=counter.is_estimate,
        input_window=window,
        budget=budget,
        tokens=total,
        injected_tokens=packing.used,
        over_budget=over,
        heavy_at=heavy_at,
        heavy=heavy,
        message=f"Core canon: {total:,} tokens per turn",
        warning=warning,
        entries=lines,
    )


def book_for_lineage(*, actor: Actor, lineage: Lineage) -> Book | None:
    """The persona book of a lineage, if the actor may read it (S-2)."""
    return books_visible_to(actor).filter(lineage=lineage).first()


def book_version(book: Book) -> int:
    """The book's current version (caches key on it)."""
    return Book.objects.for_tenant(book.tenant).values_list("version", flat=True).get(pk=book.pk)


def book_tags_known(actor: Actor, *, limit: int = 300) -> list[str]:
    """Tags on the books the actor reads, most used first (suggestions next to the library's)."""
    counts: dict[str, int] = {}
    for tags in books_visible_to(actor).values_list("tags", flat=True)[:5000]:
        for tag in tags or []:
            if isinstance(tag, str) and tag.strip():
                counts[tag.strip()] = counts.get(tag.strip(), 0) + 1
    return [t for t, _n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].lower()))][:limit]
