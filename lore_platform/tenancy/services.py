"""Writes for tenants, users, memberships, invitations, sign-ups and API keys.

Nobody is put into a tenant, and no password is set on an account, by anyone but the person
who owns the email (issue 26): a tenant admin *invites* (``invitation_create``), the invitee
accepts while signed in as that email's owner (``invitation_accept``); a sign-up only asks
for a confirmation link mailed to the address (``signup_request``) and the account exists
once it is used (``signup_confirm``). ``member_add_as_operator`` is the operator's command only.
"""
from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.text import slugify

from lore_platform.errors import Conflict, DomainError, NotFound, PermissionDenied, TooManyAttempts, ValidationFailed
from lore_platform.etags import content_version, version_check
from lore_platform.tenancy import limits
from lore_platform.tenancy.keys import key_generate, key_hash
from lore_platform.tenancy.models import ApiKey, Invitation, Membership, SignupRequest, Tenant, User
from lore_platform.tenancy.selectors import cors_origins_forget, invitation_by_token_hash

logger = logging.getLogger("loreweave.security")

# Builds the absolute link a token is mailed in (the caller knows the host it is served on).
LinkFor = Callable[[str], str]

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
def member_add_as_operator(*, tenant: Tenant, email: str, role: str = Membership.Role.MEMBER) -> Membership:
    """The operator's command only (``tenant_member_add``): add a person at once, creating a user
    without a password if new. Never reachable by a tenant admin — they invite (``invitation_create``)."""
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
def tenant_create(*, name: str, admin_email: str = "", profile: str = Tenant.Profile.CLASSIC,
                  admin: User | None = None) -> CreatedTenant:
    """A tenant with its first admin: ``admin`` (a signed-in person), else the user of ``admin_email``
    (the operator's command; created without a password if new)."""
    name = name.strip()
    if not name or len(name) > 120:
        raise ValidationFailed("A tenant name is 1–120 characters.", field="name")
    if profile not in Tenant.Profile.values:
        raise ValidationFailed("Unknown profile {profile}.", values={"profile": repr(profile)}, field="default_profile")
    if Tenant.objects.filter(name=name).exists():
        raise Conflict("A tenant named {name} exists already.", values={"name": repr(name)}, field="name")
    tenant = Tenant.objects.create(name=name, slug=_unique_slug(name), default_profile=profile)
    if admin is None:
        admin = user_get_or_create(email=admin_email)
    membership_set(tenant=tenant, user=admin, role=Membership.Role.ADMIN)
    key = api_key_create(tenant=tenant, name=f"{name} admin key", scopes=["read", "write"], user=admin)
    return CreatedTenant(tenant=tenant, admin=admin, key=key)


# --- invitations (issue 26: joining a tenant takes the invitee's consent) -----------------------


def email_normalise(email: str, *, field: str = "email") -> str:
    email = email.strip().lower()
    try:
        validate_email(email)
    except ValidationError:
        raise ValidationFailed("Enter a valid email address.", field=field) from None
    return email


def token_hash(token: str) -> str:
    # The token has 256 random bits: a fast hash is enough (as for API keys).
    return key_hash(token)


def _mail(*, to: str, subject: str, body: str) -> None:
    """Sent after the transaction commits; a mail server that fails is logged, never a failed request
    (the admin has the invitation link; a sign-up can ask again)."""

    def send() -> None:
        try:
            send_mail(subject, body, None, [to])
        except Exception:  # noqa: BLE001
            logger.warning("mail to %s not sent (%s)", to, subject, exc_info=True)

    transaction.on_commit(send)


@dataclass(frozen=True, kw_only=True)
class IssuedInvitation:
    """An invitation as created: ``token`` (and the link made of it) is shown once, never stored."""

    invitation: Invitation
    token: str
    link: str | None


