"""Input and output shapes of the sharing and library API. Inputs only parse; outputs only show.

Outputs are built from selector results (books annotated by the library
selectors, ``SharingState``, ``Display``); nothing here reads the database.
"""
from __future__ import annotations

from typing import Any

from django.urls import reverse
from rest_framework import serializers

from books import limits
from books.models import Book, Entry, Visibility
from sharing.selectors import LIBRARY_SORTS, SEARCH_MODES, Display, SharingState

# --- inputs -------------------------------------------------------------------------


class LanguageParams(serializers.Serializer):
    lang = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=16,
        help_text="Display language (e.g. `es`): the translation is served when ready, the original otherwise; "
        "`display` says which.",
    )


class SharedExportParams(serializers.Serializer):
    format = serializers.ChoiceField(
        choices=["sillytavern", "card-v2", "card-v2-png"],
        required=False,
        default="sillytavern",
        help_text="A reader's formats carry no tenant-only settings (I-6).",
    )


class LibraryParams(LanguageParams):
    q = serializers.CharField(required=False, allow_blank=True, max_length=500, help_text="What to search for.")
    mode = serializers.ChoiceField(
        choices=SEARCH_MODES,
        required=False,
        default="text",
        help_text="`text`: words in title, description, tags and entry titles; `meaning`: nearest books by meaning.",
    )
    tag = serializers.CharField(required=False, allow_blank=True, max_length=50, help_text="Only books with this tag.")
    language = serializers.CharField(
        required=False, allow_blank=True, max_length=16, help_text="Only books written in this language."
    )
    sort = serializers.ChoiceField(
        choices=LIBRARY_SORTS,
        required=False,
        help_text="newest (default), most_copied, most_attached; relevance (default when searching).",
    )


class VisibilityIn(serializers.Serializer):
    visibility = serializers.ChoiceField(
        choices=Visibility.choices,
        help_text="private (default), unlisted (reached by its link) or public (listed; needs ≥10 entries, P-1).",
    )


class CopyIn(serializers.Serializer):
    book_id = serializers.IntegerField(required=False, allow_null=True, help_text="A public book (or one of yours).")
    link_token = serializers.CharField(
        required=False, allow_blank=True, max_length=64, help_text="An unlisted book's link token."
    )

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("book_id") is None and not data.get("link_token"):
            raise serializers.ValidationError({"book_id": "Name a book_id or a link_token."})
        return data


# --- outputs ------------------------------------------------------------------------


class DisplayOut(serializers.Serializer):
    requested = serializers.CharField(allow_null=True, help_text="The language asked for (`lang`), if any.")
    language = serializers.CharField(help_text="The language of the text served.")
    status = serializers.ChoiceField(
        choices=["original", "ready", "pending", "failed", "unavailable"],
        help_text="original: no translation asked for, or the book is in that language; ready: translated; "
        "pending: being translated, original served; failed / unavailable: original served, `message` says why.",
    )
    translated = serializers.BooleanField()
    message = serializers.CharField(allow_null=True)


def display_out(display: Display) -> dict[str, Any]:
    return {
        "requested": display.requested,
        "language": display.language,
        "status": display.status,
        "translated": display.translated,
        "message": display.message,
    }


class OriginalOut(serializers.Serializer):
    title = serializers.CharField()
    description = serializers.CharField()


class LibraryBookOut(serializers.Serializer):
    """A public (or linked) book as the library shows it to anyone."""

    id = serializers.IntegerField()
    title = serializers.CharField()
    description = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    language = serializers.CharField(help_text="The language the book is written in.")
    profile = serializers.CharField()
    visibility = serializers.CharField()
    publisher = serializers.CharField(help_text="The tenant that shares the book.")
    entry_count = serializers.IntegerField()
    copy_count = serializers.IntegerField()
    attach_count = serializers.IntegerField()
    published_at = serializers.DateTimeField(allow_null=True)
    updated_at = serializers.DateTimeField()
    version = serializers.IntegerField()
    similarity = serializers.FloatField(allow_null=True, help_text="Search by meaning: cosine similarity.")
    display = DisplayOut()
    original = OriginalOut(allow_null=True, help_text="The original title and description when translated.")


def library_book_out(book: Book, display: Display) -> dict[str, Any]:
    translation = display.translation if display.translated else None
    share = getattr(book, "share", None)  # a public book may have no sharing row yet
    return {
        "id": book.pk,
        "title": translation.title if translation else book.title,
        "description": translation.description if translation else book.description,
        "tags": list(book.tags or []),
        "language": book.language,
        "profile": book.profile,
        "visibility": book.visibility,
        "publisher": book.tenant.name,
        "entry_count": getattr(book, "entry_count", 0),
        "copy_count": getattr(book, "copy_total", 0),
        "attach_count": getattr(book, "attach_count", 0),
        "published_at": share.published_at if share is not None else None,
        "updated_at": book.updated_at,
        "version": book.version,
        "similarity": getattr(book, "similarity", None),
        "display": display_out(display),
        "original": {"title": book.title, "description": book.description} if translation else None,
    }


