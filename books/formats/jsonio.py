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

from lore_platform.errors import PayloadTooLarge, Phrase, Term, ValidationFailed

# Format errors cite I-1 (what the importer accepts); limits cite I-3.
RULE_FORMAT = "I-1"
RULE_LIMITS = "I-3"

INT32_MAX = 2**31 - 1

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def refuse(
    message: str,
    path: str | None = None,
    *,
    rule: str = RULE_FORMAT,
    values: Mapping[str, Any] | None = None,
    **details: Any,
) -> NoReturn:
    """Refuse the file (I-1 unless ``rule`` says otherwise). With ``values``, ``message`` is a template
    (``"{path} must be a string, not {type}"``) the pages translate; the API says it filled in."""
    raise ValidationFailed(message, field=path, rule=rule, details=details or None, values=values)


def refuse_clipped(template: str, path: str, *, values: Mapping[str, Any], clip: str, limit: int = 200) -> NoReturn:
    """``refuse`` with English of at most ``limit`` characters: a value quoted from the file can be
    long. ``values[clip]`` ends the template and is cut to fit, so the English is exactly
    ``template.format(**values)[:limit]``."""
    values = dict(values)
    over = len(template.format(**values)) - limit
    if over > 0:
        quoted = str(values[clip])
        values[clip] = quoted[: max(0, len(quoted) - over)]
    refusal = ValidationFailed(template, field=path, rule=RULE_FORMAT, values=values)
    if len(refusal.message) > limit:  # the path alone is longer than the limit: cut the English itself
        refusal.message = Phrase(refusal.message[:limit])
        refusal.args = (refusal.message,)
    raise refusal


def too_large(message: str, limit: int, *, values: Mapping[str, Any] | None = None, **details: Any) -> NoReturn:
    """A card/file size limit (I-3): 413, nothing read further. With ``values``, ``message`` is a
    template (as for :func:`refuse`)."""
    raise PayloadTooLarge(message, field="file", rule=RULE_LIMITS, details={"limit": limit, **details}, values=values)


def check_size(data: bytes, limit: int, what: str) -> None:
    if len(data) > limit:
        raise PayloadTooLarge(
            "{what} is {size:,} bytes; the limit is {limit:,} bytes",
            values={"what": what, "size": len(data), "limit": limit},
            field="file",
            rule=RULE_LIMITS,
            details={"size": len(data), "limit": limit},
        )


def decode_text(data: bytes, what: str = Term("file")) -> str:
    """UTF-8 (a BOM is allowed), or UTF-16 with a BOM; anything else is refused."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    elif data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            refuse("{what} is not valid UTF-16: {reason} at byte {byte}", "file",
                   values={"what": what, "reason": exc.reason, "byte": exc.start})
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        refuse("{what} is not valid UTF-8 (byte {byte}: {reason})", "file",
               values={"what": what, "byte": exc.start, "reason": exc.reason})


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
    refuse("JSON contains {name}, which is not a number JSON allows", "file", values={"name": name})


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        refuse("JSON number {number} is out of range", "file", values={"number": text[:40]})
    return value


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                refuse("duplicate key {key} in a JSON object", "file", values={"key": repr(key)}, key=key)
            seen.add(key)
    return out


def loads(data: bytes, *, limit_bytes: int, max_depth: int, what: str = Term("JSON file")) -> Any:
    """Decode untrusted JSON bytes; every failure is a ``DomainError``."""
    check_size(data, limit_bytes, what)
    if not data.strip():
        refuse("{what} is empty", "file", values={"what": what})
    text = decode_text(data, what)
    return loads_text(text, max_depth=max_depth, what=what)


def loads_text(text: str, *, max_depth: int, what: str = Term("JSON")) -> Any:
    if not text.strip():
        refuse("{what} is empty", "file", values={"what": what})
    depth = max_nesting(text, max_depth)
    if depth > max_depth:
        refuse(
            "{what} is nested deeper than {max_depth} levels",
            "file",
            rule=RULE_LIMITS,
            values={"what": what, "max_depth": max_depth},
            limit=max_depth,
        )
    try:
        return json.loads(
            text, object_pairs_hook=_unique_pairs, parse_constant=_reject_constant, parse_float=_finite_float
        )
    except json.JSONDecodeError as exc:
        where = {"what": what, "error": exc.msg, "line": exc.lineno, "column": exc.colno}
        if exc.pos >= len(text.rstrip()):
            refuse("{what} is not valid JSON: {error} at line {line} column {column} (the file looks truncated)",
                   "file", values=where)
        refuse("{what} is not valid JSON: {error} at line {line} column {column}", "file", values=where)
    except RecursionError:
        refuse("{what} is nested too deeply", "file", rule=RULE_LIMITS, values={"what": what})
    except ValueError as exc:  # e.g. integers longer than Python accepts
        refuse("{what} is not valid JSON: {error}", "file", values={"what": what, "error": str(exc)})


# --- coercion -------------------------------------------------------------------

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off", ""}


def type_name(value: Any) -> str:
    """The JSON type of ``value`` as a refusal names it (a ``Term``: pages say it in their language)."""
    if value is None:
        return Term("null")
    if isinstance(value, bool):
        return Term("boolean")
    if isinstance(value, (int, float)):
        return Term("number")
    if isinstance(value, str):
        return Term("string")
    if isinstance(value, list):
        return Term("array")
    if isinstance(value, dict):
        return Term("object")
    return type(value).__name__


def as_text(value: Any, path: str, default: str = "") -> str:
    if value is None:
        return default
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    refuse("{path} must be a string, not {type}", path, values={"path": path, "type": type_name(value)})


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
    refuse_clipped("{path} must be true or false, not {value}", path, values={"path": path, "value": repr(value)},
                    clip="value")


def _number(value: Any, path: str) -> float | int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        refuse("{path} must be a number, not a boolean", path, values={"path": path})
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            refuse("{path} must be a finite number", path, values={"path": path})
        return value
    if isinstance(value, str):
        stripped = value.strip()
        if stripped == "":
            return None
        try:
            parsed = float(stripped) if any(c in stripped for c in ".eE") else int(stripped)
        except ValueError:
            refuse_clipped("{path} must be a number, not {value}", path, values={"path": path, "value": repr(value)},
                            clip="value")
        if isinstance(parsed, float) and not math.isfinite(parsed):
            refuse("{path} must be a finite number", path, values={"path": path})
        return parsed
    refuse("{path} must be a number, not {type}", path, values={"path": path, "type": type_name(value)})


def as_opt_int(value: Any, path: str, *, lo: int = -INT32_MAX, hi: int = INT32_MAX) -> int | None:
    number = _number(value, path)
    if number is None:
        return None
    if isinstance(number, float):
        if abs(number) > INT32_MAX:
            refuse("{path} is out of range ({lo}..{hi})", path, values={"path": path, "lo": lo, "hi": hi})
        number = round(number)
    if not lo <= number <= hi:
        refuse_clipped("{path} is out of range ({lo}..{hi}): {number}", path,
                       values={"path": path, "lo": lo, "hi": hi, "number": number}, clip="number")
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
    refuse("{path} must be a list of strings, not {type}", path, values={"path": path, "type": type_name(value)})


def as_object(value: Any, path: str) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    refuse("{path} must be an object, not {type}", path, values={"path": path, "type": type_name(value)})


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
