"""The lore lookup tool (W-5, W-6): tool-capable models fetch an indexed entry's full text.

The context call returns an OpenAI-style function schema when the model can
call tools and a world index was produced; the partner app executes the call
against ``GET /api/v1/chats/{chat}/lore/{entry}`` (or the book-level route),
which serves only entries of books that chat reaches. Disabled entries and
switched-off books are never returned (W-6).
"""
from __future__ import annotations

from typing import Any

from books.models import Book
from lore_platform.errors import NotFound
from retrieval.adapter.loading import engine_book

LOOKUP_TOOL_NAME = "lore_lookup"


def lookup_tool_schema() -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": LOOKUP_TOOL_NAME,
            "description": (
                "Read the full text of a topic listed in the world index when the conversation needs "
                "its details."
            ),
            # OpenAI's strict function calling: every property required, no other keys (as the living world's).
            "strict": True,
            "parameters": {
                "type": "object",
                "properties": {
                    "entry": {"type": "integer", "description": "The entry id given in the world index."},
                },
                "required": ["entry"],
                "additionalProperties": False,
            },
        },
    }


def lore_lookup(books: list[Book], entry_id: int | str) -> dict[str, Any]:
    """The full text of ``entry_id`` if it belongs to one of ``books`` and may reach the model."""
    for book in books:
        if not book.active:
            continue
        for entry in engine_book(book).entries:
            if entry.id == str(entry_id):
                if not entry.enabled:
                    break
                return {"entry": int(entry.id), "book": book.pk, "title": entry.title, "content": entry.content}
    raise NotFound("No such entry in the lore this caller can reach.", field="entry", rule="W-6")
