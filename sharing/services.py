"""Writes for sharing: visibility, links, copies, and keeping shared books' library state fresh.

Each service checks everything first (access, limits, the rule it enforces)
and then writes, inside one transaction; a refusal writes nothing. Side
effects (search vectors, translations) run after commit, as Celery tasks that
take ids and are idempotent.

Books own ``Book``; the only fields written here are the ones P-1 and L-1 hand
to sharing (``visibility`` and, when a book stops being private,
``living_world``), and every change is counted with
``books.services.book_version_bump``. Copies are made with the books
services (``book_create``, ``entries_create_bulk``), so every limit of the
copier's side applies.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.postgres.search import SearchVector
from django.db import IntegrityError, connection, transaction
from django.db.models import F, TextField, Value
from django.db.models.expressions import CombinedExpression
from django.utils import timezone

from books import limits
from books.access import access_book
from books.models import Book, Entry, Profile, Scope, Visibility
from books.services import book_create, book_version_bump, entries_create_bulk
from lore_platform.errors import LimitExceeded, NotFound, PermissionDenied, ValidationFailed
from lore_platform.tasks import task_publish
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import Tenant
from retrieval.engine.embeddings import Embedder, batched
from sharing import config, selectors
from sharing.documents import SearchDocument, book_vector_text, search_document, tags_index, text_hash
from sharing.models import BookShare, BookTranslation, BookVector, TranslationStatus, link_token_new
from sharing.translation import PackageTranslator, TranslationUnavailable, packages_installed

logger = logging.getLogger(__name__)

# Entries per call of entries_create_bulk when copying (its batch limit, I-3).
COPY_BATCH = limits.IMPORT_BATCH.value
# Lines handed to the translator at once: bounds memory on 2,000-entry books.
TRANSLATE_CHUNK = 256
# A refresh requested this recently is on its way: asking again only duplicates work.
REFRESH_GRACE = timedelta(minutes=10)


def _tenant(tenant: Tenant | int) -> Tenant | None:
    if isinstance(tenant, Tenant):
        return tenant
    return Tenant.objects.filter(pk=int(tenant)).first()


def _book_of(tenant_id: int, book_id: int) -> Book | None:
    tenant = _tenant(tenant_id)
    return Book.objects.for_tenant(tenant).filter(pk=book_id).first() if tenant is not None else None


def _share_get_or_create(book: Book) -> BookShare:
    """The book's sharing row (in the book's tenant), created on first use."""
    share = BookShare.objects.for_tenant(book.tenant).filter(book=book).first()
    if share is not None:
        return share
    try:
        with transaction.atomic():  # a savepoint: a concurrent first use may win the race
            return BookShare.objects.create(tenant=book.tenant, book=book)
    except IntegrityError:
        return BookShare.objects.for_tenant(book.tenant).get(book=book)


# --- visibility (P-1, L-1) ---------------------------------------------------------------


def book_publish_check(book: Book) -> None:
    """P-1: a book is listed in the library only with at least 10 entries."""
    minimum = limits.PUBLISH_MIN_ENTRIES
    count = Entry.objects.for_tenant(book.tenant).filter(book=book).count()
    if count < minimum.value:
        raise LimitExceeded(
            "Publishing needs at least {minimum} entries; this book has {count}. "
            "Add {missing} more, or share it unlisted (by link) instead ({rule}).",
            values={"minimum": minimum.value, "count": count, "missing": minimum.value - count, "rule": minimum.rule},
            field="visibility",
            rule=minimum.rule,
            code="too_few_entries",
            details={"min": minimum.value, "actual": count, "unit": "entries"},
        )


@transaction.atomic
def book_visibility_set(*, actor: Actor, book: Book, visibility: str) -> BookShare:
    """Make a book private, unlisted (reached by its link) or public (listed in the library).

    Check: the actor edits the book (its owner; admins for tenant-owned books)
    with a write key; public needs ≥10 entries (P-1). Execute: the visibility
    changes, a non-private book loses its living-world flag (L-1), the book
    version is bumped, and a shared book's search document is written at once
    (so it is findable on commit) while its vector and translations are
    refreshed after commit. Setting the current visibility again changes nothing.
    """
    if visibility not in Visibility.values:
        raise ValidationFailed(
            "Visibility is one of {choices}.", values={"choices": ", ".join(Visibility.values)}, field="visibility",
            rule="P-1",
        )
    locked = access_book(actor, book.pk, need="edit", for_update=True)
    if visibility == Visibility.PUBLIC and locked.visibility != Visibility.PUBLIC:
        book_publish_check(locked)
    if locked.visibility == visibility:
        return _share_get_or_create(locked)

    now = timezone.now()
    changes: dict[str, Any] = {"visibility": visibility}
    if visibility != Visibility.PRIVATE:
        changes["living_world"] = False  # L-1: the living world is for private books only
    Book.objects.for_tenant(locked.tenant).filter(pk=locked.pk).update(**changes)
    for name, value in changes.items():
        setattr(locked, name, value)
    book_version_bump(locked)

    share = _share_get_or_create(locked)
    share.visibility_changed_at = now
    fields = ["visibility_changed_at"]
    if visibility == Visibility.PUBLIC:
        share.published_at = now
        fields.append("published_at")
    share.save(update_fields=fields)
    if visibility != Visibility.PRIVATE:
        _search_document_write(locked, share)
        book_shared_changed(locked)  # once, even when the books app reports the bump too
    for name, value in changes.items():
        setattr(book, name, value)
    book.version = locked.version
    share.book = locked
    return share


@transaction.atomic
def book_link_rotate(*, actor: Actor, book: Book) -> BookShare:
    """Give the book a new link token; the old link stops working at once.

    Attachments made through the old link stop too, and their turns list the
    book in ``books_left_out`` with the reason (P-1, our reading); attachments
    of a public book made by id keep working.
    """
    locked = access_book(actor, book.pk, need="edit", for_update=True)
    share = _share_get_or_create(locked)
    share.link_token = link_token_new()
    share.link_rotated_at = timezone.now()
    share.save(update_fields=["link_token", "link_rotated_at"])
    share.book = locked
    return share


# --- copy to my library (P-2) -------------------------------------------------------------

# Book settings a copy keeps. Channels belong to the source tenant's server (I-6);
# the living world starts off (L-1 is the copier's choice).
COPY_BOOK_FIELDS = (
    "description",
    "tags",
    "language",
    "scan_depth",
    "token_budget",
    "recursive",
    "case_sensitive",
    "whole_words",
    "active",
    "extra",
)


@transaction.atomic
def book_copy(*, actor: Actor, book_id: int | None = None, link_token: str | None = None) -> Book:
    """Copy a readable book into the actor's library: an editable, private duplicate.

    Readable means what ``selectors.book_for_attach`` allows: the actor's own
    tenant's books they may read, any public book, an unlisted book through
    its current link. The copy keeps the entries (lore and activation
    settings) and the book's settings, belongs to the actor (server lorebooks:
    to the tenant, as a server-wide collection only admins create, S-1), and
    records its provenance (source book and version); the source's copy count
    goes up by one. All or nothing: a copy that would break one of the
    copier's limits is refused whole.
    """
    if not actor.can_write:
        raise PermissionDenied("This API key may only read.")
    source = selectors.book_for_attach(actor, book_id=book_id, link_token=link_token)
    server_book = source.profile == Profile.SERVER
    if server_book and not actor.is_admin:
        raise PermissionDenied(
            "A server lorebook is copied as a server-wide collection, and only tenant admins create those (S-1).",
            rule="S-1",
        )
    if not server_book and actor.user is None:
        raise PermissionDenied("This API key acts for no user, so it cannot own a copy.")
    snapshot = selectors.book_snapshot(source)
    if snapshot.book.tenant_id != actor.tenant.pk and snapshot.book.visibility == Visibility.PRIVATE:
        raise NotFound("No such book.", field="book_id")  # made private while we were reading it

    original = snapshot.book
    fields = {name: getattr(original, name) for name in COPY_BOOK_FIELDS}
    if server_book:
        fields["scope"] = Scope.SERVER
    copy = book_create(actor=actor, title=original.title, profile=original.profile, **fields)
    for batch in batched(snapshot.entries, COPY_BATCH):
        entries_create_bulk(actor=actor, book=copy, entries=batch)
    BookShare.objects.create(
        tenant=actor.tenant,
        book=copy,
        source_book=original,
        source_version=snapshot.version,
        source_title=original.title,
        copied_at=timezone.now(),
    )
    source_share = _share_get_or_create(original)
    BookShare.objects.for_tenant(original.tenant).filter(pk=source_share.pk).update(copy_count=F("copy_count") + 1)
    copy.refresh_from_db()
    return copy


# --- keeping a shared book's library state fresh ------------------------------------------


def _search_document(book: Book) -> SearchDocument:
    titles = list(
        Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position", "id").values_list("title", flat=True)
    )
    return search_document(
        title=book.title, description=book.description, tags=list(book.tags or []), entry_titles=titles,
        language=book.language,
    )


def _weighted(text: str, config_name: str, weight: str) -> Any:
    value = Value(text, output_field=TextField())
    vector: SearchVector | CombinedExpression = SearchVector(value, config=config_name, weight=weight)
    if config_name != "simple":
        # Plain words too: names and words of other languages match as typed.
        vector = vector + SearchVector(value, config="simple", weight=weight)
    return vector


def _search_document_write(book: Book, share: BookShare) -> None:
    document = _search_document(book)
    values: dict[str, Any] = {
        "search_text": document.text,
        "tags_index": tags_index(list(book.tags or [])),
        "search_version": book.version,
    }
    if connection.vendor == "postgresql":
        values["search_vector"] = (
            _weighted(document.title, document.config, "A")
            + _weighted(document.description, document.config, "B")
            + _weighted(document.tags, document.config, "B")
            + _weighted(document.entry_titles, document.config, "C")
        )
    BookShare.objects.for_tenant(book.tenant).filter(pk=share.pk).update(**values)
    share.search_text, share.tags_index, share.search_version = (
        values["search_text"], values["tags_index"], values["search_version"]
    )


def _refresh_schedule(book: Book, share: BookShare) -> None:
    BookShare.objects.for_tenant(book.tenant).filter(pk=share.pk).update(
        refresh_requested_version=book.version, refresh_requested_at=timezone.now()
    )
    from sharing.tasks import book_shared_refresh

    tenant_id, book_id = book.tenant_id, book.pk
    transaction.on_commit(lambda: task_publish(book_shared_refresh, tenant_id, book_id), robust=True)


def book_shared_changed(book: Book) -> bool:
    """Report a change to ``book`` (any version bump); True when a refresh was scheduled.

    Non-private books get their search document, library vector and display
    translations refreshed after commit. ``books.events`` publishes a task for
    it after each ``book_version_bump`` of a non-private book; the library's book page and the periodic sweep call
    it for books whose refresh is behind, so a missed call only delays.
    """
    if book.visibility == Visibility.PRIVATE:
        return False
    share = _share_get_or_create(book)
    if share.refreshed_version >= book.version:
        return False  # already fresh
    if share.refresh_requested_version >= book.version:
        requested = share.refresh_requested_at
        if requested is not None and timezone.now() - requested < REFRESH_GRACE:
            return False  # already on its way
    _refresh_schedule(book, share)
    return True


def shared_book_changed_run(*, tenant: Tenant | int, book_id: int) -> bool:
    """The task side of ``books.events.book_changed``: the book by id, then :func:`book_shared_changed`."""
    book = _book_of(int(tenant.pk if isinstance(tenant, Tenant) else tenant), book_id)
    return book is not None and book_shared_changed(book)


def shared_book_freshen(book: Book) -> bool:
    """The library page's check: a shared book whose refresh is behind gets one (cheap when fresh)."""
    share = getattr(book, "share", None)
    if share is not None and share.refreshed_version >= book.version:
        return False
    return book_shared_changed(book)


