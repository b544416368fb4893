"""The living world in play (L-1..L-4): which books a chat may write, and running a tool call.

The partner app runs the model; when it calls ``lore_create`` / ``lore_append``
the app posts the call here with the chat and the reply that produced it.
Refusals (the budget, a size, a chat that is not the owner's) are tool results
the model reads, never HTTP errors: the play goes on. Two HTTP errors only: a
chat that does not exist for the caller (404), and a chat whose profile does
not read the living world (409): there the tools were never offered, so the
call is the partner app's mistake, not the model's.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from books import living
from books.models import Book, LoreWrite
from cast.models import Chat
from cast.selectors import chat_books_gather, chat_get
from lore_platform.errors import Conflict, DomainError, PermissionDenied, ValidationFailed
from lore_platform.tenancy.actor import Actor
from lore_platform.text import text_check


def chat_living_books(chat: Chat, books: list[Book]) -> list[Book]:
    """The books of ``books`` the model may write from ``chat``: living ones its owner owns (L-1)."""
    seen: set[int] = set()
    out = []
    for book in books:
        if book.pk not in seen and book.tenant_id == chat.tenant_id and living.book_is_living_for(book, chat.owner_id):
            seen.add(book.pk)
            out.append(book)
    return out


# Why a turn that reaches a living book offers no tools (``LivingWorld.off_code``).
OFF_PROFILE = "living_world_profile"
OFF_NO_TOOLS = "model_without_tools"
NO_TOOLS_REASON = ("The model is not tool-capable (model.tools is false): the living world writes only through "
                   "tool calls (L-1).")


@dataclass(frozen=True, kw_only=True)
class LivingWorld:
    """What a turn that reaches its owner's living books offers of the living world, and if nothing, why."""

    books: tuple[int, ...]
    tools: tuple[dict[str, Any], ...] = ()
    off_code: str | None = None
    off_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"tools_offered": bool(self.tools), "books": list(self.books), "code": self.off_code,
                "rule": "L-1" if self.off_code else None, "off_reason": self.off_reason}

    @property
    def warning(self) -> str | None:
        """A misconfiguration the answer's ``warnings`` carry: a living book in a chat that cannot use it."""
        return self.off_reason if self.off_code == OFF_PROFILE else None


def living_world_for(chat: Chat, books: list[Book], *, profile: str, tools: bool) -> LivingWorld | None:
    """The living world in one turn of ``chat`` (L-1, L-2): ``None`` when it reaches no living book.

    The tools come only where they work: the chat owner's living books, a
    profile that reads what they write, a tool-capable model.
    """
    living_books = chat_living_books(chat, books)
    if not living_books:
        return None
    ids = tuple(b.pk for b in living_books)
    if not living.profile_takes_living_world(profile):
        return LivingWorld(books=ids, off_code=OFF_PROFILE, off_reason=living.living_world_profile_reason(profile))
    if not tools:
        return LivingWorld(books=ids, off_code=OFF_NO_TOOLS, off_reason=NO_TOOLS_REASON)
    return LivingWorld(books=ids, tools=living.living_tools_schema(living_books))


def _chat_profile(chat: Chat, requested: str) -> str:
    return requested or chat.profile or chat.tenant.default_profile


def _profile_check(profile: str) -> None:
    """L-1: no tool call from a chat whose profile does not read the living world (HTTP 409)."""
    if not living.profile_takes_living_world(profile):
        raise Conflict(living.living_world_profile_reason(profile), field="profile", rule="L-1",
                       code=OFF_PROFILE, details={"profile": profile, "profiles": sorted(living.LIVING_PROFILES)})


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    """What the tool call answered: the message to hand the model, and the write (if any)."""

    tool_call_id: str
    name: str
    ok: bool
    result: dict[str, Any]
    write: LoreWrite | None = None

    @property
    def message(self) -> dict[str, str]:
        """The OpenAI tool message the partner app appends to the conversation."""
        return {"role": "tool", "tool_call_id": self.tool_call_id,
                "content": json.dumps(self.result, ensure_ascii=False)}


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw or "{}")
        except ValueError:
            raise ValidationFailed("The tool arguments are not valid JSON.", field="arguments") from None
    if not isinstance(raw, dict):
        raise ValidationFailed("The tool arguments are a JSON object.", field="arguments")
    # A JSON string inside the checked body: its own escapes can carry NUL or a lone surrogate.
    text_check(raw, "arguments")
    return raw


