"""Reads for sharing — the one module where reading across tenants is allowed.

Every cross-tenant read is spelled ``.unscoped()`` and is filtered, in the same
expression, to what P-3 lets anyone read: ``public`` books (listed, by id) and
``unlisted`` books reached through their current link token. Private data of
one tenant stays invisible to every other: such a book is ``NotFound``, exactly
like a missing one.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np
from django.conf import settings
from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection, transaction
from django.db.models import Case, Count, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce
from django.utils import timezone

from books import exports
from books.access import book_can_edit, book_can_read
from books.models import ENTRY_LORE_FIELDS, Book, Entry, Visibility
from lore_platform.errors import Conflict, DomainError, NotFound, ValidationFailed
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Tenant
from retrieval.adapter.models import vector_to_pg_text
from retrieval.engine.embeddings import Embedder, Vector, cosine_many, top_k
from sharing import config
from sharing.documents import pg_text_search_config, search_terms, tag_normalise
from sharing.models import BookShare, BookTranslation, BookVector, TranslationStatus
from sharing.translation import PackageTranslator

NON_PRIVATE = (Visibility.PUBLIC, Visibility.UNLISTED)
PRIVATE_AGAIN_REASON = "the owner made this book private"
LINK_ROTATED_REASON = "the owner replaced this book's link; attach it again through the new link"

LIBRARY_SORTS: tuple[str, ...] = ("newest", "most_copied", "most_attached", "relevance")
SEARCH_MODES: tuple[str, ...] = ("text", "meaning")
# Search by meaning returns the nearest books, best first; pages are cut from these.
MEANING_LIMIT = 100
HNSW_EF_SEARCH = 100


class SearchUnavailable(DomainError):
    """Search by meaning needs the embedding model, and it could not run."""

    status = 503
    code = "unavailable"


# --- one book: attach, inject, read --------------------------------------------------


def _book_id(value: Any) -> int:
    if isinstance(value, bool):
        raise NotFound("No such book.", field="book_id")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise NotFound("No such book.", field="book_id") from None


def _share_by_token(link_token: str) -> BookShare | None:
    token = (link_token or "").strip()
    if not token or len(token) > 64:
        return None
    return BookShare.objects.unscoped().select_related("book", "book__tenant").filter(link_token=token).first()


def book_for_attach(actor: Actor, *, book_id: int | None = None, link_token: str | None = None) -> Book:
    """The book ``actor`` may attach, preview or read from a chat (W-9).

    - by ``book_id``: a book of the actor's own tenant they may read
      (``books.access``), or any tenant's **public** book;
    - by ``link_token``: a **public or unlisted** book through its *current*
      link (a rotated-away token finds nothing); with ``book_id`` as well, the
      token must be that book's.

    Anything else — missing, private, another tenant's unlisted book by id, a
    stale token — is ``NotFound`` (P-3: no difference between them).
    """
    if not actor.can_read:
        raise NotFound("No such book.", field="book_id")
    if link_token:
        share = _share_by_token(link_token)
        book = share.book if share is not None else None
        if book is None or (book_id is not None and book.pk != _book_id(book_id)):
            raise NotFound("No such book, or the link is no longer valid.", field="link_token")
        if book.visibility in NON_PRIVATE or book_can_read(actor, book):
            return book
        raise NotFound("No such book, or the link is no longer valid.", field="link_token")
    if book_id is None:
        raise ValidationFailed("Name a book_id or a link_token.", field="book_id")
    book = Book.objects.unscoped().select_related("tenant").filter(pk=_book_id(book_id)).first()
    if book is None:
        raise NotFound("No such book.", field="book_id")
    if book.tenant_id == actor.tenant.pk:
        if book_can_read(actor, book):
            return book
    elif book.visibility == Visibility.PUBLIC:
        return book
    raise NotFound("No such book.", field="book_id")


def book_injectable_for(tenant: Tenant, book: Book, *, link_token: str = "") -> tuple[bool, str | None]:
    """Whether ``book`` still reaches ``tenant``'s chats, and if not, why (W-9, P-1).

    A tenant's own books always do. Another tenant's book does while it is
    public or unlisted; once its owner makes it private it stops, and the
    attachment says "the owner made this book private". An unlisted book
    attached through its link (``link_token``) stops once the owner rotates the
    link, as a book turned private does.
    """
    if book.tenant_id == tenant.pk:
        return True, None
    if book.visibility == Visibility.UNLISTED and link_token:
        # Only attachments made by link pay this read; most turns never do.
        current = BookShare.objects.unscoped().filter(book_id=book.pk).values_list("link_token", flat=True).first()
        if current != link_token:
            return False, LINK_ROTATED_REASON
    if book.visibility in NON_PRIVATE:
        return True, None
    return False, PRIVATE_AGAIN_REASON


def _attachments() -> QuerySet[Any]:
    """Every tenant's attachments ("most attached", W-9). Attachments belong to cast, above
    sharing: reached through the book's reverse relation, never imported."""
    related: Any = Book._meta.get_field("attachments").related_model  # a model of the layer above: not importable
    attachments: QuerySet[Any] = related.objects.unscoped()
    return attachments