@dataclass(frozen=True, kw_only=True)
class RefreshReport:
    outcome: str  # refreshed | missing | private
    translations_scheduled: list[str]


def book_shared_refresh_run(*, tenant: Tenant | int, book_id: int) -> RefreshReport:
    """Bring a shared book's search document up to date and schedule its vector and translations.

    Idempotent: an up-to-date document is not rewritten, a current vector is not
    re-embedded (its task compares hashes), and a translation already requested
    for this version is not requested again.
    """
    resolved = _tenant(tenant)
    with transaction.atomic():
        book = Book.objects.for_tenant(resolved).select_for_update().filter(pk=book_id).first() if resolved else None
        if book is None:
            return RefreshReport(outcome="missing", translations_scheduled=[])
        if book.visibility == Visibility.PRIVATE:
            return RefreshReport(outcome="private", translations_scheduled=[])
        share = _share_get_or_create(book)
        if share.search_version != book.version:
            _search_document_write(book, share)
        from sharing.tasks import book_vector_refresh

        tenant_id = book.tenant_id
        transaction.on_commit(lambda: task_publish(book_vector_refresh, tenant_id, book_id), robust=True)
        scheduled = translations_request_all(book)
        BookShare.objects.for_tenant(book.tenant).filter(pk=share.pk).update(
            refreshed_version=book.version,
            refresh_requested_version=book.version,
        )
    return RefreshReport(outcome="refreshed", translations_scheduled=scheduled)


