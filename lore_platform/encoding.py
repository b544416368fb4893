"""One JSON encoder for bytes on the hot path: API responses and stored request logs.

orjson, compact, UTF-8; what it cannot encode natively (Decimal, lazy
translations, …) goes through DRF's encoder, so values come out as
``rest_framework.renderers.JSONRenderer`` would write them.

A value holding an unpaired surrogate (a row stored before the text check,
issue 26) is written repaired — U+FFFD in its place, NUL dropped
(``lore_platform.text.text_repair``) — rather than failing the whole answer:
one such row must not take down a listing, and the operator is told (logged)
to run ``manage.py text_repair``. The repair runs only after orjson refused,
so clean answers pay nothing.
"""
from __future__ import annotations

import logging
from typing import Any

import orjson
from rest_framework.utils.encoders import JSONEncoder

from lore_platform.text import text_repair

logger = logging.getLogger("lore_platform.encoding")

_fallback = JSONEncoder()
OPTIONS = orjson.OPT_NON_STR_KEYS


def json_dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value, default=_fallback.default, option=OPTIONS)
    except orjson.JSONEncodeError as exc:
        if "surrogates" not in str(exc):
            raise
    logger.warning("answer holds text stored before the text check (unpaired surrogate): written with U+FFFD; "
                   "run `manage.py text_repair` to repair the stored rows")
    return orjson.dumps(text_repair(value), default=_fallback.default, option=OPTIONS)