def _counted(queryset: QuerySet[Any]) -> Any:
    return Coalesce(
        Subquery(
            queryset.filter(book=OuterRef("pk")).order_by().values("book").annotate(n=Count("pk")).values("n")[:1]
        ),
        0,
    )


def _library_annotate(books: QuerySet[Book]) -> QuerySet[Book]:
    return books.select_related("tenant", "share").annotate(
        entry_count=_counted(Entry.objects.unscoped()),
        attach_count=_counted(_attachments()),
        copy_total=Coalesce(F("share__copy_count"), 0),
        listed_at=Coalesce(F("share__published_at"), F("created_at")),
    )


def library_book(book_id: Any) -> Book:
    """A **public** book by id, for anyone (P-5); anything else is NotFound."""
    book = (
        _library_annotate(Book.objects.unscoped().filter(pk=_book_id(book_id), visibility=Visibility.PUBLIC))
        .first()
    )
    if book is None:
        raise NotFound("No such book in the library.", field="book_id")
    return book


def library_book_by_link(link_token: str) -> Book:
    """A public or unlisted book through its current link token, for anyone."""
    share = _share_by_token(link_token)
    if share is None or share.book.visibility not in NON_PRIVATE:
        raise NotFound("No such book, or the link is no longer valid.", field="link_token")
    return _library_annotate(Book.objects.unscoped().filter(pk=share.book_id)).get()


def shared_book_entries(book: Book) -> QuerySet[Entry]:
    """Entries of a book already vetted as readable (library page, copy), in list order."""
    return Entry.objects.unscoped().filter(book_id=book.pk).order_by("position", "id")


def shared_book_export(
    actor: Actor | None, to: str, *, book_id: Any = None, link_token: str | None = None
) -> tuple[bytes, str, str]:
    """A public book (by id) or a public/unlisted one (by its current link) as a reader's file (I-6).

    SillyTavern world info or Character Card V2, without tenant-only settings;
    ``server`` lorebooks need an admin caller (S-1). A book of the caller's own
    tenant they may read (a colleague's, a tenant book) goes through the book's
    own export endpoint.
    """
    book = library_book_by_link(link_token) if link_token is not None else library_book(book_id)
    return exports.shared_book_export(actor=actor, book=book, entries=shared_book_entries(book), to=to)


# What a copy takes from each entry: its lore and activation settings. Usage
# statistics stay with the source; channels are the source tenant's (I-6).
COPY_ENTRY_FIELDS = (*ENTRY_LORE_FIELDS, "extra")


@dataclass(frozen=True, kw_only=True)
class BookSnapshot:
    """A book and its entries as of one version (what a copy is made from)."""

    book: Book
    version: int
    entries: list[dict[str, Any]]


def book_snapshot(book: Book, *, attempts: int = 3) -> BookSnapshot:
    """Read ``book`` (already vetted as readable) and its entries at one consistent version.

    The version is read before and after the entries; an edit in between
    means the read is retried, and a book that keeps changing is a Conflict.
    """
    for _ in range(attempts):
        fresh = Book.objects.unscoped().filter(pk=book.pk).first()
        if fresh is None:
            raise NotFound("No such book.", field="book_id")
        entries = [dict(row) for row in shared_book_entries(fresh).values(*COPY_ENTRY_FIELDS)]
        after = Book.objects.unscoped().filter(pk=book.pk).values_list("version", flat=True).first()
        if after == fresh.version:
            return BookSnapshot(book=fresh, version=fresh.version, entries=entries)
    raise Conflict("The book kept changing while it was being read; try again.", field="book_id")


