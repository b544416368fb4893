"""Reads for tenancy: resolving who a caller is."""
from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import cache
from django.db.models import Model, OuterRef, QuerySet, Subquery
from django.utils import timezone

from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.keys import key_matches, key_split
from lore_platform.tenancy.models import ApiKey, Invitation, Membership, Tenant, User

M = TypeVar("M", bound=Model)

# last_used_at is informative; writing it on every call would turn each read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def api_key_authenticate(raw_key: str) -> ApiKey | None:
    """The active key matching ``raw_key``, or None. Records when it was last used."""
    parts = key_split(raw_key)
    if parts is None:
        return None
    prefix, secret = parts
    cached = verified_keys.get(prefix)
    if cached is not None:
        if not key_matches(secret, cached.secret_hash):
            return None
        api_key = cached.api_key()
    else:
        loaded = _api_key_load(prefix)
        if loaded is None or not loaded.is_active or not key_matches(secret, loaded.secret_hash):
            return None
        api_key = loaded
        verified_keys.put(prefix, api_key)
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_RESOLUTION:
        if not ApiKey.objects.unscoped().filter(pk=api_key.pk, revoked_at__isnull=True).update(last_used_at=now):
            verified_keys.clear()  # revoked (or deleted) since this process verified it
            return None
        api_key.last_used_at = now
        verified_keys.put(prefix, api_key, expires=cached.expires if cached else None)
    return api_key


def _api_key_load(prefix: str) -> ApiKey | None:
    # Looked up by its public prefix before any tenant is known: the key *is* the tenant.
    role = Membership.objects.unscoped().filter(tenant_id=OuterRef("tenant_id"), user_id=OuterRef("user_id"))
    return (
        ApiKey.objects.unscoped()
        .select_related("tenant", "user")
        .annotate(member_role=Subquery(role.values("role")[:1]))
        .filter(prefix=prefix)
        .first()
    )


def _row(instance: Model) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    names = tuple(f.attname for f in instance._meta.concrete_fields)
    return names, tuple(getattr(instance, name) for name in names)


def _rebuilt(model: type[M], row: tuple[tuple[str, ...], tuple[Any, ...]]) -> M:
    # Fresh instances every request, JSON values copied: no request can change another's.
    values = [copy.deepcopy(v) if isinstance(v, (list, dict)) else v for v in row[1]]
    return model.from_db("default", row[0], values)


@dataclass(frozen=True, kw_only=True)
class _VerifiedKey:
    secret_hash: str
    key_row: tuple[tuple[str, ...], tuple[Any, ...]]
    tenant_row: tuple[tuple[str, ...], tuple[Any, ...]]
    user_row: tuple[tuple[str, ...], tuple[Any, ...]] | None
    member_role: str | None
    expires: float

    def api_key(self) -> ApiKey:
        api_key = _rebuilt(ApiKey, self.key_row)
        api_key.tenant = _rebuilt(Tenant, self.tenant_row)
        api_key.user = _rebuilt(User, self.user_row) if self.user_row else None
        api_key.member_role = self.member_role  # type: ignore[attr-defined]
        return api_key


class VerifiedKeyCache:
    """Keys this process verified in the last few seconds (``API_KEY_CACHE_SECONDS``).

    A partner app calls on every chat turn; reading the key, its tenant, user and
    role from the database each time cost more than the lore engine (measured:
    ~3 ms of a ~35 ms turn). Any change to a key, tenant, user or membership
    empties this process's cache at once; other processes notice within the TTL,
    so a revoked key stops working everywhere within that many seconds.
    """

    def __init__(self) -> None:
        self._keys: dict[str, _VerifiedKey] = {}
        self._lock = threading.Lock()

    def get(self, prefix: str) -> _VerifiedKey | None:
        found = self._keys.get(prefix)
        if found is None or found.expires < time.monotonic():
            return None
        return found

    def put(self, prefix: str, api_key: ApiKey, *, expires: float | None = None) -> None:
        """Remember a key just read from the database (``expires``: keep an earlier read's deadline)."""
        ttl = float(getattr(settings, "API_KEY_CACHE_SECONDS", 0))
        if ttl <= 0:
            return
        entry = _VerifiedKey(
            secret_hash=api_key.secret_hash,
            key_row=_row(api_key),
            tenant_row=_row(api_key.tenant),
            user_row=_row(api_key.user) if api_key.user is not None else None,
            member_role=getattr(api_key, "member_role", None),
            expires=expires if expires is not None else time.monotonic() + ttl,
        )
        with self._lock:
            if len(self._keys) >= 10_000:
                self._keys.clear()  # a bound, not a policy: keys come back on the next call
            self._keys[prefix] = entry

    def clear(self) -> None:
        with self._lock:
            self._keys.clear()


