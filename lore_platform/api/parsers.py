"""JSON bodies, read with bounds: size, nesting depth and integer range.

Every JSON endpoint parses with ``JSONBodyParser`` only (``application/json``;
anything else is a 415). What it refuses is a 400 or a 413 naming the limit,
before any view or service sees the data:

- a body over ``JSON_BODY_BYTES`` (413): 500 entries of 20,000 characters
  (the largest bulk create, W-12) fit with room to spare;
- nesting deeper than ``JSON_MAX_DEPTH`` (400): the deepest body any endpoint
  documents is an entry's ``extra`` inside a bulk create (about 6 levels), so
  32 leaves imported data room without letting a 10,000-level body recurse;
- an integer outside signed 64 bits, or a number that reads as infinity (400,
  naming the field): no column and no encoder (orjson) holds it, so it would
  be saved and then fail on every read;
- a string or an object key, at any depth, holding NUL or an unpaired UTF-16
  surrogate (400 ``invalid_text``, rule P-6, naming the JSON path such as
  ``extra.<key>`` or ``messages[3].content``): no text column, no JSON encoder
  and no UTF-8 file holds it (``lore_platform.text``). Checked here, every
  JSON body of every endpoint is covered before any service sees it.
"""
from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from lore_platform.errors import PayloadTooLarge
from lore_platform.text import TEXT_RULE, text_problem, unstorable_in

JSON_BODY_BYTES = 16 * 1024 * 1024
JSON_MAX_DEPTH = 32
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1


class BodyRefused(ParseError):
    """A 400 that names the field and the limit (rendered by ``lore_platform.api.errors``)."""

    def __init__(self, message: str, *, code: str, field: str | None = None, details: dict[str, Any],
                 rule: str | None = None) -> None:
        super().__init__(message, code=code)
        self.error_code = code
        self.field = field
        self.details = details
        self.rule = rule


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def json_body_check(data: Any) -> None:
    """Refuse nesting beyond ``JSON_MAX_DEPTH``, integers beyond 64 bits and text that is not text; one walk."""
    if isinstance(data, str):
        if unstorable_in(data):
            raise text_refused(data, "")
        return
    stack: list[tuple[Any, int, str]] = [(data, 1, "")]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, bool):
            continue
        if isinstance(value, float):
            if not math.isfinite(value):  # 1e999 reads as infinity: no JSON encoder writes it back
                raise BodyRefused(
                    f"{path or 'The body'} is a number too large to store.",
                    code="out_of_range",
                    field=path or None,
                    details={"max": sys.float_info.max},
                )
            continue
        if isinstance(value, int):
            if not INT_MIN <= value <= INT_MAX:
                raise BodyRefused(
                    f"{path or 'The body'} is a number outside the 64-bit integer range.",
                    code="out_of_range",
                    field=path or None,
                    details={"min": INT_MIN, "max": INT_MAX},
                )
            continue
        if isinstance(value, (dict, list)):
            if depth > JSON_MAX_DEPTH:
                raise _too_deep()
            children = value.values() if isinstance(value, dict) else value
            # The keys and string children of one container in one scan of their join (the join
            # keeps every code point, so it finds exactly what a scan of each would): 100,000 tags
            # cost milliseconds. Only a refusal walks again, to name the path.
            texts = [child for child in children if type(child) is str]
            if isinstance(value, dict):
                texts.extend(value)
            if texts and unstorable_in("".join(texts)):
                raise text_refused(value, path)
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, child in items:
                if isinstance(child, (dict, list, int, float)):
                    stack.append((child, depth + 1, _path(path, key)))


def text_refused(value: Any, path: str) -> BodyRefused:
    """The 400 for NUL or an unpaired surrogate inside ``value`` (at ``path``), naming exactly where."""
    bad = text_problem(value, path)
    assert bad is not None  # called only once the walk found one
    where = bad.path or "The body"
    details: dict[str, Any] = {"character": bad.character, "position": bad.position}
    if bad.key is not None:
        details["key"] = bad.key
    fix = "remove it" if bad.nul else "send valid Unicode (a surrogate pair, or the character itself)"
    return BodyRefused(
        f"{where} contains {bad.what} ({bad.character}), which is not storable text; {fix} ({TEXT_RULE}).",
        code="invalid_text",
        field=bad.path or None,
        details=details,
        rule=TEXT_RULE,
    )


def _too_deep() -> BodyRefused:
    return BodyRefused(
        f"The JSON body is nested more than {JSON_MAX_DEPTH} levels deep.",
        code="too_deep",
        details={"limit": JSON_MAX_DEPTH, "unit": "levels"},
    )


def body_length(request: Any) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except (TypeError, ValueError):
        return 0


def body_too_large(size: int | None, limit: int) -> PayloadTooLarge:
    shown = f"{size:,} bytes" if size is not None else "larger than that"
    return PayloadTooLarge(
        f"The request body is {shown}; the limit is {limit:,} bytes.",
        field="body",
        details={"limit": limit, "actual": size, "unit": "bytes"},
    )


class JSONBodyParser(JSONParser):
    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        request = (parser_context or {}).get("request")
        length = body_length(request) if request is not None else 0
        if length > JSON_BODY_BYTES:
            raise body_too_large(length, JSON_BODY_BYTES)
        raw = stream.read(JSON_BODY_BYTES + 1) if stream is not None else b""
        if len(raw) > JSON_BODY_BYTES:  # no Content-Length (chunked): count what arrives
            raise body_too_large(None, JSON_BODY_BYTES)
        try:
            data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
        except RecursionError:
            raise _too_deep() from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        json_body_check(data)
        return data


def form_fields_check(data: Any) -> None:
    """The text fields of a multipart body (an import's title, mode …), checked as a JSON body's strings
    are: NUL is refused naming the field (a lone surrogate cannot arrive: Django decodes multipart
    text with U+FFFD for what is not UTF-8)."""
    for name, values in data.lists():
        for value in (name, *values):
            if isinstance(value, str) and unstorable_in(value):
                raise text_refused({name: values[0] if len(values) == 1 else values}, "")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")