# --- the library --------------------------------------------------------------------


def _library_base(*, tag: str | None, language: str | None) -> QuerySet[Book]:
    books = Book.objects.unscoped().filter(visibility=Visibility.PUBLIC)
    if tag and tag.strip():
        books = books.filter(share__tags_index__contains=f"|{tag_normalise(tag)}|")
    if language and language.strip():
        base = config.language_base(language)  # "en" also finds books written in "en-GB"
        books = books.filter(Q(language__iexact=base) | Q(language__istartswith=f"{base}-"))
    return books


_SORT_ORDER: dict[str, tuple[Any, ...]] = {
    "newest": (F("listed_at").desc(), "-id"),
    "most_copied": ("-copy_total", F("listed_at").desc(), "-id"),
    "most_attached": ("-attach_count", F("listed_at").desc(), "-id"),
}


def _sort_check(sort: str | None, *, searching: bool) -> str:
    chosen = sort or ("relevance" if searching else "newest")
    if chosen not in LIBRARY_SORTS:
        raise ValidationFailed("Sort by one of {choices}.", values={"choices": ", ".join(LIBRARY_SORTS)}, field="sort")
    if chosen == "relevance" and not searching:
        chosen = "newest"
    return chosen


def library_books(
    *, tag: str | None = None, language: str | None = None, sort: str | None = None
) -> QuerySet[Book]:
    """Public books of every tenant, filtered by tag and language, sorted (P-5).

    Each book carries ``entry_count``, ``attach_count``, ``copy_total`` and
    ``listed_at`` (when it was last published).
    """
    chosen = _sort_check(sort, searching=False)
    return _library_annotate(_library_base(tag=tag, language=language)).order_by(*_SORT_ORDER[chosen])


def library_search(
    *,
    q: str,
    mode: str = "text",
    tag: str | None = None,
    language: str | None = None,
    sort: str | None = None,
    query_language: str | None = None,
    embedder: Embedder | None = None,
) -> QuerySet[Book] | list[Book]:
    """Search public books by words or by meaning (P-5); filters and sorts as ``library_books``.

    ``text``: PostgreSQL full-text search over title (weight A), description and
    tags (B) and entry titles (C), each stemmed in the book's language and also
    kept as plain words; the query is read both plainly and in
    ``query_language`` (default: the language filter, else English). Ranked by
    ``ts_rank`` for ``sort=relevance``. On SQLite every term must appear
    (``icontains``) and books whose title holds more terms rank first.

    ``meaning``: the query is embedded and compared with each book's vector
    (pgvector cosine distance on PostgreSQL, in process on SQLite); the nearest
    :data:`MEANING_LIMIT` books, each with a ``similarity``.
    """
    text = (q or "").strip()
    if not text:
        raise ValidationFailed("Say what to search for.", field="q")
    if len(text) > 500:
        raise ValidationFailed("A search is at most 500 characters.", field="q")
    if mode not in SEARCH_MODES:
        raise ValidationFailed(
            "Search mode is one of {choices}.", values={"choices": ", ".join(SEARCH_MODES)}, field="mode"
        )
    chosen = _sort_check(sort, searching=True)
    base = _library_base(tag=tag, language=language)
    if mode == "meaning":
        return _search_by_meaning(text, base, sort=chosen, embedder=embedder)

    if connection.vendor == "postgresql":
        stemmed = pg_text_search_config(query_language or language or "en")
        query = SearchQuery(text, config="simple", search_type="websearch")
        if stemmed != "simple":
            query = query | SearchQuery(text, config=stemmed, search_type="websearch")
        found = _library_annotate(base.filter(share__search_vector=query)).annotate(
            rank=SearchRank(F("share__search_vector"), query)
        )
    else:
        terms = search_terms(text)
        found = base  # type: ignore[assignment]  # unranked: SQLite has no text search rank
        for term in terms:
            found = found.filter(share__search_text__icontains=term)
        title_hits = [Case(When(title__icontains=t, then=Value(1)), default=Value(0)) for t in terms]
        rank: Any = Value(0, output_field=IntegerField())
        for hit in title_hits:
            rank = rank + hit
        found = _library_annotate(found).annotate(rank=rank)
    if chosen == "relevance":
        return found.order_by("-rank", F("listed_at").desc(), "-id")
    return found.order_by(*_SORT_ORDER[chosen])