def book_vector_refresh_run(*, tenant: Tenant | int, book_id: int, embedder: Embedder | None = None) -> str:
    """Embed a shared book for the library's search by meaning; ``current`` when nothing changed."""
    resolved = _tenant(tenant)
    book = Book.objects.for_tenant(resolved).filter(pk=book_id).first() if resolved else None
    if book is None:
        return "missing"
    if book.visibility == Visibility.PRIVATE:
        return "private"
    titles = list(
        Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position", "id").values_list("title", flat=True)
    )
    text = book_vector_text(
        title=book.title, description=book.description, tags=list(book.tags or []), entry_titles=titles
    )
    digest = text_hash(text)
    if embedder is None:
        from retrieval.adapter.embedders import embedder_get

        embedder = embedder_get()
    existing = BookVector.objects.for_tenant(book.tenant).filter(book=book).first()
    if existing is not None and existing.content_hash == digest and existing.model_name == embedder.name:
        return "current"
    [vector] = embedder.embed_passages([text])
    values = {
        "model_name": embedder.name,
        "dimension": embedder.dimension,
        "content_hash": digest,
        "embedding": vector,
        "created_at": timezone.now(),
    }
    if existing is not None:
        BookVector.objects.for_tenant(book.tenant).filter(pk=existing.pk).update(**values)
    else:
        try:
            with transaction.atomic():
                BookVector.objects.create(tenant=book.tenant, book=book, **values)
        except IntegrityError:  # another worker embedded it meanwhile: ours is as good
            BookVector.objects.for_tenant(book.tenant).filter(book=book).update(**values)
    return "embedded"


