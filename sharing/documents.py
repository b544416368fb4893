"""What the library searches: one text document and one vector text per book. No database here."""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from sharing.config import language_base

# What a book's library vector is embedded from is cut here (the embedder would
# truncate anyway; a sentence encoder averages, so the head carries the meaning).
VECTOR_TEXT_MAX_CHARS = 8000

# PostgreSQL's built-in text search configurations by ISO 639-1 code.
PG_TEXT_SEARCH_CONFIGS = {
    "ar": "arabic",
    "hy": "armenian",
    "eu": "basque",
    "ca": "catalan",
    "da": "danish",
    "nl": "dutch",
    "en": "english",
    "fi": "finnish",
    "fr": "french",
    "de": "german",
    "el": "greek",
    "hi": "hindi",
    "hu": "hungarian",
    "id": "indonesian",
    "ga": "irish",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "no": "norwegian",
    "nb": "norwegian",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "es": "spanish",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}


def pg_text_search_config(language: str | None) -> str:
    """The stemming configuration for a language; ``simple`` (no stemming) when unknown."""
    return PG_TEXT_SEARCH_CONFIGS.get(language_base(language), "simple")


@dataclass(frozen=True, kw_only=True)
class SearchDocument:
    title: str
    description: str
    tags: str
    entry_titles: str
    config: str

    @property
    def text(self) -> str:
        """The plain document SQLite searches (icontains on each term)."""
        return "\n".join(part for part in (self.title, self.description, self.tags, self.entry_titles) if part)


def search_document(
    *, title: str, description: str, tags: Sequence[str], entry_titles: Sequence[str], language: str
) -> SearchDocument:
    return SearchDocument(
        title=title,
        description=description,
        tags=" ".join(tags),
        entry_titles="\n".join(t for t in entry_titles if t),
        config=pg_text_search_config(language),
    )


def tag_normalise(tag: str) -> str:
    return " ".join(tag.split()).casefold()


def tags_index(tags: Sequence[str]) -> str:
    """``"|dragons|sea|"``: a tag filter is one ``contains`` on both databases."""
    names = [tag_normalise(t).replace("|", " ") for t in tags if isinstance(t, str) and t.strip()]
    return "|" + "|".join(names) + "|" if names else ""


def book_vector_text(*, title: str, description: str, tags: Sequence[str], entry_titles: Sequence[str]) -> str:
    parts = [title.strip(), description.strip()]
    if tags:
        parts.append(", ".join(tags))
    titles = [t.strip() for t in entry_titles if t and t.strip()]
    if titles:
        parts.append("; ".join(titles))
    return "\n".join(p for p in parts if p)[:VECTOR_TEXT_MAX_CHARS]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def search_terms(query: str) -> list[str]:
    """Whitespace-separated terms (quotes stripped) for the SQLite fallback: every term must appear."""
    return [term.strip("\"'") for term in query.split() if term.strip("\"'")][:20]