# --- search by meaning: a relevance floor, and the text and vector rankings fused (issue 28) ---------
#
# Raw cosine similarity says little on its own: a book whose vector text is short or generic (a file
# name, a handful of entry titles) sits close to *any* query, gibberish included (USE gives
# "zzqx unrelated gibberish" 0.33 against "kobold_story_aid_ewijson_keys", more than most real matches
# score). So each book's similarity is measured against its own similarity to a few meaningless
# queries (NULL_QUERIES): the *margin* is how much closer the query is than noise. A book is found
# when its margin reaches MEANING_MARGIN_FLOOR, or when its text holds every word of the query (a
# title search typed in meaning mode); the rest is not returned at all. The books found are ranked by
# reciprocal-rank fusion (RRF_K, RRF_WEIGHTS) of the vector ranking (by margin) and the text ranking
# (how many of the query's words the book's title, description and tags hold). Measured on the judged
# queries of bench/library_search_judged.json (python -m bench.library_search).
NULL_QUERIES: tuple[str, ...] = (
    "asdf qwerty", "lorem ipsum dolor sit amet", "xkcd vbnm hjkl", "untitled", "new entry", "test",
    "hello world", "aaaa bbbb cccc",
)
MEANING_MARGIN_FLOOR = 0.06
# k = 10 and the words at a quarter of the meaning's weight: the best of k in {10, 20, 60} and weights in
# {0.25, 0.5, 1} on the judged set (the words mostly break ties between books about the query).
RRF_K = 10
RRF_WEIGHTS = (1.0, 0.25)
# Words too common to say anything about a book (the text ranking ignores them).
_STOP_WORDS = frozenset(
    "a an and are as at be by de del el en es for from in is it la las los of on or que the their to un una "
    "with y".split()
)
_null_vectors: dict[tuple[str, int], Any] = {}


def _null_matrix(embedder: Embedder) -> Any:
    key = (embedder.name, embedder.dimension)
    if key not in _null_vectors:
        rows = np.asarray(embedder.embed_queries(list(NULL_QUERIES)), dtype=np.float32)
        _null_vectors[key] = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    return _null_vectors[key]


def meaning_terms(text: str) -> list[str]:
    """The query's words that can say something about a book (lower case, no stop words, ≥ 2 characters)."""
    words = [w.strip(".,;:!?¿¡()[]{}\"'").casefold() for w in text.split()]
    return [w for w in dict.fromkeys(words) if len(w) >= 2 and w not in _STOP_WORDS][:20]


def _text_ranking(terms: list[str], base: QuerySet[Book]) -> tuple[list[int], set[int]]:
    """Books whose own words (title, description, tags) hold any of ``terms``, most terms first; and the
    books whose whole search text (entry titles too) holds every term.

    Entry titles stay out of the ranking: a big book's hundreds of titles hold some word of almost any
    query, which pushed big books up on the judged set (bench.library_search).
    """
    if not terms:
        return [], set()
    hits: Any = Value(0, output_field=IntegerField())
    any_term = Q()
    every_term = Q()
    for term in terms:
        own = Q(title__icontains=term) | Q(description__icontains=term) | Q(share__tags_index__icontains=term)
        hits = hits + Case(When(own, then=Value(1)), default=Value(0), output_field=IntegerField())
        any_term |= own
        every_term &= Q(share__search_text__icontains=term)
    rows = list(
        base.filter(any_term).annotate(hits=hits).order_by("-hits", "-id").values_list("pk", flat=True)[:MEANING_LIMIT]
    )
    return rows, set(base.filter(every_term).values_list("pk", flat=True)[:MEANING_LIMIT])


def _margins(vectors: QuerySet[BookVector], nearest: list[tuple[int, float]], embedder: Embedder) -> dict[int, float]:
    """Each nearest book's similarity minus its similarity to noise (see NULL_QUERIES)."""
    if not nearest:
        return {}
    ids = [book_id for book_id, _ in nearest]
    rows = list(vectors.filter(book_id__in=ids).values_list("book_id", "embedding"))
    matrix = np.vstack([np.asarray(vec, dtype=np.float32) for _, vec in rows])
    matrix = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    noise = (matrix @ _null_matrix(embedder).T).max(axis=1)
    baseline = {int(book_id): float(noise[i]) for i, (book_id, _) in enumerate(rows)}
    return {book_id: similarity - baseline.get(book_id, 0.0) for book_id, similarity in nearest}