# --- translation for display (P-4) ----------------------------------------------------------


def translations_request_all(book: Book) -> list[str]:
    """Request the book's translation into every display language a package covers."""
    source = config.language_base(book.language)
    pairs = selectors.translation_pairs()
    scheduled = []
    for language in config.display_languages():
        if language != source and (source, language) in pairs and translation_request(book=book, language=language):
            scheduled.append(language)
    return scheduled


def translation_request(*, book: Book, language: str) -> bool:
    """Make sure ``book`` at its current version is being translated into ``language``.

    Creates the pending row and schedules the task after commit; True when it
    did, False when a row for this version already existed.
    """
    target = config.language_base(language)
    row, created = BookTranslation.objects.for_tenant(book.tenant).get_or_create(
        tenant=book.tenant,
        book=book,
        version=book.version,
        language=target,
        defaults={"source_language": config.language_base(book.language)},
    )
    if not created and row.status != TranslationStatus.PENDING:
        return False
    if not created:
        BookTranslation.objects.for_tenant(book.tenant).filter(pk=row.pk).update(requested_at=timezone.now())
    from sharing.tasks import book_translate

    tenant_id, book_id = book.tenant_id, book.pk
    transaction.on_commit(lambda: task_publish(book_translate, tenant_id, book_id, target), robust=True)
    return created


def _keep_verbatim(line: str) -> bool:
    # Classic decorators (C-13) are instructions, not prose: translating them would break them.
    return not line.strip() or line.lstrip().startswith("@@")


def texts_translate(
    translate: Callable[[list[str]], list[str]], texts: Sequence[str], *, chunk: int = TRANSLATE_CHUNK
) -> list[str]:
    """Translate ``texts`` line by line, keeping blank and ``@@`` lines as they are."""
    layouts: list[list[int | str]] = []
    lines: list[str] = []
    for text in texts:
        layout: list[int | str] = []
        for line in text.split("\n"):
            if _keep_verbatim(line):
                layout.append(line)
            else:
                layout.append(len(lines))
                lines.append(line)
        layouts.append(layout)
    translated: list[str] = []
    for batch in batched(lines, chunk):
        out = translate(batch)
        if len(out) != len(batch):
            raise RuntimeError(f"the translator returned {len(out)} texts for {len(batch)}")
        translated.extend(out)
    return ["\n".join(translated[part] if isinstance(part, int) else part for part in layout) for layout in layouts]


