"""Safe JSON decoding and lenient field coercion shared by the readers.

Everything that can go wrong with hostile bytes is turned into a
``DomainError`` here: oversize payloads (``PayloadTooLarge``, I-3), invalid
UTF-8, truncated or malformed JSON, ``NaN``/``Infinity``, duplicate object
keys (a world-info ``entries`` object with the same uid twice), nesting deeper
than the limit (checked *before* parsing, so a 100,000-level bracket bomb
never reaches the recursive parser), and absurd numbers.

Coercion helpers accept the spellings real files use (``"1"`` for ``1``,
``"true"`` for ``true``, ``1.0`` for ``1``) and refuse anything else with the
JSON path of the bad value in ``field``.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from itertools import accumulate
from typing import Any, NoReturn

from lore_platform.errors import PayloadTooLarge, ValidationFailed

# Format errors cite I-1 (what the importer accepts); limits cite I-3.
RULE_FORMAT = "I-1"
RULE_LIMITS = "I-3"

INT32_MAX = 2**31 - 1

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def refuse(message: str, path: str | None = None, *, rule: str = RULE_FORMAT, **details: Any) -> NoReturn:
    raise ValidationFailed(message, field=path, rule=rule, details=details or None)


def too_large(message: str, limit: int, **details: Any) -> NoReturn:
    """A card/file size limit (I-3): 413, nothing read further."""
    raise PayloadTooLarge(message, field="file", rule=RULE_LIMITS, details={"limit": limit, **details})


def check_size(data: bytes, limit: int, what: str) -> None:
    if len(data) > limit:
        raise PayloadTooLarge(
            f"{what} is {len(data):,} bytes; the limit is {limit:,} bytes",
            field="file",
            rule=RULE_LIMITS,
            details={"size": len(data), "limit": limit},
        )


def decode_text(data: bytes, what: str = "file") -> str:
    """UTF-8 (a BOM is allowed), or UTF-16 with a BOM; anything else is refused."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    elif data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            refuse(f"{what} is not valid UTF-16: {exc.reason} at byte {exc.start}", "file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        refuse(f"{what} is not valid UTF-8 (byte {exc.start}: {exc.reason})", "file")


def max_nesting(text: str, limit: int) -> int:
    """Deepest bracket nesting outside strings, stopping early past ``limit``."""
    if text.count("[") + text.count("{") <= limit:
        return 0  # cannot be deeper than the number of openers
    brackets = _NOT_BRACKET.sub("", _STRING.sub('""', text))
    deepest = 0
    for depth in accumulate(_DEPTH_STEP[c] for c in brackets):
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                break
    return deepest


def _reject_constant(name: str) -> NoReturn:
    refuse(f"JSON contains {name}, which is not a number JSON allows", "file")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        refuse(f"JSON number {text[:40]} is out of range", "file")
    return value


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                refuse(f"duplicate key {key!r} in a JSON object", "file", key=key)
            seen.add(key)
    return out


def loads(data: bytes, *, limit_bytes: int, max_depth: int, what: str = "JSON file") -> Any:
    """Decode untrusted JSON bytes; every failure is a ``DomainError``."""
    check_size(data, limit_bytes, what)
    if not data.strip():
        refuse(f"{what} is empty", "file")
    text = decode_text(data, what)
    return loads_text(text, max_depth=max_depth, what=what)


def loads_text(text: str, *, max_depth: int, what: str = "JSON") -> Any:
    if not text.strip():
        refuse(f"{what} is empty", "file")
    depth = max_nesting(text, max_depth)
    if depth > max_depth:
        refuse(
            f"{what} is nested deeper than {max_depth} levels",
            "file",
            rule=RULE_LIMITS,
            limit=max_depth,
        )
    try:
        return json.loads(
            text, object_pairs_hook=_unique_pairs, parse_constant=_reject_constant, parse_float=_finite_float
        )
    except json.JSONDecodeError as exc:
        hint = " (the file looks truncated)" if exc.pos >= len(text.rstrip()) else ""
        refuse(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}{hint}", "file")
    except RecursionError:
        refuse(f"{what} is nested too deeply", "file", rule=RULE_LIMITS)
    except ValueError as exc:  # e.g. integers longer than Python accepts
        refuse(f"{what} is not valid JSON: {exc}", "file")


# --- coercion -------------------------------------------------------------------

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off", ""}


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def as_text(value: Any, path: str, default: str = "") -> str:
    if value is None:
        return default
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    refuse(f"{path} must be a string, not {type_name(value)}", path)


def as_bool(value: Any, path: str, default: bool) -> bool:
    result = as_opt_bool(value, path)
    return default if result is None else result


def as_opt_bool(value: Any, path: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False if lowered else None
    refuse(f"{path} must be true or false, not {value!r}"[:200], path)


def _number(value: Any, path: str) -> float | int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        refuse(f"{path} must be a number, not a boolean", path)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            refuse(f"{path} must be a finite number", path)
        return value
    if isinstance(value, str):
        stripped = value.strip()
        if stripped == "":
            return None
        try:
            parsed = float(stripped) if any(c in stripped for c in ".eE") else int(stripped)
        except ValueError:
            refuse(f"{path} must be a number, not {value!r}"[:200], path)
        if isinstance(parsed, float) and not math.isfinite(parsed):
            refuse(f"{path} must be a finite number", path)
        return parsed
    refuse(f"{path} must be a number, not {type_name(value)}", path)


def as_opt_int(value: Any, path: str, *, lo: int = -INT32_MAX, hi: int = INT32_MAX) -> int | None:
    number = _number(value, path)
    if number is None:
        return None
    if isinstance(number, float):
        if abs(number) > INT32_MAX:
            refuse(f"{path} is out of range ({lo}..{hi})", path)
        number = round(number)
    if not lo <= number <= hi:
        refuse(f"{path} is out of range ({lo}..{hi}): {number}"[:200], path)
    return number


def as_int(value: Any, path: str, default: int, *, lo: int = -INT32_MAX, hi: int = INT32_MAX) -> int:
    result = as_opt_int(value, path, lo=lo, hi=hi)
    return default if result is None else result


def as_keys(value: Any, path: str) -> tuple[str, ...]:
    """A key list: an array of strings (numbers allowed) or one comma-separated string.

    Blank keys are dropped (no app matches them); the others are kept exactly
    as written — SillyTavern trims at match time, and a full-width comma inside
    one key stays one key.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, list):
        out: list[str] = []
        for i, item in enumerate(value):
            text = as_text(item, f"{path}.{i}")
            if text.strip():
                out.append(text)
        return tuple(out)
    refuse(f"{path} must be a list of strings, not {type_name(value)}", path)


def as_object(value: Any, path: str) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    refuse(f"{path} must be an object, not {type_name(value)}", path)


def first_present(raw: Mapping[str, Any], names: tuple[str, ...]) -> tuple[str | None, Any]:
    for name in names:
        if name in raw and raw[name] is not None:
            return name, raw[name]
    return None, None


def lenient(convert: Callable[[Any, str], Any], value: Any) -> Any:
    """``convert(value)`` or the value unchanged when it does not convert."""
    try:
        return convert(value, "value")
    except ValidationFailed:
        return value