def fuse_rankings(
    rankings: Sequence[Sequence[int]], *, k: int = RRF_K, weights: Sequence[float] | None = None
) -> list[int]:
    """Reciprocal-rank fusion: list j gives its i-th item weight_j/(k+i+1); the sums decide, ties by first seen."""
    scores: dict[int, float] = {}
    for j, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[j]
        for i, item in enumerate(ranking):
            scores[item] = scores.get(item, 0.0) + weight / (k + i + 1)
    return sorted(scores, key=lambda item: -scores[item])


def _search_by_meaning(text: str, base: QuerySet[Book], *, sort: str, embedder: Embedder | None) -> list[Book]:
    try:
        if embedder is None:
            from retrieval.adapter.embedders import embedder_get

            embedder = embedder_get()
        [query] = embedder.embed_queries([text])
        _null_matrix(embedder)
    except Exception as exc:  # the model is missing or broken: say so instead of a 500
        raise SearchUnavailable(
            "Search by meaning is unavailable right now; search by words (mode=text) still works.", field="mode"
        ) from exc
    vectors = BookVector.objects.unscoped().filter(
        model_name=embedder.name, dimension=embedder.dimension, book__in=base.values("pk")
    )
    if settings.VECTOR_BACKEND == "pgvector" and connection.vendor == "postgresql":
        nearest = _nearest_pgvector(vectors, query, embedder.dimension)
    else:
        nearest = _nearest_in_process(vectors, query)
    similarity = dict(nearest)
    margins = _margins(vectors, nearest, embedder)
    by_meaning = sorted((i for i, m in margins.items() if m >= MEANING_MARGIN_FLOOR), key=lambda i: -margins[i])
    by_text, every_word = _text_ranking(meaning_terms(text), base)
    found = set(by_meaning) | every_word
    ranked = [i for i in fuse_rankings([by_meaning, by_text], weights=RRF_WEIGHTS) if i in found]
    by_id = {book.pk: book for book in _library_annotate(Book.objects.unscoped().filter(pk__in=ranked))}
    hits: list[Book] = []
    for book_id in ranked:
        book = by_id.get(book_id)
        if book is not None:
            book.similarity = similarity.get(book_id)  # type: ignore[attr-defined]
            hits.append(book)
    if sort == "most_copied":
        hits.sort(key=lambda b: (-b.copy_total, -b.listed_at.timestamp(), -b.pk))  # type: ignore[attr-defined]
    elif sort == "most_attached":
        hits.sort(key=lambda b: (-b.attach_count, -b.listed_at.timestamp(), -b.pk))  # type: ignore[attr-defined]
    elif sort == "newest":
        hits.sort(key=lambda b: (-b.listed_at.timestamp(), -b.pk))  # type: ignore[attr-defined]
    return hits


@dataclass(frozen=True, kw_only=True)
class MeaningIndexState:
    """How many of the library's books (under the same filters) search by meaning can find yet."""

    indexed: int
    total: int

    @property
    def incomplete(self) -> bool:
        return self.indexed < self.total


def library_meaning_index_state(*, tag: str | None = None, language: str | None = None) -> MeaningIndexState:
    """Public books with a vector of the configured model, out of all public books (same filters).

    A book is embedded after it is published (a background task): until then search by meaning
    cannot find it, and the library says its results may be incomplete.
    """
    from retrieval.adapter.embedders import embedder_configured_name

    base = _library_base(tag=tag, language=language)
    total = base.count()
    indexed = BookVector.objects.unscoped().filter(
        model_name=embedder_configured_name(), book__in=base.values("pk")
    ).count() if total else 0
    return MeaningIndexState(indexed=min(indexed, total), total=total)


