"""Versions of editable resources as strong ETags, and the refusal of a stale write.

One tag shape everywhere: ``"<kind>-<id>-<version>"``. The version is the row's own counter where it
has one (a book's ``version``) or its ``updated_at`` to the microsecond (every write of those rows
stamps it). Services compare the version they were given with the current one under the row lock, so
of two concurrent writers holding the same version only the first wins (compare-and-set).
"""
from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

from lore_platform.errors import PreconditionFailed

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def etag(kind: str, pk: int, version: object) -> str:
    return f'"{kind}-{pk}-{version}"'


def stamp_version(updated_at: datetime) -> str:
    """``updated_at`` as an exact whole number of microseconds (no float rounding)."""
    if updated_at.tzinfo is None:
        updated_at = updated_at.replace(tzinfo=UTC)
    return str((updated_at - _EPOCH) // _MICROSECOND)


def version_check(kind: str, pk: int, current: object, expected: object | None) -> None:
    """Refuse a write whose caller read an older version (``expected`` None = unconditional)."""
    if expected is None or str(expected) == str(current):
        return
    tag = etag(kind, pk, current)
    raise PreconditionFailed(
        "The {kind} changed since you read it (its ETag is now {etag}); nothing was written. Read it again "
        "and re-apply your change.", values={"kind": kind, "etag": tag},
        field="If-Match", details={"resource": kind, "id": pk, "etag": tag},
    )


def content_version(value: object) -> str:
    """A setting without a version column (a tenant's CORS origins): the digest of its stored value, so
    the tag changes exactly when the value does (a strong tag, as GitHub's content ETags)."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:20]
