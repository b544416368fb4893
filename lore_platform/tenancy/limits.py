"""Abuse limits on accounts: failed sign-ins per account and per client address, sign-ups per address.

Counted in Django's ``limits`` cache (Redis in production, files under the data folder on the
embedded default: every web process counts against the same limit), in fixed windows read from ``clock`` — the one
time source here, replaced by tests, so a lockout's start and end are tested without sleeping.

A limit counts hits in a window of ``window`` seconds; the hit that reaches ``attempts`` locks
the identity for ``lockout`` seconds: while locked, a try is refused before any password is
checked (a right password does not get through either, and its timing tells nothing). The lock
is stored as the moment it ends, so the first try after that moment logs the end and is heard.
Identities are hashed in the keys: emails and addresses are not written into the cache.
"""
from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest

logger = logging.getLogger("loreweave.security")

# The time source of every limit (seconds since the epoch); tests replace it.
clock: Callable[[], float] = time.time
# Tests give each test fresh counters without clearing a shared cache.
KEY_PREFIX = "abuse"


@dataclass(frozen=True, kw_only=True)
class Limit:
    name: str
    attempts: int
    window: int
    lockout: int


def login_account_limit() -> Limit:
    return Limit(name="login-account", attempts=settings.LOGIN_FAILURES_PER_ACCOUNT,
                 window=settings.LOGIN_FAILURE_WINDOW_SECONDS, lockout=settings.LOGIN_LOCKOUT_SECONDS)


def login_address_limit() -> Limit:
    return Limit(name="login-address", attempts=settings.LOGIN_FAILURES_PER_ADDRESS,
                 window=settings.LOGIN_FAILURE_WINDOW_SECONDS, lockout=settings.LOGIN_LOCKOUT_SECONDS)


def signup_address_limit() -> Limit:
    # Not a lockout: the window's budget is spent and comes back with the next window.
    return Limit(name="signup-address", attempts=settings.SIGNUPS_PER_ADDRESS,
                 window=settings.SIGNUP_WINDOW_SECONDS, lockout=settings.SIGNUP_WINDOW_SECONDS)


def password_reset_address_limit() -> Limit:
    return Limit(name="reset-address", attempts=settings.PASSWORD_RESETS_PER_ADDRESS,
                 window=settings.SIGNUP_WINDOW_SECONDS, lockout=settings.SIGNUP_WINDOW_SECONDS)


def password_reset_account_limit() -> Limit:
    # An inbox is not flooded with reset mails by someone who knows the address.
    return Limit(name="reset-account", attempts=settings.PASSWORD_RESETS_PER_ACCOUNT,
                 window=settings.SIGNUP_WINDOW_SECONDS, lockout=settings.SIGNUP_WINDOW_SECONDS)


def invitation_tenant_limit() -> Limit:
    return Limit(name="invite-tenant", attempts=settings.INVITATIONS_PER_TENANT_PER_DAY, window=86400,
                 lockout=86400)


def client_address(request: HttpRequest) -> str:
    """The caller's address: ``REMOTE_ADDR``, or with ``CLIENT_ADDRESS_PROXIES`` = n trusted proxies in
    front, the n-th address from the right of ``X-Forwarded-For`` (what a client writes there
    itself is further left and never trusted)."""
    proxies = int(getattr(settings, "CLIENT_ADDRESS_PROXIES", 0))
    remote = str(request.META.get("REMOTE_ADDR", ""))
    if proxies <= 0:
        return remote
    forwarded = [part.strip() for part in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",") if part.strip()]
    return forwarded[-proxies] if len(forwarded) >= proxies else remote


def _digest(ident: str) -> str:
    return hashlib.sha256(ident.strip().lower().encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _lock_key(limit: Limit, ident: str) -> str:
    return f"{KEY_PREFIX}:{limit.name}:{_digest(ident)}:lock"


def _ends(moment: float) -> str:
    return datetime.fromtimestamp(moment, tz=UTC).isoformat(timespec="seconds")


def _cache() -> Any:
    return caches["limits"]


def _count(key: str, *, ttl: int) -> int:
    # Redis increments atomically; the file cache of the embedded default reads and writes, so two
    # processes at the same instant may count one hit once — a small slack, never a way around.
    cache = _cache()
    cache.add(key, 0, timeout=ttl)
    try:
        return int(cache.incr(key))
    except ValueError:  # expired between the two calls
        cache.set(key, 1, timeout=ttl)
        return 1


def limit_wait(limit: Limit, ident: str) -> float | None:
    """Seconds until ``ident`` may try again, or None when it may now (logging a lockout that ended)."""
    try:
        until: Any = _cache().get(_lock_key(limit, ident))
    except Exception:  # noqa: BLE001 — a limit protects the service; it must not take it down
        logger.warning("abuse limit %s: the cache is unreachable; let through", limit.name, exc_info=True)
        return None
    if until is None:
        return None
    now = clock()
    if float(until) > now:
        return float(until) - now
    _cache().delete(_lock_key(limit, ident))
    logger.warning("lockout ended: %s %r (locked until %s)", limit.name, ident, _ends(float(until)))
    return None


def limit_hit(limit: Limit, ident: str) -> float | None:
    """Count one hit on ``ident``; the lockout's length when this hit started one, else None."""
    now = clock()
    window = int(now // limit.window)
    key = f"{KEY_PREFIX}:{limit.name}:{_digest(ident)}:{window}"
    try:
        # Counted by the cache itself (Redis: an atomic increment), so parallel tries cannot slip past.
        count = _count(key, ttl=limit.window + 5)
        if count < limit.attempts:
            return None
        until = now + limit.lockout
        _cache().set(_lock_key(limit, ident), until, timeout=limit.lockout + 3600)
        _cache().delete(key)
    except Exception:  # noqa: BLE001
        logger.warning("abuse limit %s: the cache is unreachable; not counted", limit.name, exc_info=True)
        return None
    logger.warning("lockout started: %s %r after %d tries, until %s", limit.name, ident, count, _ends(until))
    return float(limit.lockout)


def limit_clear(limit: Limit, ident: str) -> None:
    """Forget the current window's count (a right password ends a run of wrong ones)."""
    window = int(clock() // limit.window)
    try:
        _cache().delete(f"{KEY_PREFIX}:{limit.name}:{_digest(ident)}:{window}")
    except Exception:  # noqa: BLE001
        logger.warning("abuse limit %s: the cache is unreachable", limit.name, exc_info=True)


# --- sign-in: one place for every path that checks a password (the pages' /login, Django's admin) ---


def login_wait(account: str, address: str) -> float | None:
    """Seconds until a sign-in as ``account`` from ``address`` is heard again, or None."""
    waits = [limit_wait(login_address_limit(), address) if address else None,
             limit_wait(login_account_limit(), account) if account else None]
    return max((w for w in waits if w is not None), default=None)


def login_failed(account: str, address: str) -> None:
    if address:
        limit_hit(login_address_limit(), address)
    if account:
        limit_hit(login_account_limit(), account)


def login_succeeded(account: str) -> None:
    # The account's run of failures ends; the address's does not (one right password of the
    # attacker's own account must not buy more guesses at others').
    if account:
        limit_clear(login_account_limit(), account)