def nearest_books_pgvector(vectors: QuerySet[BookVector], query: Vector, dimension: int) -> QuerySet[Any]:
    """The pgvector statement: cosine distance with the cast the partial HNSW index was built on."""
    d = int(dimension)  # inlined: the cast and the index predicate need literals
    table = BookVector._meta.db_table
    distance = RawSQL(f'("{table}"."embedding"::vector({d})) <=> %s::vector({d})', [vector_to_pg_text(query)])
    return vectors.filter(dimension=d).annotate(distance=distance).order_by("distance")[:MEANING_LIMIT]


def _nearest_pgvector(vectors: QuerySet[BookVector], query: Vector, dimension: int) -> list[tuple[int, float]]:
    with transaction.atomic(), connection.cursor() as cursor:
        # Keep scanning the graph until enough rows pass the filters, in distance order.
        cursor.execute(
            "SELECT set_config('hnsw.iterative_scan', 'strict_order', true), set_config('hnsw.ef_search', %s, true)",
            [str(HNSW_EF_SEARCH)],
        )
        rows = list(nearest_books_pgvector(vectors, query, dimension).values_list("book_id", "distance"))
    return [(int(book_id), 1.0 - float(dist)) for book_id, dist in rows]


def _nearest_in_process(vectors: QuerySet[BookVector], query: Vector) -> list[tuple[int, float]]:
    rows = list(vectors.values_list("book_id", "embedding"))
    if not rows:
        return []
    ids = [int(book_id) for book_id, _ in rows]
    matrix = np.vstack([np.asarray(vec, dtype=np.float32) for _, vec in rows])
    scores = cosine_many(matrix, query)
    return [(ids[i], float(scores[i])) for i in top_k(scores, MEANING_LIMIT)]


# --- sharing state, for the book's own tenant ------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TranslationLine:
    language: str
    status: str  # pending | ready | failed | unavailable
    version: int | None
    message: str | None = None


@dataclass(frozen=True, kw_only=True)
class SharingState:
    book: Book
    share: BookShare | None
    can_manage: bool
    entry_count: int
    attach_count: int
    translations: list[TranslationLine] = field(default_factory=list)

    @property
    def link_active(self) -> bool:
        return self.share is not None and self.book.visibility in NON_PRIVATE


def book_attach_count(book: Book) -> int:
    """Attachments of ``book`` in every tenant ("most attached", W-9)."""
    return _attachments().filter(book_id=book.pk).count()


def book_sharing_state(actor: Actor, book: Book) -> SharingState:
    """What the book's page in its own tenant shows about sharing (``book`` already accessed)."""
    share = BookShare.objects.for_tenant(book.tenant).select_related("source_book").filter(book=book).first()
    lines: list[TranslationLine] = []
    if book.visibility in NON_PRIVATE:
        lines = [
            TranslationLine(
                language=d.requested or "",
                status=d.status,
                version=d.translation.version if d.translation is not None else None,
                message=d.message,
            )
            for d in (book_display(book, language) for language in config.display_languages())
            if d.status != "original"
        ]
    return SharingState(
        book=book,
        share=share,
        can_manage=book_can_edit(actor, book),
        entry_count=Entry.objects.for_tenant(book.tenant).filter(book=book).count(),
        attach_count=book_attach_count(book),
        translations=lines,
    )


# --- translations for display -------------------------------------------------------------


DisplayStatus = Literal["original", "ready", "pending", "failed", "unavailable"]


@dataclass(frozen=True, kw_only=True)
class Display:
    """Which text a page serves for a requested language, and why (P-4)."""

    requested: str | None
    language: str  # the language of the text served
    status: DisplayStatus
    message: str | None = None
    translation: BookTranslation | None = None

    @property
    def translated(self) -> bool:
        return self.status == "ready" and self.translation is not None


def translation_pairs() -> set[tuple[str, str]]:
    """Installed language packages, as (from, to) pairs."""
    return PackageTranslator(config.packages_dir()).available_pairs()


def translation_unavailable_reason(source: str, target: str, pairs: set[tuple[str, str]] | None = None) -> str | None:
    """Why ``source → target`` cannot be translated here, or None when it can."""
    if not source:
        return "The book does not say which language it is written in."
    if target not in config.display_languages():
        return f"{target!r} is not one of this server's display languages."
    if (source, target) not in (translation_pairs() if pairs is None else pairs):
        return f"Translation is unavailable: no language package for {source} → {target} is installed."
    return None