verified_keys = VerifiedKeyCache()


def actor_for_api_key(api_key: ApiKey) -> Actor:
    role: str = Membership.Role.MEMBER
    annotated = getattr(api_key, "member_role", None)
    if annotated is not None:
        role = annotated
    elif api_key.user_id is not None:
        membership = Membership.objects.for_tenant(api_key.tenant).filter(user_id=api_key.user_id).first()
        role = membership.role if membership else Membership.Role.MEMBER
    return Actor(
        tenant=api_key.tenant,
        user=api_key.user,
        role=role,
        api_key=api_key,
        scopes=frozenset(api_key.scopes),
    )


def actor_for_user(user: User, tenant_slug: str | None) -> Actor | None:
    """A signed-in user's actor: the tenant named by slug, or their only tenant."""
    memberships = Membership.objects.unscoped().select_related("tenant").filter(user=user)
    if tenant_slug:
        memberships = memberships.filter(tenant__slug=tenant_slug)
    chosen = list(memberships[:2])
    if len(chosen) != 1:
        return None
    return Actor(tenant=chosen[0].tenant, user=user, role=chosen[0].role)


def user_memberships(user: Any) -> list[Membership]:
    """A signed-in user's own memberships, in every tenant (the workspace switcher: no tenant is chosen yet)."""
    if not getattr(user, "is_authenticated", False):
        return []
    return list(Membership.objects.unscoped().select_related("tenant").filter(user=user)
                .order_by("tenant__name", "tenant_id"))


def tenant_memberships(tenant: Tenant) -> list[Membership]:
    return list(Membership.objects.for_tenant(tenant).select_related("user").order_by("created_at"))


def invitation_by_token_hash(hashed: str, *, lock: bool = False) -> Invitation | None:
    """The invitation a link's token names, whatever its state. Read before any tenant is known:
    the token *is* the invitation (as a key is its tenant)."""
    rows = Invitation.objects.unscoped().select_related("tenant", "invited_by")
    if lock:
        rows = rows.select_for_update(of=("self",))
    return rows.filter(token_hash=hashed).first()


def invitations_pending(tenant: Tenant) -> QuerySet[Invitation]:
    """The tenant's invitations not yet accepted, revoked, declined or expired, newest first."""
    return (
        Invitation.objects.for_tenant(tenant)
        .select_related("invited_by")
        .filter(accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now())
        .order_by("-created_at", "-id")
    )


# --- browser origins (CORS) -------------------------------------------------
CORS_ANY_TENANT_KEY = "tenancy:cors-origins-any-tenant"


def cors_origins_any_tenant() -> frozenset[str]:
    """Every origin some tenant allows: a preflight carries no key, so it is answered for these.

    Kept in the shared cache (forgotten on every change; ``API_KEY_CACHE_SECONDS`` bounds how long a
    process-local cache may keep it), because every preflight and cross-origin call asks.
    """
    found = cache.get(CORS_ANY_TENANT_KEY)
    if found is None:
        # Across tenants on purpose: the union of origins is the only thing read, never a tenant's data.
        lists = Tenant.objects.values_list("cors_origins", flat=True)
        found = frozenset(origin for origins in lists if origins for origin in origins)
        cache.set(CORS_ANY_TENANT_KEY, found, timeout=max(1, int(getattr(settings, "API_KEY_CACHE_SECONDS", 10))))
    return frozenset(found)


def cors_origins_forget() -> None:
    cache.delete(CORS_ANY_TENANT_KEY)


def tenant_cors_origins(tenant: Tenant) -> list[str]:
    return list(tenant.cors_origins or [])


def idempotency_keys_prune(now: Any = None, batch: int = 5000) -> int:
    """Forget every tenant's expired ``Idempotency-Key`` answers (beat, hourly); returns how many."""
    from lore_platform.tenancy.models import IdempotencyKey

    now = now or timezone.now()
    removed = 0
    while True:
        ids = list(IdempotencyKey.objects.unscoped().filter(expires_at__lte=now).values_list("pk", flat=True)[:batch])
        if not ids:
            return removed
        removed += IdempotencyKey.objects.unscoped().filter(pk__in=ids).delete()[0]