class LibraryEntryOut(serializers.Serializer):
    id = serializers.IntegerField()
    position = serializers.IntegerField()
    title = serializers.CharField()
    content = serializers.CharField()
    keys = serializers.ListField(child=serializers.CharField(), help_text="Trigger keys (aliases in world books).")
    canon = serializers.BooleanField(help_text="Canon (world books) / constant (classic).")
    enabled = serializers.BooleanField()
    translated = serializers.BooleanField()


def library_entry_out(entry: Entry, display: Display) -> dict[str, Any]:
    text = display.translation.entry_text(entry.pk) if display.translated and display.translation else None
    return {
        "id": entry.pk,
        "position": entry.position,
        "title": text["title"] if text else entry.title,
        "content": text["content"] if text else entry.content,
        "keys": list(entry.keys or []),
        "canon": entry.constant,
        "enabled": entry.enabled,
        "translated": text is not None,
    }


class LibraryEntriesOut(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    display = DisplayOut()
    results = LibraryEntryOut(many=True)


class LinkOut(serializers.Serializer):
    token = serializers.CharField()
    path = serializers.CharField(help_text="Where anyone with the link reads the book.")
    active = serializers.BooleanField(help_text="False while the book is private: the link opens nothing.")
    rotated_at = serializers.DateTimeField(allow_null=True)


class SourceOut(serializers.Serializer):
    book_id = serializers.IntegerField(allow_null=True, help_text="Null when the source book was deleted.")
    title = serializers.CharField()
    version = serializers.IntegerField(allow_null=True, help_text="The source's version that was copied.")
    copied_at = serializers.DateTimeField()


class TranslationLineOut(serializers.Serializer):
    language = serializers.CharField()
    status = serializers.CharField()
    version = serializers.IntegerField(allow_null=True)
    message = serializers.CharField(allow_null=True)


class NoticeOut(serializers.Serializer):
    code = serializers.CharField()
    rule = serializers.CharField()
    message = serializers.CharField()


class SharingOut(serializers.Serializer):
    book_id = serializers.IntegerField()
    visibility = serializers.CharField()
    living_world = serializers.BooleanField()
    version = serializers.IntegerField()
    entry_count = serializers.IntegerField()
    publish_min_entries = serializers.IntegerField()
    can_publish = serializers.BooleanField(help_text="Enough entries to be public (P-1).")
    can_manage = serializers.BooleanField(help_text="The caller may change visibility and rotate the link.")
    link = LinkOut(allow_null=True, help_text="Shown only to those who manage the book.")
    published_at = serializers.DateTimeField(allow_null=True)
    copy_count = serializers.IntegerField()
    attach_count = serializers.IntegerField()
    source = SourceOut(allow_null=True, help_text="Provenance, when this book is a copy (P-2).")  # type: ignore[assignment]  # a declared field named like a DRF Field attribute
    translations = TranslationLineOut(many=True)
    notices = NoticeOut(many=True, help_text="What a change also did, e.g. the living world turned off (L-1).")


def link_path(token: str) -> str:
    return reverse("sharing-link-book", kwargs={"token": token})


def sharing_out(state: SharingState) -> dict[str, Any]:
    share, book = state.share, state.book
    minimum = limits.PUBLISH_MIN_ENTRIES.value
    link = None
    if share is not None and state.can_manage:
        link = {
            "token": share.link_token,
            "path": link_path(share.link_token),
            "active": state.link_active,
            "rotated_at": share.link_rotated_at,
        }
    source = None
    if share is not None and share.is_copy:
        source = {
            "book_id": share.source_book_id,
            "title": share.source_title,
            "version": share.source_version,
            "copied_at": share.copied_at,
        }
    return {
        "book_id": book.pk,
        "visibility": book.visibility,
        "living_world": book.living_world,
        "version": book.version,
        "entry_count": state.entry_count,
        "publish_min_entries": minimum,
        "can_publish": state.entry_count >= minimum,
        "can_manage": state.can_manage,
        "link": link,
        "published_at": share.published_at if share is not None else None,
        "copy_count": share.copy_count if share is not None else 0,
        "attach_count": state.attach_count,
        "source": source,
        "translations": [
            {"language": t.language, "status": t.status, "version": t.version, "message": t.message}
            for t in state.translations
        ],
        "notices": [],
    }


class CopyBookOut(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    profile = serializers.CharField()
    scope = serializers.CharField()
    visibility = serializers.CharField()
    version = serializers.IntegerField()
    entry_count = serializers.IntegerField()


class CopyOut(serializers.Serializer):
    book = CopyBookOut()
    source = SourceOut()  # type: ignore[assignment]  # a declared field named like a DRF Field attribute


def copy_out(state: SharingState) -> dict[str, Any]:
    book = state.book
    body = sharing_out(state)
    return {
        "book": {
            "id": book.pk,
            "title": book.title,
            "profile": book.profile,
            "scope": book.scope,
            "visibility": book.visibility,
            "version": book.version,
            "entry_count": state.entry_count,
        },
        "source": body["source"],
    }


class LanguagePairOut(serializers.Serializer):
    source = serializers.CharField()  # type: ignore[assignment]  # a declared field named like a DRF Field attribute
    target = serializers.CharField()


class LanguagesOut(serializers.Serializer):
    display_languages = serializers.ListField(child=serializers.CharField())
    installed_pairs = LanguagePairOut(many=True)