@transaction.atomic
def invitation_create(*, tenant: Tenant, email: str, role: str = Membership.Role.MEMBER,
                      invited_by: User | None = None, link_for: LinkFor | None = None) -> IssuedInvitation:
    """Invite ``email`` to the tenant with ``role`` (S-1): nobody is added and no user is created
    until the email's owner accepts. A newer invitation to the same email replaces a pending one."""
    if role not in Membership.Role.values:
        raise ValidationFailed("Unknown role {role}.", values={"role": repr(role)}, field="role")
    email = email_normalise(email)
    if Membership.objects.for_tenant(tenant).filter(user__email__iexact=email).exists():
        raise Conflict("{email} is a member already; change the role instead.", values={"email": email},
                       field="email")
    # Each invitation mails an address the admin chose: a tenant cannot turn the server into a mailer.
    ident = f"tenant-{tenant.pk}"
    wait = limits.limit_wait(limits.invitation_tenant_limit(), ident)
    if wait is not None:
        raise TooManyAttempts("This workspace sent too many invitations today; try again in {hours} hours.",
                              values={"hours": max(1, int(wait + 3599) // 3600)}, retry_after=wait, field="email")
    limits.limit_hit(limits.invitation_tenant_limit(), ident)
    now = timezone.now()
    Invitation.objects.for_tenant(tenant).filter(
        email=email, accepted_at__isnull=True, revoked_at__isnull=True
    ).update(revoked_at=now)
    token = secrets.token_urlsafe(32)
    invitation = Invitation.objects.create(
        tenant=tenant, email=email, role=role, token_hash=token_hash(token), invited_by=invited_by,
        created_at=now, expires_at=now + timedelta(days=settings.INVITATION_DAYS),
    )
    link = link_for(token) if link_for else None
    if link:
        inviter = invited_by.email if invited_by is not None else "An admin"
        _mail(to=email, subject=f"You are invited to {tenant.name} on Loreweave", body=(
            f"{inviter} invited you to join the workspace {tenant.name} on Loreweave as {role}.\n\n"
            f"To accept, open this link and sign in (or create an account) as {email}:\n{link}\n\n"
            f"The link works once, until {invitation.expires_at:%Y-%m-%d %H:%M} UTC. "
            "If you did not expect it, ignore this message: nothing happens unless you accept."
        ))
    logger.info("invitation %s: %s invited to tenant %s as %s", invitation.pk, email, tenant.slug, role)
    return IssuedInvitation(invitation=invitation, token=token, link=link)


@transaction.atomic
def invitation_revoke(*, tenant: Tenant, invitation_id: int) -> Invitation:
    invitation = Invitation.objects.for_tenant(tenant).select_for_update().filter(pk=invitation_id).first()
    if invitation is None:
        raise NotFound("No such invitation.", field="id")
    if invitation.accepted_at is not None:
        raise Conflict("That invitation was accepted already; remove the member instead.", field="id")
    if invitation.revoked_at is None:
        invitation.revoked_at = timezone.now()
        invitation.save(update_fields=["revoked_at"])
    return invitation


def _invitation_for(token: str, *, lock: bool = False) -> Invitation:
    invitation = invitation_by_token_hash(token_hash(token), lock=lock)
    if invitation is None or not invitation.is_pending():
        raise NotFound("This invitation link is not valid: it was used, revoked or has expired.", field="token")
    return invitation


def invitation_open(*, token: str) -> Invitation:
    """The pending invitation a link names (NotFound for one used, revoked, expired or unknown)."""
    return _invitation_for(token)


def _invitee_check(invitation: Invitation, user: User) -> None:
    if not user.is_authenticated or user.email.strip().lower() != invitation.email:
        raise PermissionDenied("This invitation is for another email address: sign in as its owner to accept it.",
                               field="token")


@transaction.atomic
def invitation_accept(*, token: str, user: User) -> Membership:
    """The invitee, signed in as the invited email's owner, joins with the invitation's role; the link is used."""
    invitation = _invitation_for(token, lock=True)
    _invitee_check(invitation, user)
    tenant = invitation.tenant
    membership = Membership.objects.for_tenant(tenant).filter(user=user).first()
    if membership is None:  # a member already keeps the role they have
        membership = Membership.objects.create(tenant=tenant, user=user, role=invitation.role)
    invitation.accepted_at = timezone.now()
    invitation.accepted_by = user
    invitation.save(update_fields=["accepted_at", "accepted_by"])
    logger.info("invitation %s accepted: %s joined tenant %s", invitation.pk, user.email, tenant.slug)
    return membership


@transaction.atomic
def invitation_decline(*, token: str, user: User) -> Invitation:
    invitation = _invitation_for(token, lock=True)
    _invitee_check(invitation, user)
    invitation.revoked_at = timezone.now()
    invitation.save(update_fields=["revoked_at"])
    return invitation


# --- sign-up by confirmed email (issue 26: no account is created or touched by someone else) ---


def signup_request(*, email: str, password: str, tenant_name: str = "", next_path: str = "",
                   link_for: LinkFor, login_link: str) -> None:
    """Ask for an account: a confirmation link is mailed to ``email``. The caller learns nothing about
    the address — the answer and the work done are the same whether it has an account or not (its
    owner is mailed that someone tried, and how to sign in); no account is created or changed here."""
    email = email_normalise(email)
    tenant_name = tenant_name.strip()
    if len(tenant_name) > 120:
        raise ValidationFailed("A tenant name is 1–120 characters.", field="tenant")
    if tenant_name and Tenant.objects.filter(name=tenant_name).exists():
        raise Conflict("A tenant named {name} exists already.", values={"name": repr(tenant_name)}, field="tenant")
    hashed = make_password(password)  # paid on both paths, so the answer's timing tells nothing either
    if User.objects.filter(email__iexact=email).exists():
        _mail(to=email, subject="Your Loreweave account", body=(
            "Someone (perhaps you) asked to create a Loreweave account with this address. "
            f"You have one already: sign in at\n{login_link}\n\n"
            "Nothing was changed. If it was not you, you can ignore this message."
        ))
        return
    token = secrets.token_urlsafe(32)
    now = timezone.now()
    SignupRequest.objects.create(
        email=email, password=hashed, tenant_name=tenant_name, next_path=next_path[:300],
        token_hash=token_hash(token), created_at=now, expires_at=now + timedelta(hours=settings.SIGNUP_CONFIRM_HOURS),
    )
    _mail(to=email, subject="Confirm your Loreweave account", body=(
        f"To finish creating your Loreweave account, open this link:\n{link_for(token)}\n\n"
        f"It works once, for {settings.SIGNUP_CONFIRM_HOURS} hours. If you did not ask for an account, ignore it."
    ))


def signup_open(*, token: str) -> SignupRequest:
    request = SignupRequest.objects.filter(token_hash=token_hash(token)).first()
    if request is None or request.used_at is not None or request.expires_at <= timezone.now():
        raise NotFound("This confirmation link is not valid: it was used or has expired. Sign up again.",
                       field="token")
    return request


@dataclass(frozen=True, kw_only=True)
class ConfirmedSignup:
    user: User
    tenant: Tenant | None
    next_path: str


@transaction.atomic
def signup_confirm(*, token: str) -> ConfirmedSignup:
    """Use a confirmation link: the account (with the password chosen at sign-up) and, if one was
    named, its workspace are created. The link proves the email's owner asked; it works once."""
    found = signup_open(token=token)
    request = SignupRequest.objects.select_for_update().get(pk=found.pk)
    if request.used_at is not None:
        raise NotFound("This confirmation link is not valid: it was used or has expired. Sign up again.",
                       field="token")
    request.used_at = timezone.now()
    request.save(update_fields=["used_at"])
    if User.objects.filter(Q(email__iexact=request.email) | Q(username__iexact=request.email)).exists():
        # Two sign-ups for one address: the first link used made the account; this one changes nothing.
        raise Conflict("This email has an account already: sign in.", field="email")
    user = User(username=request.email, email=request.email, password=request.password)
    user.save()
    tenant = None
    if request.tenant_name and not Tenant.objects.filter(name=request.tenant_name).exists():
        tenant = tenant_create(name=request.tenant_name, admin=user, profile=Tenant.Profile.SMART).tenant
    return ConfirmedSignup(user=user, tenant=tenant, next_path=request.next_path)


def workspace_create(*, user: User, name: str) -> Tenant:
    """A signed-in person's new workspace, with them as its admin."""
    return tenant_create(name=name, admin=user, profile=Tenant.Profile.SMART).tenant


# --- password reset (issue 26: the answer says nothing about whether the address has an account) ---


def password_reset_request(*, email: str, link_for: Callable[[User], str], signup_link: str) -> None:
    """Mail ``email`` a link that sets a new password — to the account's owner only, so it is the
    way an account made without a password (the operator's command) gets one by proving the address.
    An address with no account is mailed that there is none: the caller's answer and the work done
    are the same either way. The link (Django's token: it expires after ``PASSWORD_RESET_TIMEOUT`` and
    stops working once the password changes or the owner signs in) is never shown to the caller."""
    email = email_normalise(email)
    user = User.objects.filter(email__iexact=email, is_active=True).first()
    if user is None:
        _mail(to=email, subject="Loreweave password reset", body=(
            "Someone (perhaps you) asked to reset the Loreweave password of this address, but it has no account. "
            f"To create one, sign up at\n{signup_link}\n\nIf it was not you, you can ignore this message."
        ))
        return
    _mail(to=email, subject="Loreweave password reset", body=(
        f"To choose a new Loreweave password, open this link:\n{link_for(user)}\n\n"
        "It works once, for a limited time. If you did not ask for it, ignore this message: nothing changes."
    ))


def tenant_default_profile_set(*, tenant: Tenant, profile: str) -> Tenant:
    """The profile a chat with none of its own uses (a restore into a fresh tenant brings it back)."""
    if profile not in Tenant.Profile.values:
        raise ValidationFailed("Unknown profile {profile}.", values={"profile": repr(profile)}, field="default_profile")
    tenant.default_profile = profile
    tenant.save(update_fields=["default_profile"])  # post_save: processes forget keys holding the old row
    return tenant


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
def tenant_cors_set(*, tenant: Tenant, origins: object, expected_version: object | None = None) -> list[str]:
    """Replace the browser origins allowed to call the API with this tenant's keys (all or nothing).

    ``expected_version`` (``content_version`` of the list the caller read) is compared under the lock."""
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
    version_check("cors", tenant.pk, content_version(locked.cors_origins), expected_version)
    locked.cors_origins = normalised
    locked.save(update_fields=["cors_origins"])
    tenant.cors_origins = normalised
    # Preflights are answered from every tenant's origins (``selectors.cors_origins_any_tenant``):
    # forgotten now for this request's next read, and again once committed (a read in between
    # could have cached the old list).
    cors_origins_forget()
    transaction.on_commit(cors_origins_forget)
    return normalised


@transaction.atomic
def tenant_preconditions_set(*, tenant: Tenant, require_if_match: object,
                             expected_version: object | None = None) -> bool:
    """Whether every PATCH/PUT/DELETE of an editable resource must carry If-Match (428 without it)."""
    if not isinstance(require_if_match, bool):
        raise ValidationFailed("require_if_match is true or false.", field="require_if_match")
    locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
    version_check("preconditions", tenant.pk, content_version(locked.require_if_match), expected_version)
    locked.require_if_match = require_if_match
    locked.save(update_fields=["require_if_match"])  # a save: the verified-key cache forgets the tenant
    tenant.require_if_match = require_if_match
    return require_if_match
