from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from books.models import Lineage
from cast.fields import CompressedJSONField
from lore_platform.tenancy.models import Tenant
from lore_platform.tenancy.scoping import TenantScopedManager


class Character(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="characters")
    name = models.CharField(max_length=120)
    lineage = models.ForeignKey(Lineage, on_delete=models.PROTECT, related_name="characters")
    # Who made it: they (or a tenant admin) may delete it; null (made before this was kept, or
    # restored from a backup): admins only.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedManager["Character"]()


class Story(models.Model):
    """A story with a cast of characters; its own books merge with the cast's (W-8)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="stories")
    title = models.CharField(max_length=120)
    cast = models.ManyToManyField(Character, blank=True, related_name="stories")
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedManager["Story"]()


class Novel(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="novels")
    title = models.CharField(max_length=120)
    cast = models.ManyToManyField(Character, blank=True, related_name="novels")
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedManager["Novel"]()


class Attachment(models.Model):
    """A book attached to what owns the world: a character, story, novel or the tenant.

    With no character, story or novel the book is server-wide (applies to every
    chat of the tenant). The book may belong to another tenant when it is public
    or unlisted (W-9); ``inactive_reason`` says why it stopped being injected.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="attachments")
    book = models.ForeignKey("books.Book", on_delete=models.CASCADE, related_name="attachments")
    character = models.ForeignKey(
        Character, null=True, blank=True, on_delete=models.CASCADE, related_name="attachments"
    )
    story = models.ForeignKey(Story, null=True, blank=True, on_delete=models.CASCADE, related_name="attachments")
    novel = models.ForeignKey(Novel, null=True, blank=True, on_delete=models.CASCADE, related_name="attachments")
    position = models.PositiveIntegerField(default=0)
    # Another tenant's book attached through its unlisted link: the token used. Once the
    # owner rotates the link the attachment stops (P-1); blank: attached by id.
    link_token = models.CharField(max_length=64, blank=True, default="")
    # Who attached it: they, the book's owner or a tenant admin may detach it (null: made before
    # this was kept).
    attached_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedManager["Attachment"]()

    class Meta:
        ordering = ["position", "id"]
        constraints = [
            models.CheckConstraint(
                name="attachment_one_target",
                condition=(
                    models.Q(character__isnull=True, story__isnull=True, novel__isnull=True)
                    | models.Q(character__isnull=False, story__isnull=True, novel__isnull=True)
                    | models.Q(character__isnull=True, story__isnull=False, novel__isnull=True)
                    | models.Q(character__isnull=True, story__isnull=True, novel__isnull=False)
                ),
            ),
        ]

    @property
    def target_kind(self) -> str:
        if self.character_id:
            return "character"
        if self.story_id:
            return "story"
        if self.novel_id:
            return "novel"
        return "tenant"


class Chat(models.Model):
    class Kind(models.TextChoices):
        CHARACTER = "character", "One character"
        GROUP = "group", "Group of characters"
        STORY = "story", "Story"
        NOVEL = "novel", "Novel"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="chats")
    # Who plays it: the living world writes only from the book owner's own chats (L-1).
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="chats"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.CHARACTER)
    character = models.ForeignKey(Character, null=True, blank=True, on_delete=models.SET_NULL, related_name="chats")
    members = models.ManyToManyField(Character, blank=True, related_name="group_chats")
    story = models.ForeignKey(Story, null=True, blank=True, on_delete=models.SET_NULL, related_name="chats")
    novel = models.ForeignKey(Novel, null=True, blank=True, on_delete=models.SET_NULL, related_name="chats")
    # Server profile: where the bot speaks; a thread names its parent channel (S-11).
    channel_id = models.CharField(max_length=64, blank=True, default="")
    parent_channel_id = models.CharField(max_length=64, blank=True, default="")
    # Null = the tenant's default profile.
    profile = models.CharField(max_length=16, blank=True, default="")
    model_id = models.CharField(max_length=120, blank=True, default="")
    # Engine state that lives across turns (keep, once-matched, sticky/cooldown/delay).
    timed_state = models.JSONField(default=dict, blank=True)
    turns = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedManager["Chat"]()


class RequestLog(models.Model):
    """Which entries entered one context request, and why others did not (C-15)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="request_logs")
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="request_logs")
    turn = models.PositiveIntegerField()
    profile = models.CharField(max_length=16)
    model_id = models.CharField(max_length=120, blank=True, default="")
    # What the turn injected and why others were left out; stored compressed (see fields.py).
    injections = CompressedJSONField(default=list)
    world_index = CompressedJSONField(default=list)
    log = CompressedJSONField(default=list)
    # C-15: the log kept as the turn answered it: "full" lists every entry, "compact"
    # counts the not-matched ones here. Null counts: a log stored before they were kept.
    log_detail = models.CharField(max_length=8, default="compact")
    entries_considered = models.PositiveIntegerField(null=True, blank=True)
    not_matched = models.PositiveIntegerField(null=True, blank=True)
    # Usage counts (W-11) are applied after the response, once: {tenant id: [entry ids]}.
    usage = models.JSONField(default=dict, blank=True)
    # Null while usage waits for the sweep; set at once when the turn injected nothing.
    usage_recorded_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedManager["RequestLog"]()

    class Meta:
        ordering = ["-turn", "-id"]
        indexes = [
            models.Index(fields=["chat", "turn"], name="requestlog_chat_turn"),
            # The usage sweep reads only the few logs still waiting.
            models.Index(fields=["id"], name="requestlog_usage_pending",
                         condition=models.Q(usage_recorded_at__isnull=True)),
        ]
