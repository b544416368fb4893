"""Writes for tenants, users, memberships and API keys."""
from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from lore_platform.errors import Conflict, DomainError, NotFound, ValidationFailed
from lore_platform.tenancy.keys import key_generate, key_hash
from lore_platform.tenancy.models import ApiKey, Membership, Tenant, User
from lore_platform.tenancy.selectors import cors_origins_forget

VALID_SCOPES = {ApiKey.Scope.READ.value, ApiKey.Scope.WRITE.value}


@dataclass(frozen=True, kw_only=True)
class IssuedKey:
    """An API key as created: ``secret`` is shown once and never stored."""

    api_key: ApiKey
    secret: str


def _unique_slug(name: str) -> str:
    base = slugify(name)[:50] or "tenant"
    slug, n = base, 1
    while Tenant.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return slug


def user_get_or_create(*, email: str, password: str | None = None) -> User:
    email = email.strip().lower()
    if "@" not in email:
        raise ValidationFailed("Enter a valid email address.", field="email")
    user = User.objects.filter(email=email).first()
    if user is None:
        user = User(username=email, email=email)
        if password:
            user.set_password(password)
        else:
            user.set_unusable_password()
        user.save()
    return user


def membership_set(*, tenant: Tenant, user: User, role: str) -> Membership:
    if role not in Membership.Role.values:
        raise ValidationFailed("Unknown role {role}.", values={"role": repr(role)}, field="role")
    membership, _ = Membership.objects.for_tenant(tenant).update_or_create(
        tenant=tenant, user=user, defaults={"role": role}
    )
    return membership


def _admins_left(tenant: Tenant, *, without: Membership) -> bool:
    return Membership.objects.for_tenant(tenant).filter(role=Membership.Role.ADMIN).exclude(pk=without.pk).exists()


def _membership_get(tenant: Tenant, membership_id: int) -> Membership:
    membership = Membership.objects.for_tenant(tenant).select_related("user").filter(pk=membership_id).first()
    if membership is None:
        raise NotFound("No such member.", field="id")
    return membership


@transaction.atomic
def member_add(*, tenant: Tenant, email: str, role: str = Membership.Role.MEMBER) -> Membership:
    """Add a person (by email; the user is created if new) to the tenant with a role (S-1)."""
    if role not in Membership.Role.values:
        raise ValidationFailed("Unknown role {role}.", values={"role": repr(role)}, field="role")
    user = user_get_or_create(email=email)
    if Membership.objects.for_tenant(tenant).filter(user=user).exists():
        raise Conflict("{email} is a member already; change the role instead.", values={"email": user.email},
                       field="email")
    return Membership.objects.create(tenant=tenant, user=user, role=role)


@transaction.atomic
def member_role_change(*, tenant: Tenant, membership_id: int, role: str | None) -> Membership:
    """Set a member's role; ``None`` (a PATCH that names no role) changes nothing."""
    if role is not None and role not in Membership.Role.values:
        raise ValidationFailed("Unknown role {role}.", values={"role": repr(role)}, field="role")
    membership = _membership_get(tenant, membership_id)
    if role is None:
        return membership
    # A tenant with no admin could never add one again (only admins manage members).
    if membership.role == Membership.Role.ADMIN and role != membership.role and not _admins_left(
        tenant, without=membership
    ):
        raise Conflict("The last admin cannot stop being one; make another member admin first.", field="role",
                       rule="S-1")
    if membership.role != role:
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


