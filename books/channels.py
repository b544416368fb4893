"""Where server lore may appear (S-11, S-12, S-13). Pure functions over loaded rows.

- A server-wide collection's channel restriction belongs to the collection and
  applies to all its entries; persona books restrict each entry.
- Empty = every channel. A thread follows its parent channel's rules.
- An entry still holding an unresolved legacy `#channel` (S-13) counts as
  active in every channel until an admin saves a selection.
- An inactive collection (S-12) puts none of its entries in a prompt; their
  own enabled flags are untouched.
"""
from __future__ import annotations

from collections.abc import Sequence

from books.models import Book, Entry, Scope


def channel_allows(restriction: Sequence[str], *, channel_id: str | None, parent_channel_id: str | None = None) -> bool:
    """Does a restriction (empty = all channels) allow this channel or thread?"""
    if not restriction:
        return True
    where = parent_channel_id or channel_id
    return bool(where) and where in restriction


def entry_channel_restriction(book: Book, entry: Entry) -> list[str]:
    """The channel list that governs ``entry``: the collection's or the entry's own."""
    if book.scope == Scope.SERVER:
        return list(book.channels)
    if book.scope == Scope.PERSONA:
        # S-13: an unresolved legacy name means "all channels" until an admin saves a selection
        # (saving one clears it, see ``entry_update``).
        return [] if entry.unresolved_channels else list(entry.channels)
    return []


def entry_reaches_prompt(
    book: Book, entry: Entry, *, channel_id: str | None = None, parent_channel_id: str | None = None
) -> bool:
    """May ``entry`` be selected at all in this channel? (Matching decides the rest.)"""
    if not book.active or not entry.enabled:
        return False
    return channel_allows(
        entry_channel_restriction(book, entry), channel_id=channel_id, parent_channel_id=parent_channel_id
    )
