"""Safe retries (issue 27, point 3): a POST's ``Idempotency-Key`` and its first answer, per tenant, 24 h.

As Stripe does: the first request with a key runs and its answer is stored; a retry with the same key
and the same request (method, path, body) gets that answer again without running anything; the same
key on another request is refused (422); a retry while the first is still running is 409. Only answers
below 500 are kept: a failure the server caused may be retried and run again.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from lore_platform.errors import Conflict, DomainError, ValidationFailed
from lore_platform.tenancy.models import IdempotencyKey, Tenant

KEY_TTL = timedelta(hours=24)
KEY_MAX_CHARS = 255
KEY_PATTERN = re.compile(rf"[!-~]{{1,{KEY_MAX_CHARS}}}")
# A first request that never recorded its answer (its process died) stops blocking its key after this.
IN_FLIGHT_ABANDONED = timedelta(minutes=10)
# The answer's headers a replay repeats; the rest (request id, CORS, rate limits) belong to each call.
REPLAYED_HEADERS = ("Content-Type", "Location", "ETag", "Content-Disposition")


class KeyReused(DomainError):
    status = 422
    code = "idempotency_key_reused"


class KeyInFlight(Conflict):
    code = "idempotency_key_in_flight"


def key_clean(raw: str) -> str:
    if not KEY_PATTERN.fullmatch(raw):
        raise ValidationFailed(
            "Idempotency-Key is 1 to {max} visible ASCII characters, no spaces (a UUID is a good key).",
            values={"max": KEY_MAX_CHARS}, field="Idempotency-Key", details={"limit": KEY_MAX_CHARS},
        )
    return raw


def fingerprint(method: str, path: str, body: bytes) -> str:
    digest = hashlib.sha256(f"{method}\n{path}\n".encode())
    digest.update(body)
    return digest.hexdigest()


def claim(*, tenant: Tenant, key: str, method: str, path: str, body: bytes,
          now: datetime | None = None) -> tuple[IdempotencyKey, bool]:
    """``(row, replay)``: a new claim to run the request under (``replay`` False), or the stored first
    answer to give back (``replay`` True). One indexed lookup, then one insert for a new key."""
    now = now or timezone.now()
    key = key_clean(key)
    print_ = fingerprint(method, path, body)
    rows = IdempotencyKey.objects.for_tenant(tenant)
    found = rows.filter(key=key).first()
    if found is not None and found.expires_at <= now:
        rows.filter(pk=found.pk).delete()  # an expired key is free again (the sweep may not have run yet)
        found = None
    if found is None:
        row = IdempotencyKey(tenant=tenant, key=key, fingerprint=print_, method=method, path=path[:2048],
                             created_at=now, expires_at=now + KEY_TTL)
        try:
            with transaction.atomic():
                row.save(force_insert=True)
            return row, False
        except IntegrityError:  # a concurrent request with the key inserted first
            found = rows.filter(key=key).first()
            if found is None:
                raise _in_flight(key) from None
    if found.fingerprint != print_:
        raise KeyReused(
            "Idempotency-Key {key} was first used for another request ({method} {path} with another body); "
            "use a new key for a new request.", values={"key": repr(key), "method": found.method, "path": found.path},
            field="Idempotency-Key", details={"method": found.method, "path": found.path},
        )
    if found.status is None:
        if found.created_at > now - IN_FLIGHT_ABANDONED:
            raise _in_flight(key)
        # Abandoned by a process that died: this retry takes it over (only one retry can).
        if not rows.filter(pk=found.pk, status__isnull=True, created_at=found.created_at).update(created_at=now):
            raise _in_flight(key)
        found.created_at = now
        return found, False
    return found, True


def _in_flight(key: str) -> KeyInFlight:
    return KeyInFlight("A request with Idempotency-Key {key} is still running; retry once it has answered.",
                       values={"key": repr(key)}, field="Idempotency-Key")


def record(row: IdempotencyKey, *, status: int, body: bytes, headers: Mapping[str, str]) -> None:
    """Keep the first answer (below 500) for the key's replays."""
    kept = {name: headers[name] for name in REPLAYED_HEADERS if name in headers}
    IdempotencyKey.objects.for_tenant(row.tenant).filter(pk=row.pk).update(status=status, body=body, headers=kept)


def release(row: IdempotencyKey) -> None:
    """The request failed on the server's side: the key is free for a retry to run it again."""
    IdempotencyKey.objects.for_tenant(row.tenant).filter(pk=row.pk, status__isnull=True).delete()