def book_translate_run(
    *, tenant: Tenant | int, book_id: int, language: str, translator: PackageTranslator | None = None
) -> str:
    """Translate a shared book's title, description and entries into ``language`` (P-4).

    Check: the book exists and is not private; the language differs from the
    book's; a package for the pair is installed (else the pending request is
    dropped: the API says "unavailable" until an operator installs one and
    ``translation_install`` asks again). Execute: translate the text as of one
    version and store it under that version; older versions of the same
    language are pruned. Idempotent: a ready translation of the current
    version returns ``current`` without translating.
    """
    resolved = _tenant(tenant)
    book = Book.objects.for_tenant(resolved).filter(pk=book_id).first() if resolved else None
    if book is None:
        return "missing"
    target = config.language_base(language)
    source = config.language_base(book.language)
    rows = BookTranslation.objects.for_tenant(book.tenant).filter(book=book, language=target)
    if book.visibility == Visibility.PRIVATE:
        rows.filter(status=TranslationStatus.PENDING).delete()
        return "private"
    if source == target:
        return "original"
    translator = translator or PackageTranslator(config.packages_dir())
    if selectors.translation_unavailable_reason(source, target, translator.available_pairs()) is not None:
        rows.filter(status=TranslationStatus.PENDING).delete()
        return "unavailable"
    version = book.version
    row, _ = BookTranslation.objects.for_tenant(book.tenant).get_or_create(
        tenant=book.tenant, book=book, version=version, language=target, defaults={"source_language": source}
    )
    if row.status == TranslationStatus.READY:
        return "current"

    entries = list(
        Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position", "id").values_list(
            "pk", "title", "content"
        )
    )
    current = Book.objects.for_tenant(book.tenant).filter(pk=book.pk).values_list("version", flat=True).first()
    if current != version:
        # Edited while we read it: this version is gone, the newer one has its own request.
        rows.filter(version=version, status=TranslationStatus.PENDING).delete()
        return "superseded"
    texts = [book.title, book.description]
    for _, title, content in entries:
        texts.extend([title, content])
    try:
        out = texts_translate(lambda batch: translator.translate(batch, source=source, target=target), texts)
    except TranslationUnavailable:
        rows.filter(status=TranslationStatus.PENDING).delete()
        return "unavailable"
    except Exception as exc:  # a broken package: record it, do not retry forever
        logger.exception("translating book %s into %s failed", book.pk, target)
        rows.filter(pk=row.pk).update(
            status=TranslationStatus.FAILED, error=f"{type(exc).__name__}: {exc}"[:2000], completed_at=timezone.now()
        )
        return "failed"
    package = next((p for p in packages_installed(translator.packages_dir) if p.pair == (source, target)), None)
    translated_entries = {
        str(entry_id): {"title": out[2 + 2 * i], "content": out[3 + 2 * i]}
        for i, (entry_id, _, _) in enumerate(entries)
    }
    with transaction.atomic():
        rows.filter(pk=row.pk).update(
            status=TranslationStatus.READY,
            source_language=source,
            title=out[0],
            description=out[1],
            entries=translated_entries,
            package_version=package.version if package else "",
            error="",
            completed_at=timezone.now(),
        )
        rows.filter(version__lt=version).delete()
    return "translated"


def translations_schedule_for_pair(source: str, target: str) -> int:
    """After a package for ``source → target`` is installed: translate every shared book it covers.

    Failed translations of the pair are retried (the package may have been
    replaced). Returns how many translations were requested.
    """
    source, target = config.language_base(source), config.language_base(target)
    if target not in config.display_languages():
        return 0
    requested = 0
    for tenant_id, book_id in selectors.shared_books_in_language(source):
        with transaction.atomic():
            book = _book_of(tenant_id, book_id)
            if book is None or book.visibility == Visibility.PRIVATE:
                continue
            BookTranslation.objects.for_tenant(book.tenant).filter(
                book=book, language=target, status=TranslationStatus.FAILED
            ).delete()
            if translation_request(book=book, language=target):
                requested += 1
    return requested


def shared_books_sweep(*, limit: int = 500) -> dict[str, int]:
    """Safety net (celery beat): refresh shared books whose refresh is behind, re-send lost translations."""
    refreshed = 0
    for tenant_id, book_id in selectors.shared_books_stale(limit=limit):
        with transaction.atomic():
            book = _book_of(tenant_id, book_id)
            if book is not None and book_shared_changed(book):
                refreshed += 1
    resent = 0
    from sharing.tasks import book_translate

    for tenant_id, book_id, language in selectors.translations_stale(limit=limit):
        book = _book_of(tenant_id, book_id)
        if book is None:
            continue
        BookTranslation.objects.for_tenant(book.tenant).filter(
            book=book, language=language, status=TranslationStatus.PENDING
        ).update(requested_at=timezone.now())
        task_publish(book_translate, tenant_id, book_id, language)
        resent += 1
    return {"refreshed": refreshed, "translations_resent": resent}
