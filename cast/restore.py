"""Writing back the cast rows of a tenant backup (``backup.services`` reads the file and maps ids).

Each function writes one row as it was backed up, references already mapped to
this tenant's rows by the caller: unlike ``chat_create`` or ``book_attach`` they
keep what a person did earlier (who attached a book, a chat's turns and timed
state, a request log's turn) instead of starting afresh. Only a restore calls them.
"""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from books.models import Book
from cast.models import Attachment, Character, Chat, Novel, RequestLog, Story
from lore_platform.tenancy.models import Tenant, User


def story_restore(*, tenant: Tenant, title: str, cast: Sequence[Character],
                  created_at: datetime | None = None) -> Story:
    story = Story.objects.create(tenant=tenant, title=title, **_when(created_at))
    story.cast.set(list(cast))
    return story


def novel_restore(*, tenant: Tenant, title: str, cast: Sequence[Character],
                  created_at: datetime | None = None) -> Novel:
    novel = Novel.objects.create(tenant=tenant, title=title, **_when(created_at))
    novel.cast.set(list(cast))
    return novel


def attachment_restore(*, tenant: Tenant, book: Book, character: Character | None = None,
                       story: Story | None = None, novel: Novel | None = None, position: int = 0,
                       attached_by: User | None = None, created_at: datetime | None = None) -> Attachment:
    return Attachment.objects.create(tenant=tenant, book=book, character=character, story=story, novel=novel,
                                     position=position, attached_by=attached_by, **_when(created_at))


def chat_restore(*, tenant: Tenant, members: Sequence[Character] = (), created_at: datetime | None = None,
                 **fields: Any) -> Chat:
    """``fields``: the chat's own columns (kind, owner, character, story, novel, channels, profile,
    model_id, timed_state, turns), references already this tenant's rows."""
    chat = Chat.objects.create(tenant=tenant, **fields, **_when(created_at))
    if members:
        chat.members.set(list(members))
    return chat


def request_logs_restore(*, tenant: Tenant, rows: Sequence[dict[str, Any]]) -> int:
    """``rows``: a log's columns with ``chat`` this tenant's chat; written in one batch (logs can be many)."""
    logs = [RequestLog(tenant=tenant, **row) for row in rows]
    RequestLog.objects.for_tenant(tenant).bulk_create(logs, batch_size=200)
    return len(logs)


def _when(created_at: datetime | None) -> dict[str, Any]:
    return {"created_at": created_at} if created_at is not None else {}
