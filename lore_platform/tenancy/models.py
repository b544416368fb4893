from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models
from django.utils import timezone

from lore_platform.tenancy.scoping import TenantScopedManager


class User(AbstractUser):
    """A person. Which tenants they act in is given by their memberships."""

    email = models.EmailField(unique=True)

    REQUIRED_FIELDS = ["email"]


class Tenant(models.Model):
    """An isolated workspace: a partner app, a Discord server, a team."""

    class Profile(models.TextChoices):
        CLASSIC = "classic", "Classic keyword lorebooks"
        SERVER = "server", "Server (community bot) lorebooks"
        SMART = "smart", "Smart world books"
        SILLYTAVERN = "sillytavern", "SillyTavern World Info"

    name = models.CharField(max_length=120)
    slug = models.SlugField(max_length=64, unique=True)
    default_profile = models.CharField(max_length=16, choices=Profile.choices, default=Profile.CLASSIC)
    # Browser origins ("https://app.example.com") whose pages may call the API with this tenant's
    # keys (CORS, ``lore_platform.tenancy.cors``); validated and normalised by ``services.tenant_cors_set``.
    cors_origins = models.JSONField(default=list, blank=True)
    # Lost updates refused by construction: every PATCH/PUT/DELETE of an editable resource must carry
    # If-Match (428 without it). Off by default: a stale If-Match is refused either way.
    require_if_match = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        MEMBER = "member", "Member"
        # In the server profile, admin is "Manage Server" (S-1).
        ADMIN = "admin", "Admin"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedManager["Membership"]()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "user"], name="membership_unique_user_per_tenant")]


class ApiKey(models.Model):
    """A tenant's key for partner apps. Only a hash of the secret is stored."""

    class Scope(models.TextChoices):
        READ = "read", "Read"
        WRITE = "write", "Write"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=120)
    # Shown in listings so people can tell keys apart; not a secret.
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    # The user the key acts for (ownership of books it creates); optional.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="api_keys"
    )
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = TenantScopedManager["ApiKey"]()

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


class Invitation(models.Model):
    """An admin's offer to join a tenant (S-1). Nobody becomes a member until the email's owner,
    signed in, accepts it; only a hash of the token is stored, the link is shown once."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    role = models.CharField(max_length=16, choices=Membership.Role.choices, default=Membership.Role.MEMBER)
    token_hash = models.CharField(max_length=64, unique=True)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Revoked by an admin, declined by the invitee, or replaced by a newer invitation.
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = TenantScopedManager["Invitation"]()

    def is_pending(self, now: datetime | None = None) -> bool:
        return self.accepted_at is None and self.revoked_at is None and self.expires_at > (now or timezone.now())


class SignupRequest(models.Model):
    """A sign-up waiting for its email to be confirmed: no user exists until the link (mailed to the
    address) is used, so typing someone's email at /signup neither creates nor touches their account."""

    email = models.EmailField()
    # Already hashed by Django's password hasher: the plain password is never stored.
    password = models.CharField(max_length=128)
    tenant_name = models.CharField(max_length=120, blank=True)
    next_path = models.CharField(max_length=300, blank=True)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)


class IdempotencyKey(models.Model):
    """A POST's ``Idempotency-Key`` and the first answer to it, kept 24 h per tenant (issue 27, point 3).

    ``status`` null = the first request is still running (a second one with the key is 409). The
    fingerprint (method, path, body hash) tells a retry (replayed) from a reuse for another request (422).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=2048)
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    body = models.BinaryField(default=b"", blank=True)
    # The answer's headers a client reads (Content-Type, Location, ETag), replayed as they were.
    headers = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(db_index=True)

    objects = TenantScopedManager["IdempotencyKey"]()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "key"], name="idempotency_key_unique_per_tenant")]
