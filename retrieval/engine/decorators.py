"""``@@`` decorators at the top of classic entry content (C-13).

Pure parsing: :func:`decorators_parse` reads the decorator block and returns
typed values, the text the model sees (decorator lines removed) and warnings.
The engine applies the values; the books app uses the same function to
validate and show decorators in the editor.

Syntax
------
The decorator block is the run of lines at the start of the content that begin
with ``@@`` (blank lines inside or before the block are allowed and dropped).
It ends at the first other line; ``@@`` lines further down are ordinary text.
Each line is ``@@name`` or ``@@name value``. A line ``@@@name ...`` is a
fallback (Character Card V3): it is used only when the line above it was not
applied (unknown or invalid); otherwise it is skipped.

Known decorators and their typed values:

============================== ============ ===================================
``@@probability N``            int 0-100    chance to inject once activated
``@@scan_depth N``             int 0-100    replaces the book's scan depth
``@@order N``                  int          replaces the entry's order
``@@priority N``               int          replaces the entry's priority
``@@role R``                   system/user/assistant
``@@activate_only_after N``    int >= 0     see :func:`gate_allows`
``@@activate_only_every N``    int >= 1     see :func:`gate_allows`
``@@keep``                     flag         stays active after its first match
``@@dont_activate_after_match`` flag        never activates again after firing
``@@is_greeting``              flag         only while the chat is at its greeting
============================== ============ ===================================

``@@keep_activate_after_match`` (the Character Card V3 spelling) is read as
``@@keep``. Unknown decorators are kept in :attr:`ParsedContent.unknown` and
reported as warnings; they are never fatal and never reach the model. The first
occurrence of a known decorator wins; repeats are reported.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .values import ROLES, Message, Role

__all__ = [
    "KNOWN_DECORATORS",
    "Decorator",
    "DecoratorWarning",
    "ParsedContent",
    "chat_is_at_greeting",
    "decorators_parse",
    "gate_allows",
]

_INT_RANGES: dict[str, tuple[int | None, int | None]] = {
    "probability": (0, 100),
    "scan_depth": (0, 100),
    "order": (None, None),
    "priority": (None, None),
    "activate_only_after": (0, None),
    "activate_only_every": (1, None),
}
_FLAGS = frozenset({"keep", "dont_activate_after_match", "is_greeting"})
_ALIASES = {"keep_activate_after_match": "keep"}
KNOWN_DECORATORS: frozenset[str] = frozenset({*_INT_RANGES, *_FLAGS, "role"})


@dataclass(frozen=True, kw_only=True, slots=True)
class Decorator:
    """One decorator line as written: ``line`` is 1-based within the content."""

    name: str
    value: str | None
    line: int
    raw: str


WarningKind = Literal["unknown", "invalid", "repeated", "ignored_value", "conflict"]


@dataclass(frozen=True, kw_only=True, slots=True)
class DecoratorWarning:
    """A problem with one decorator line; never fatal.

    ``kind``: ``unknown`` (not a known decorator; ignored), ``invalid`` (a known
    decorator with an unusable value; ignored), ``repeated`` (a later copy of
    a known decorator; the first applies), ``ignored_value`` (a flag given a
    value), ``conflict`` (decorators that cancel each other out).
    """

    line: int
    raw: str
    name: str
    kind: WarningKind
    message: str

    def __str__(self) -> str:
        return f"line {self.line} {self.raw!r}: {self.message}"


@dataclass(frozen=True, kw_only=True, slots=True)
class ParsedContent:
    """Decorator values of one entry and the text the model sees.

    ``None`` / ``False`` means the decorator is absent.
    """

    text: str
    probability: int | None = None
    scan_depth: int | None = None
    order: int | None = None
    priority: int | None = None
    role: Role | None = None
    activate_only_after: int | None = None
    activate_only_every: int | None = None
    keep: bool = False
    dont_activate_after_match: bool = False
    is_greeting: bool = False
    decorators: tuple[Decorator, ...] = ()
    unknown: tuple[Decorator, ...] = ()
    warnings: tuple[DecoratorWarning, ...] = ()

    @property
    def has_gates(self) -> bool:
        """True when chat length or history can block the entry."""
        return (
            self.is_greeting
            or self.activate_only_after is not None
            or self.activate_only_every is not None
            or self.dont_activate_after_match
        )


def _parse_int(text: str | None, low: int | None, high: int | None) -> tuple[int | None, str | None]:
    if text is None:
        return None, "needs a whole number"
    cleaned = text.strip().rstrip("%").strip()
    try:
        number = int(cleaned)
    except ValueError:
        return None, f"{text!r} is not a whole number"
    if low is not None and number < low:
        return None, f"{number} is below {low}"
    if high is not None and number > high:
        return None, f"{number} is above {high}"
    return number, None


def decorators_parse(content: str) -> ParsedContent:
    """Parse the ``@@`` block at the start of ``content`` (see the module docstring).

    Content without a decorator block comes back unchanged as ``text``.
    """
    if not content.lstrip().startswith("@@"):
        return ParsedContent(text=content)
    lines = content.split("\n")
    block_end = 0
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("@@"):
            block_end = index + 1
        elif stripped:
            break
    if block_end == 0:
        return ParsedContent(text=content)

    values: dict[str, object] = {}
    decorators: list[Decorator] = []
    unknown: list[Decorator] = []
    warnings: list[DecoratorWarning] = []
    previous_applied = True
    for number, line in enumerate(lines[:block_end], start=1):
        stripped = line.strip()
        if not stripped:
            continue
        fallback = stripped.startswith("@@@")
        body = stripped[3:] if fallback else stripped[2:]
        name, _, rest = body.partition(" ")
        name = name.strip().lower()
        value = rest.strip() or None
        decorator = Decorator(name=_ALIASES.get(name, name), value=value, line=number, raw=stripped)
        if fallback and previous_applied:
            # A fallback only stands in for a line above that was not applied.
            continue
        applied = False
        canonical = decorator.name
        if not name:
            warnings.append(
                DecoratorWarning(line=number, raw=stripped, name="", kind="unknown", message="empty decorator name")
            )
        elif canonical not in KNOWN_DECORATORS:
            unknown.append(decorator)
            warnings.append(
                DecoratorWarning(
                    line=number, raw=stripped, name=name, kind="unknown", message=f"unknown decorator @@{name}; ignored"
                )
            )
        elif canonical in values:
            warnings.append(
                DecoratorWarning(
                    line=number,
                    raw=stripped,
                    name=canonical,
                    kind="repeated",
                    message=f"@@{canonical} repeated; the first one applies",
                )
            )
            applied = True
        elif canonical in _FLAGS:
            values[canonical] = True
            applied = True
            if value is not None:
                warnings.append(
                    DecoratorWarning(
                        line=number,
                        raw=stripped,
                        name=canonical,
                        kind="ignored_value",
                        message=f"@@{canonical} takes no value; {value!r} ignored",
                    )
                )
        elif canonical == "role":
            role = (value or "").lower()
            if role in ROLES:
                values["role"] = role
                applied = True
            else:
                warnings.append(
                    DecoratorWarning(
                        line=number,
                        raw=stripped,
                        name="role",
                        kind="invalid",
                        message="@@role needs system, user or assistant",
                    )
                )
        else:
            low, high = _INT_RANGES[canonical]
            parsed, problem = _parse_int(value, low, high)
            if problem is None:
                values[canonical] = parsed
                applied = True
            else:
                warnings.append(
                    DecoratorWarning(
                        line=number,
                        raw=stripped,
                        name=canonical,
                        kind="invalid",
                        message=f"@@{canonical}: {problem}; ignored",
                    )
                )
        if applied:
            decorators.append(decorator)
        previous_applied = applied

    if values.get("keep") and values.get("dont_activate_after_match"):
        warnings.append(
            DecoratorWarning(
                line=0,
                raw="@@keep",
                name="keep",
                kind="conflict",
                message="@@keep has no effect together with @@dont_activate_after_match",
            )
        )

    # Blank lines between the block and the text are not content.
    text_start = block_end
    while text_start < len(lines) and not lines[text_start].strip():
        text_start += 1
    text = "\n".join(lines[text_start:])

    def as_int(name: str) -> int | None:
        value = values.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    role_value = values.get("role")
    return ParsedContent(
        text=text,
        probability=as_int("probability"),
        scan_depth=as_int("scan_depth"),
        order=as_int("order"),
        priority=as_int("priority"),
        role=role_value if isinstance(role_value, str) and role_value in ROLES else None,  # type: ignore[arg-type]
        activate_only_after=as_int("activate_only_after"),
        activate_only_every=as_int("activate_only_every"),
        keep=bool(values.get("keep")),
        dont_activate_after_match=bool(values.get("dont_activate_after_match")),
        is_greeting=bool(values.get("is_greeting")),
        decorators=tuple(decorators),
        unknown=tuple(unknown),
        warnings=tuple(warnings),
    )


def chat_is_at_greeting(chat: Sequence[Message]) -> bool:
    """The chat is still at its greeting: at most one message, and none from the user."""
    return len(chat) <= 1 and not any(message.role == "user" for message in chat)


def gate_allows(parsed: ParsedContent, chat: Sequence[Message], *, spent: bool) -> str | None:
    """Check the chat-dependent decorators; ``None`` if they allow the entry, else why not.

    Counting boundary (SPEC §10): ``count`` is the number of messages in the
    chat when the turn is assembled, both sides, greeting included (the reply
    being written is not counted).

    * ``@@activate_only_after N`` allows the entry once ``count >= N``: with
      ``@@activate_only_after 4`` a chat of 3 messages is blocked and a chat
      of 4 is allowed (the reply comes after four messages).
    * ``@@activate_only_every N`` allows the entry when ``count`` is a
      positive multiple of N: with N = 3, chats of 3, 6, 9 ... messages.
    * ``@@is_greeting`` allows the entry only while the chat is at its
      greeting (:func:`chat_is_at_greeting`).
    * ``@@dont_activate_after_match`` blocks the entry once it has fired
      (``spent``, from the chat's timed state).
    """
    count = len(chat)
    if parsed.dont_activate_after_match and spent:
        return "@@dont_activate_after_match: already fired once in this chat"
    if parsed.is_greeting and not chat_is_at_greeting(chat):
        return f"@@is_greeting: the chat is past its greeting ({count} messages)"
    after = parsed.activate_only_after
    if after is not None and count < after:
        return f"@@activate_only_after {after}: the chat has {count} messages"
    every = parsed.activate_only_every
    if every is not None and (count == 0 or count % every != 0):
        return f"@@activate_only_every {every}: {count} messages is not a multiple of {every}"
    return None
