"""Cleaning: type-check and normalise the fields a write receives, then run ``books.limits``."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from books import limits
from books.decorators import decorators_read
from books.models import (
    ENTRY_LORE_FIELDS,
    Book,
    Placement,
    Profile,
    Role,
    Scope,
    SecondaryLogic,
    Visibility,
)
from lore_platform.errors import DomainError, ValidationFailed
from lore_platform.text import text_check
from retrieval.engine.key_expressions import (
    KEY_EXPRESSION_RULE,
    KeyExpressionError,
    key_expression_parse,
)

INT32 = (-(2**31), 2**31 - 1)

BOOK_EDITABLE_FIELDS = frozenset(
    {
        "title",
        "description",
        "tags",
        "language",
        "scan_depth",
        "token_budget",
        "recursive",
        "case_sensitive",
        "whole_words",
        "living_world",
        "living_world_review",
        "channels",
        "extra",
    }
)
BOOK_CREATE_FIELDS = BOOK_EDITABLE_FIELDS | {"scope", "lineage", "active"}

ENTRY_EDITABLE_FIELDS = frozenset({*ENTRY_LORE_FIELDS, "canon", "channels", "extra"})
# Only creation paths (import, legacy conversion) may set these.
ENTRY_CREATE_ONLY_FIELDS = frozenset({"unresolved_channels"})


def field_refusal(
    message: str, field: str, rule: str | None = None, *, values: Mapping[str, Any] | None = None
) -> ValidationFailed:
    """A refusal of one field; ``message`` is a literal template when ``values`` fill it in."""
    return ValidationFailed(message, field=field, rule=rule, values=values)


def _as_text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise field_refusal("Must be text.", field)
    text_check(value, field)  # NUL or a lone surrogate: no column stores it, no encoder writes it (P-6)
    return value


def as_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise field_refusal("Must be true or false.", field)
    return value


def as_int(value: Any, field: str, *, nullable: bool = False) -> int | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise field_refusal("Must be a whole number.", field)
    if not INT32[0] <= value <= INT32[1]:
        raise field_refusal("Number out of range.", field)
    return value


def _as_str_list(value: Any, field: str, *, dedupe: bool = False) -> list[str]:
    if not isinstance(value, (list, tuple)):
        raise field_refusal("Must be a list of text.", field)
    items: list[str] = []
    seen: set[str] = set()  # a set, not a list search: 100,000 tags take milliseconds, not minutes
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise field_refusal("Must be text.", f"{field}[{index}]")
        text_check(item, f"{field}[{index}]")
        item = item.strip()
        if item and not (dedupe and item in seen):
            items.append(item)
            seen.add(item)
    return items


def as_choice(value: Any, field: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise field_refusal("Must be one of {choices}.", field, values={"choices": ", ".join(choices)})
    return str(value)


def _as_dict(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise field_refusal("Must be a JSON object.", field)
    text_check(value, field)  # every key and string inside, named by its path (extra.<key>, extra.a[2])
    return value


def unknown_fields(fields: Mapping[str, Any], allowed: Iterable[str], prefix: str = "") -> None:
    unknown = sorted(set(fields) - set(allowed))
    if unknown:
        raise field_refusal("Unknown or read-only field {name}.", f"{prefix}{unknown[0]}", values={"name": repr(unknown[0])})


def book_clean(fields: Mapping[str, Any]) -> dict[str, Any]:
    cleaned: dict[str, Any] = {}
    for name, value in fields.items():
        if name in ("title", "description", "language"):
            cleaned[name] = _as_text(value, name).strip()
        elif name == "tags":
            cleaned[name] = _as_str_list(value, name, dedupe=True)
        elif name == "channels":
            cleaned[name] = _as_str_list(value, name, dedupe=True)
        elif name in ("scan_depth", "token_budget"):
            cleaned[name] = as_int(value, name, nullable=True)
        elif name in ("recursive", "case_sensitive", "whole_words", "living_world", "living_world_review", "active"):
            cleaned[name] = as_bool(value, name)
        elif name == "extra":
            cleaned[name] = _as_dict(value, name)
        else:
            cleaned[name] = value
    limits.book_fields_check(cleaned)
    return cleaned


def book_rules_check(book: Book) -> None:
    """Rules that depend on the whole book (after the change is applied)."""
    if book.channels and not (book.profile == Profile.SERVER and book.scope == Scope.SERVER):
        raise field_refusal(
            "Channel restrictions on a book are for server-wide collections; persona books restrict each entry (S-11).",
            "channels",
            "S-11",
        )
    if book.living_world:
        if book.profile != Profile.SMART:
            raise field_refusal("The living world is a world-book feature.", "living_world", "L-1")
        if book.owner_id is None or book.visibility != Visibility.PRIVATE:
            raise field_refusal("The living world needs a private book owned by a user (L-1).", "living_world", "L-1")


def entry_clean(book: Book, fields: Mapping[str, Any], *, creating: bool, prefix: str = "") -> dict[str, Any]:
    """Type-check, normalise and limit-check entry fields for ``book``'s profile."""
    allowed = ENTRY_EDITABLE_FIELDS | (ENTRY_CREATE_ONLY_FIELDS if creating else frozenset())
    unknown_fields(fields, allowed, prefix)
    p = prefix
    cleaned: dict[str, Any] = {}
    if "canon" in fields:
        canon = as_bool(fields["canon"], f"{p}canon")
        if "constant" in fields and fields["constant"] != canon:
            raise field_refusal("`canon` and `constant` name the same flag; send one.", f"{p}canon")
        cleaned["constant"] = canon
    for name, value in fields.items():
        field = f"{p}{name}"
        if name == "canon":
            continue
        if name == "title":
            cleaned[name] = _as_text(value, field).strip()
        elif name == "content":
            cleaned[name] = _as_text(value, field)
        elif name in ("keys", "secondary_keys"):
            cleaned[name] = _as_str_list(value, field)
        elif name in ("channels", "unresolved_channels"):
            cleaned[name] = _as_str_list(value, field, dedupe=True)
        elif name in ("selective", "constant", "enabled"):
            cleaned[name] = as_bool(value, field)
        elif name in ("case_sensitive", "whole_words"):
            cleaned[name] = None if value is None else as_bool(value, field)
        elif name in ("order", "priority"):
            cleaned[name] = as_int(value, field)
        elif name in ("probability", "scan_depth"):
            cleaned[name] = as_int(value, field, nullable=True)
        elif name == "secondary_logic":
            cleaned[name] = as_choice(value, field, SecondaryLogic.values)
        elif name == "key_expression":
            text = _as_text(value, field)
            # Kept as written (an error's position counts in it); blank means "not used".
            cleaned[name] = text if text.strip() else ""
        elif name == "role":
            cleaned[name] = as_choice(value, field, Role.values)
        elif name == "placement":
            cleaned[name] = as_choice(value, field, Placement.values)
        elif name == "extra":
            cleaned[name] = _as_dict(value, field)
    if creating:
        # Required text is checked even when absent (a world-book entry needs its title and lore).
        cleaned.setdefault("title", "")
        cleaned.setdefault("content", "")
    limits.entry_fields_check(book.profile, cleaned, field_prefix=p)
    _entry_rules_check(book, cleaned, prefix=p)
    return cleaned