@transaction.atomic
def member_remove(*, tenant: Tenant, membership_id: int) -> None:
    """Remove a member; their API keys in this tenant are revoked with them."""
    membership = _membership_get(tenant, membership_id)
    if membership.role == Membership.Role.ADMIN and not _admins_left(tenant, without=membership):
        raise Conflict("The last admin cannot be removed.", field="id", rule="S-1")
    # A key whose user has no membership would otherwise still act (as a member).
    ApiKey.objects.for_tenant(tenant).filter(user=membership.user, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    membership.delete()


def member_api_key_create(*, tenant: Tenant, membership_id: int, name: str, scopes: list[str]) -> IssuedKey:
    """A key that acts as the member, with the member's role (never the admin's who made it)."""
    membership = _membership_get(tenant, membership_id)
    return api_key_create(tenant=tenant, name=name, scopes=scopes, user=membership.user)


def api_key_create(*, tenant: Tenant, name: str, scopes: list[str], user: User | None = None) -> IssuedKey:
    unknown = set(scopes) - VALID_SCOPES
    if not scopes or unknown:
        raise ValidationFailed("Scopes must be among {scopes}.", values={"scopes": sorted(VALID_SCOPES)},
                               field="scopes")
    # Write implies read: a key that may change lore may also see it.
    normalised = sorted(set(scopes) | ({"read"} if "write" in scopes else set()))
    generated = key_generate()
    api_key = ApiKey.objects.create(
        tenant=tenant,
        name=name[:120],
        prefix=generated.prefix,
        secret_hash=key_hash(generated.secret),
        scopes=normalised,
        user=user,
    )
    return IssuedKey(api_key=api_key, secret=generated.full)


def api_key_revoke(*, tenant: Tenant, key_id: int) -> ApiKey:
    api_key = ApiKey.objects.for_tenant(tenant).filter(pk=key_id).first()
    if api_key is None:
        raise NotFound("No such API key.", field="id")
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key


@dataclass(frozen=True, kw_only=True)
class CreatedTenant:
    tenant: Tenant
    admin: User
    key: IssuedKey


@transaction.atomic
def tenant_create(*, name: str, admin_email: str, profile: str = Tenant.Profile.CLASSIC) -> CreatedTenant:
    name = name.strip()
    if not name or len(name) > 120:
        raise ValidationFailed("A tenant name is 1–120 characters.", field="name")
    if profile not in Tenant.Profile.values:
        raise ValidationFailed("Unknown profile {profile}.", values={"profile": repr(profile)}, field="default_profile")
    if Tenant.objects.filter(name=name).exists():
        raise Conflict("A tenant named {name} exists already.", values={"name": repr(name)}, field="name")
    tenant = Tenant.objects.create(name=name, slug=_unique_slug(name), default_profile=profile)
    admin = user_get_or_create(email=admin_email)
    membership_set(tenant=tenant, user=admin, role=Membership.Role.ADMIN)
    key = api_key_create(tenant=tenant, name=f"{name} admin key", scopes=["read", "write"], user=admin)
    return CreatedTenant(tenant=tenant, admin=admin, key=key)


# --- browser origins (CORS, P-6) ------------------------------------------------
CORS_ORIGINS_MAX = 50
CORS_ORIGIN_MAX_CHARS = 200
_DEFAULT_PORTS = {"http": 80, "https": 443}
# A DNS name (letters, digits, hyphens, dots: browsers send IDNs in their punycode form) or an IPv6 literal.
_HOST = re.compile(r"^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$|^\[[0-9a-f:.]+\]$")


class OriginRefused(DomainError):
    """An allowed origin that is not a browser origin (``scheme://host[:port]``); nothing was saved."""

    status = 422
    code = "invalid_origin"


def origin_normalise(raw: object, *, field: str) -> str:
    """``raw`` as a browser sends it in ``Origin``: lower-case scheme and host, no default port.

    Only an exact origin is accepted: a path, query, user name or wildcard would suggest a
    narrower or wider match than the browser's, which compares the whole origin.
    """
    if not isinstance(raw, str):
        raise OriginRefused("An origin is a string like https://app.example.com.", field=field, rule="P-6")
    value = raw.strip()
    if value == "*" or "*" in value:
        raise OriginRefused(
            "Wildcards are not allowed: name each origin (the public library is open to every origin already).",
            field=field, rule="P-6",
        )
    if not value or len(value) > CORS_ORIGIN_MAX_CHARS:
        raise OriginRefused("An origin is 1–{max} characters.", values={"max": CORS_ORIGIN_MAX_CHARS},
                            field=field, rule="P-6")
    try:
        url = urlsplit(value)
        port = url.port
    except ValueError:
        url, port = None, None
    if url is None or url.scheme.lower() not in _DEFAULT_PORTS or not url.hostname:
        raise OriginRefused("{origin} is not an origin: write scheme://host[:port], e.g. https://app.example.com.",
                            values={"origin": repr(value)}, field=field, rule="P-6")
    if url.username is not None or url.password is not None or url.path not in ("", "/") or url.query \
            or url.fragment or value.endswith(("?", "#")):
        raise OriginRefused("{origin} has more than scheme://host[:port]; an origin has no path, query or user.",
                            values={"origin": repr(value)}, field=field, rule="P-6")
    host = url.hostname.lower()
    bracketed = f"[{host}]" if ":" in host else host
    if not _HOST.match(bracketed):
        raise OriginRefused("{origin} has no valid host name.", values={"origin": repr(value)}, field=field,
                            rule="P-6")
    scheme = url.scheme.lower()
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{bracketed}"
    return f"{scheme}://{bracketed}:{port}"


@transaction.atomic
def tenant_cors_set(*, tenant: Tenant, origins: object) -> list[str]:
    """Replace the browser origins allowed to call the API with this tenant's keys (all or nothing)."""
    if not isinstance(origins, list):
        raise OriginRefused("origins is a list of origins.", field="origins", rule="P-6")
    if len(origins) > CORS_ORIGINS_MAX:
        raise OriginRefused("At most {max} origins.", values={"max": CORS_ORIGINS_MAX}, field="origins", rule="P-6")
    normalised: list[str] = []
    for index, raw in enumerate(origins):
        origin = origin_normalise(raw, field=f"origins[{index}]")
        if origin not in normalised:
            normalised.append(origin)
    locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
    locked.cors_origins = normalised
    locked.save(update_fields=["cors_origins"])
    tenant.cors_origins = normalised
    # Preflights are answered from every tenant's origins (``selectors.cors_origins_any_tenant``):
    # forgotten now for this request's next read, and again once committed (a read in between
    # could have cached the old list).
    cors_origins_forget()
    transaction.on_commit(cors_origins_forget)
    return normalised