def _target_book(actor: Actor, chat: Chat, arguments: dict[str, Any], profile: str) -> Book:
    books = chat_living_books(chat, [g.book for g in chat_books_gather(chat, actor=actor, profile=profile).books])
    named = arguments.get("book")
    if named is None:
        if len(books) == 1:
            return books[0]
        if not books:
            raise PermissionDenied("No living-world book is attached to this chat (L-1).", field="book", rule="L-1",
                                   code="living_world_off")
        raise ValidationFailed("Several living books are attached; name one of {books}.",
                               values={"books": [b.pk for b in books]}, field="book")
    for book in books:
        if book.pk == named:
            return book
    raise PermissionDenied("That book is not a living-world book of this chat (L-1).", field="book", rule="L-1",
                           code="living_world_off")


def _written(write: LoreWrite) -> dict[str, Any]:
    held = write.state == LoreWrite.State.HELD
    what = "New entry" if write.kind == LoreWrite.Kind.CREATE else "Addition"
    return {
        "ok": True,
        "status": write.state,
        "write": write.pk,
        "book": write.book_id,
        "entry": write.entry_id,
        "title": write.title,
        "message": f"{what} saved for the owner's review." if held else f"{what} saved to the world book.",
    }


def tool_call_run(*, actor: Actor, chat_id: int, reply_id: str, model: str, tool_call: dict[str, Any],
                  profile: str = "") -> ToolResult:
    """Run one OpenAI-format tool call from ``chat_id``'s reply ``reply_id``.

    Writes come only from the book owner's own chats (L-1): the chat must be
    the caller's and the book the chat owner's. Every refusal is a result,
    except in a chat whose profile (``profile`` as the context call named it,
    else the chat's, else the tenant's default) does not read the living
    world: a 409, as no tool was offered there.
    """
    chat = chat_get(actor=actor, chat_id=chat_id)  # NotFound
    profile = _chat_profile(chat, profile)
    _profile_check(profile)  # Conflict
    call_id = str(tool_call.get("id") or "")
    called = tool_call.get("function")
    function: dict[str, Any] = called if isinstance(called, dict) else {}
    name = str(function.get("name") or "")
    try:
        if name not in living.TOOL_NAMES:
            raise ValidationFailed("Unknown tool {name}; the living world has {tools}.",
                                   values={"name": repr(name), "tools": ", ".join(living.TOOL_NAMES)}, field="name")
        if chat.owner_id is None or actor.user is None or chat.owner_id != actor.user.pk:
            raise PermissionDenied("Lore is written only from the book owner's own chats (L-1).", field="chat",
                                   rule="L-1", code="not_owner_chat")
        arguments = _arguments(function.get("arguments"))
        book = _target_book(actor, chat, arguments, profile)
        write = living.lore_write(
            actor=actor, book=book, tool=name, arguments=arguments,
            source=living.WriteSource(chat_id=chat.pk, reply_id=reply_id, model=model or chat.model_id),
        )
    except DomainError as refused:
        return ToolResult(tool_call_id=call_id, name=name, ok=False, result={"ok": False, "error": refused.as_dict()})
    return ToolResult(tool_call_id=call_id, name=name, ok=True, result=_written(write), write=write)


def reply_revert(*, actor: Actor, chat_id: int, reply_id: str) -> list[LoreWrite]:
    """The partner app regenerated or deleted a reply: its writes are reverted together (L-4)."""
    chat = chat_get(actor=actor, chat_id=chat_id)
    if chat.owner_id is None or actor.user is None or chat.owner_id != actor.user.pk:
        raise PermissionDenied("Only the chat's owner reverts its replies' writes (L-1).", rule="L-1")
    return living.reply_writes_revert(actor=actor, chat_id=chat.pk, reply_id=reply_id)