class KeyExpressionRefused(DomainError):
    """A key expression that cannot be used (K-1): it does not parse, or the book's profile has no key logic."""

    status = 422
    code = "invalid_key_expression"


# Key logic is for the keyword profiles; the sillytavern profile keeps SillyTavern's own
# secondary-key modes (fidelity), and smart reads keys as aliases.
KEY_EXPRESSION_PROFILES = (Profile.CLASSIC, Profile.SERVER)


def key_expression_check(profile: str, text: str, *, field: str = "key_expression") -> None:
    """Refuse (422, K-1) an expression that does not parse, naming its position, or one on a profile without it."""
    if profile not in KEY_EXPRESSION_PROFILES:
        raise KeyExpressionRefused(
            "Key expressions are for classic and server books (K-1); this book's profile is {profile}.",
            values={"profile": profile},
            field=field,
            rule=KEY_EXPRESSION_RULE,
        )
    try:
        key_expression_parse(text)
    except KeyExpressionError as error:
        near = text[error.position:error.position + 20].strip() or "the end"
        raise KeyExpressionRefused(
            "Key expression, position {position} (at {near}): {problem} (K-1).",
            values={"position": error.position, "near": repr(near) if near != "the end" else near,
                    "problem": error.message},
            field=field,
            rule=KEY_EXPRESSION_RULE,
            details={"position": error.position, "problem": error.message},
        ) from None


def _entry_rules_check(book: Book, cleaned: Mapping[str, Any], *, prefix: str) -> None:
    for name in ("channels", "unresolved_channels"):
        if cleaned.get(name) and not (book.profile == Profile.SERVER and book.scope == Scope.PERSONA):
            if book.scope == Scope.SERVER:
                raise field_refusal("Per-entry channels belong to persona books; set them on the collection (S-11).",
                            f"{prefix}{name}", "S-11")
            raise field_refusal("Per-entry channels belong to persona books; they exist only in server lorebooks (S-11).",
                        f"{prefix}{name}", "S-11")
    if cleaned.get("key_expression"):
        key_expression_check(book.profile, cleaned["key_expression"], field=f"{prefix}key_expression")
    if "content" in cleaned and book.profile == Profile.CLASSIC:
        report = decorators_read(cleaned["content"])
        if report.errors:
            problem = report.errors[0]
            raise ValidationFailed(
                "Line {line}: {problem} (C-13).",
                values={"line": problem.line, "problem": problem.message},
                field=f"{prefix}content",
                rule="C-13",
                details={"line": problem.line, "decorator": problem.name},
            )
