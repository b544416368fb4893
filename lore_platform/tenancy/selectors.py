"""Reads for tenancy: resolving who a caller is."""
from __future__ import annotations

from datetime import timedelta

from django.db.models import OuterRef, Subquery
from django.utils import timezone

from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.keys import key_matches, key_split
from lore_platform.tenancy.models import ApiKey, Membership, Tenant, User

# last_used_at is informative; writing it on every call would turn each read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def api_key_authenticate(raw_key: str) -> ApiKey | None:
    """The active key matching ``raw_key``, or None. Records when it was last used."""
    parts = key_split(raw_key)
    if parts is None:
        return None
    prefix, secret = parts
    # Looked up by its public prefix before any tenant is known: the key *is* the tenant.
    role = Membership.objects.unscoped().filter(tenant_id=OuterRef("tenant_id"), user_id=OuterRef("user_id"))
    api_key = (
        ApiKey.objects.unscoped()
        .select_related("tenant", "user")
        .annotate(member_role=Subquery(role.values("role")[:1]))
        .filter(prefix=prefix)
        .first()
    )
    if api_key is None or not api_key.is_active or not key_matches(secret, api_key.secret_hash):
        return None
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.unscoped().filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
    return api_key


def actor_for_api_key(api_key: ApiKey) -> Actor:
    role = Membership.Role.MEMBER
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


def tenant_memberships(tenant: Tenant) -> list[Membership]:
    return list(Membership.objects.for_tenant(tenant).select_related("user").order_by("created_at"))