def _translations_current(books: Sequence[Book], language: str) -> dict[int, BookTranslation]:
    if not books:
        return {}
    wanted = Q()
    for book in books:
        wanted |= Q(book_id=book.pk, version=book.version)
    rows = BookTranslation.objects.unscoped().filter(wanted, language=language)
    return {row.book_id: row for row in rows}


def books_display(
    books: Sequence[Book], language: str | None, *, pairs: set[tuple[str, str]] | None = None
) -> dict[int, Display]:
    """The display decision for each book (one query for a whole page)."""
    requested = config.language_base(language) or None
    result: dict[int, Display] = {}
    if requested is None:
        return {b.pk: Display(requested=None, language=b.language, status="original") for b in books}
    pairs = translation_pairs() if pairs is None else pairs
    needing = [b for b in books if config.language_base(b.language) != requested]
    rows = _translations_current(needing, requested)
    for book in books:
        source = config.language_base(book.language)
        if source == requested:
            result[book.pk] = Display(requested=requested, language=book.language, status="original")
            continue
        reason = translation_unavailable_reason(source, requested, pairs)
        row = rows.get(book.pk)
        if row is not None and row.status == TranslationStatus.READY:
            result[book.pk] = Display(requested=requested, language=requested, status="ready", translation=row)
        elif reason is not None:
            result[book.pk] = Display(requested=requested, language=book.language, status="unavailable", message=reason)
        elif row is not None and row.status == TranslationStatus.FAILED:
            result[book.pk] = Display(
                requested=requested,
                language=book.language,
                status="failed",
                message="The translation failed; showing the original.",
            )
        else:
            result[book.pk] = Display(
                requested=requested,
                language=book.language,
                status="pending",
                message="The translation is being prepared; showing the original for now.",
            )
    return result


def book_display(book: Book, language: str | None) -> Display:
    return books_display([book], language)[book.pk]


# --- background work: what is stale ---------------------------------------------------------


def shared_books_stale(*, limit: int = 500, requested_before: datetime | None = None) -> list[tuple[int, int]]:
    """``(tenant_id, book_id)`` of non-private books whose sharing state is behind their version.

    A book counts once its refresh was requested before ``requested_before``
    and has not finished (a lost task), or was never requested for its
    current version (a change the books app did not report).
    """
    requested_before = requested_before or timezone.now() - timedelta(minutes=10)
    books = Book.objects.unscoped().filter(visibility__in=NON_PRIVATE)
    stale = books.filter(share__isnull=True) | books.filter(
        Q(share__refresh_requested_version__lt=F("version"))
        | (Q(share__refreshed_version__lt=F("version")) & Q(share__refresh_requested_at__lt=requested_before))
    )
    return list(stale.order_by("id").values_list("tenant_id", "pk")[:limit])


def translations_stale(*, limit: int = 500, requested_before: datetime | None = None) -> list[tuple[int, int, str]]:
    """``(tenant_id, book_id, language)`` of pending translations of a current version left behind."""
    requested_before = requested_before or timezone.now() - timedelta(minutes=10)
    rows = BookTranslation.objects.unscoped().filter(
        status=TranslationStatus.PENDING,
        requested_at__lt=requested_before,
        version=F("book__version"),
        book__visibility__in=NON_PRIVATE,
    )
    return list(rows.order_by("id").values_list("tenant_id", "book_id", "language")[:limit])


def shared_books_in_language(source_language: str) -> list[tuple[int, int]]:
    """``(tenant_id, book_id)`` of non-private books written in ``source_language``."""
    base = config.language_base(source_language)
    books = Book.objects.unscoped().filter(visibility__in=NON_PRIVATE)
    matching = books.filter(Q(language__iexact=base) | Q(language__istartswith=f"{base}-"))
    return list(matching.order_by("id").values_list("tenant_id", "pk"))


def library_tags(*, limit: int = 300) -> list[str]:
    """Tags of the library's public books, most used first (suggestions for a book's tags)."""
    counts: dict[str, int] = {}
    rows = Book.objects.unscoped().filter(visibility=Visibility.PUBLIC).values_list("tags", flat=True)[:5000]
    for tags in rows:
        for tag in tags or []:
            if isinstance(tag, str) and tag.strip():
                counts[tag.strip()] = counts.get(tag.strip(), 0) + 1
    return [t for t, _n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].lower()))][:limit]
