"""One JSON encoder for bytes on the hot path: API responses and stored request logs.

orjson, compact, UTF-8; what it cannot encode natively (Decimal, lazy
translations, …) goes through DRF's encoder, so values come out as
``rest_framework.renderers.JSONRenderer`` would write them.
"""
from __future__ import annotations

from typing import Any

import orjson
from rest_framework.utils.encoders import JSONEncoder

_fallback = JSONEncoder()
OPTIONS = orjson.OPT_NON_STR_KEYS


def json_dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=_fallback.default, option=OPTIONS)
