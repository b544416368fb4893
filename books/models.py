"""Books of lore entries: the data every context profile reads its own way."""
from __future__ import annotations

import hashlib
import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_noop

# ENTRY_LORE_FIELDS is re-exported here for the modules that read it with the models.
from books.fields import ENTRY_LORE_FIELDS, entry_model_default  # noqa: F401
from lore_platform.tenancy.models import Tenant
from lore_platform.tenancy.scoping import TenantScopedManager


class Lineage(models.Model):
    """What a character's lore belongs to (S-2).

    A character deleted and imported again finds its lineage by ``key`` (the
    card's stable identity), so its persona book keeps applying. Characters
    sharing a lineage share one book.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="lineages")
    key = models.CharField(max_length=200, help_text="Stable identity, e.g. the card's name + creator")
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedManager["Lineage"]()

    class Meta:
        # Created by the cast app before lineages moved here, with the books they own.
        db_table = "cast_lineage"
        constraints = [models.UniqueConstraint(fields=["tenant", "key"], name="lineage_unique_key_per_tenant")]


class Profile(models.TextChoices):
    """The context profile a book is written for; it decides the book's limits."""

    CLASSIC = "classic", "Classic keyword lorebook"
    SERVER = "server", "Server lorebook"
    SMART = "smart", "World book"
    SILLYTAVERN = "sillytavern", "SillyTavern World Info"


# The profiles whose entries are embedded for meaning search (W-4, W-7): every one, because a
# chat picks the profile and reads every attached book its way, so any book may meet a smart
# turn. Indexed after creation or import, its first smart turn embeds only the messages.
INDEXED_PROFILES = frozenset(Profile.values)


class Visibility(models.TextChoices):
    PRIVATE = "private", "Private"
    UNLISTED = "unlisted", "Unlisted"
    PUBLIC = "public", "Public"


class Scope(models.TextChoices):
    """Server profile scopes (S-2): who owns the lore, not where it may appear."""

    PERSONAL = "personal", "Owned by a user"
    SERVER = "server", "Server-wide collection"
    PERSONA = "persona", "Persona lineage book"


class LiveBookManager(TenantScopedManager["Book"]):
    """Books that are not in the trash: every read of books starts here (lists, library, turns).

    A trashed book is kept for :data:`books.limits.TRASH_KEEP_DAYS` days, restorable, but is
    gone for everything else; only the trash services read it, through ``Book.with_trashed``.
    """

    def get_queryset(self) -> Any:
        return super().get_queryset().filter(trashed_at__isnull=True)


class Book(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="books")
    # Null owner = the tenant owns it (server-wide collections, S-1).
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="books"
    )
    profile = models.CharField(max_length=16, choices=Profile.choices, default=Profile.CLASSIC)
    scope = models.CharField(max_length=16, choices=Scope.choices, default=Scope.PERSONAL)
    lineage = models.ForeignKey(Lineage, null=True, blank=True, on_delete=models.PROTECT, related_name="books")

    title = models.CharField(max_length=120)
    description = models.TextField(blank=True, default="")
    tags = models.JSONField(default=list, blank=True)
    language = models.CharField(max_length=16, blank=True, default="en")
    visibility = models.CharField(max_length=16, choices=Visibility.choices, default=Visibility.PRIVATE)

    # Collection toggle (S-12): removes every entry from prompts, keeps their own flags.
    active = models.BooleanField(default=True)
    # Collection-level channel restriction for server-wide books (S-11); empty = all.
    channels = models.JSONField(default=list, blank=True)

    # Scan settings (C-2, C-3, C-4); null = the profile's default.
    scan_depth = models.PositiveSmallIntegerField(null=True, blank=True)
    token_budget = models.PositiveIntegerField(null=True, blank=True)
    recursive = models.BooleanField(default=False)
    case_sensitive = models.BooleanField(default=False)
    whole_words = models.BooleanField(default=True)

    living_world = models.BooleanField(default=False)
    # L-4 (beyond the seed): the model's writes wait for the owner's approval instead of applying.
    living_world_review = models.BooleanField(default=False)
    # Bumped on every change to the book or its entries; compiled matchers and caches key on it.
    version = models.PositiveIntegerField(default=1)
    # Book-level fields from imports that we do not model (lossless export).
    extra = models.JSONField(default=dict, blank=True)

    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    # Set when the book is moved to the trash (restorable until it is purged); null = live.
    trashed_at = models.DateTimeField(null=True, blank=True)

    # The first manager is the default one (reverse relations such as ``tenant.books`` use it).
    objects = LiveBookManager()
    with_trashed = TenantScopedManager["Book"]()

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "owner"]),
            models.Index(fields=["visibility"]),
            models.Index(fields=["tenant", "trashed_at"], name="book_trash_idx"),
        ]
        constraints = [
            # Characters sharing a lineage share one persona book (S-2).
            models.UniqueConstraint(
                fields=["tenant", "lineage"],
                condition=models.Q(lineage__isnull=False),
                name="book_one_per_lineage",
            ),
            # A persona book always names its lineage; other scopes never do.
            models.CheckConstraint(
                name="book_lineage_iff_persona",
                condition=(
                    models.Q(scope="persona", lineage__isnull=False)
                    | (~models.Q(scope="persona") & models.Q(lineage__isnull=True))
                ),
            ),
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def is_tenant_owned(self) -> bool:
        return self.owner_id is None


class SecondaryLogic(models.TextChoices):
    AND_ANY = "and_any", "Any secondary key (OR)"
    AND_ALL = "and_all", "All secondary keys (AND)"
    NOT_ANY = "not_any", "No secondary key (NOR)"
    NOT_ALL = "not_all", "Not all secondary keys (NAND)"


class Role(models.TextChoices):
    SYSTEM = "system", "System"
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"


class Placement(models.TextChoices):
    BEFORE_PERSONA = "before_persona", "Before persona"
    AFTER_PERSONA = "after_persona", "After persona"


class IndexingState(models.TextChoices):
    PENDING = "pending", "Indexing for smart retrieval…"
    INDEXED = "indexed", "Indexed"
    FAILED = "failed", "Indexing failed"
    # W-6: a disabled entry has no vector on purpose; enabling it makes it pending again.
    DISABLED = "disabled", "Not indexed: disabled"


def content_hash(title: str, content: str, keys: list[str]) -> str:
    """What the embedding depends on; re-index only when it changes."""
    digest = hashlib.sha256()
    for part in (title, content, "\x1f".join(keys)):
        digest.update(part.encode("utf-8"))
        digest.update(b"\x1e")
    return digest.hexdigest()


class Entry(models.Model):
    """One piece of lore. A superset of fields; each profile reads its own."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="entries")
    book = models.ForeignKey(Book, on_delete=models.CASCADE, related_name="entries")

    # Display name / comment in classic: sorts the editor, never sent to the model (C-9).
    title = models.CharField(max_length=200, blank=True, default=entry_model_default("title"))
    content = models.TextField(blank=True, default=entry_model_default("content"))
    # Trigger keys; in smart they are aliases.
    keys = models.JSONField(default=entry_model_default("keys"), blank=True)
    secondary_keys = models.JSONField(default=entry_model_default("secondary_keys"), blank=True)
    secondary_logic = models.CharField(
        max_length=8, choices=SecondaryLogic.choices, default=entry_model_default("secondary_logic")
    )
    selective = models.BooleanField(default=entry_model_default("selective"))
    # K-1: boolean key logic; when set it decides activation instead of keys + secondary logic.
    key_expression = models.TextField(blank=True, default=entry_model_default("key_expression"))

    # Constant in classic/server; canon in smart.
    constant = models.BooleanField(default=entry_model_default("constant"))
    enabled = models.BooleanField(default=entry_model_default("enabled"))
    order = models.IntegerField(default=entry_model_default("order"))
    # Default 10, like the engine, SillyTavern-less imports and Chub's exports (books.fields says why).
    priority = models.IntegerField(default=entry_model_default("priority"))
    probability = models.PositiveSmallIntegerField(null=True, blank=True)  # null = 100 (S-6)
    scan_depth = models.PositiveSmallIntegerField(null=True, blank=True)
    case_sensitive = models.BooleanField(null=True, blank=True)
    whole_words = models.BooleanField(null=True, blank=True)
    role = models.CharField(max_length=16, choices=Role.choices, default=entry_model_default("role"))
    placement = models.CharField(max_length=16, choices=Placement.choices, default=entry_model_default("placement"))

    # Persona books: per-entry channel restriction (S-11); empty = all channels.
    channels = models.JSONField(default=entry_model_default("channels"), blank=True)
    # Legacy `#channel` names not yet resolved by an admin (S-13).
    unresolved_channels = models.JSONField(default=entry_model_default("unresolved_channels"), blank=True)

    # Editor list order (smart "list order", W-1).
    position = models.IntegerField(default=entry_model_default("position"))
    usage_count = models.PositiveIntegerField(default=entry_model_default("usage_count"))
    last_used_at = models.DateTimeField(null=True, blank=True)
    # Regex keys that overran their time budget in a turn ({key: reason}); shown in the editor,
    # cleared when the keys are edited (issue 13). Written by turns, not by the editor.
    regex_overruns = models.JSONField(default=entry_model_default("regex_overruns"), blank=True)

    indexing_state = models.CharField(
        max_length=16, choices=IndexingState.choices, default=entry_model_default("indexing_state")
    )
    content_hash = models.CharField(max_length=64, blank=True, default=entry_model_default("content_hash"))
    # Imported fields we do not model, kept for lossless export.
    extra = models.JSONField(default=entry_model_default("extra"), blank=True)

    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedManager["Entry"]()

    class Meta:
        indexes = [
            models.Index(fields=["book", "position"]),
            models.Index(fields=["tenant", "book"]),
            models.Index(fields=["book", "updated_at"]),
            models.Index(fields=["book", "usage_count"]),
        ]
        ordering = ["position", "id"]

    def __str__(self) -> str:
        return self.title or f"entry {self.pk}"

    @property
    def canon(self) -> bool:
        return self.constant

    @property
    def has_unresolved_channel(self) -> bool:
        """S-13: a legacy `#channel` no admin has resolved yet (counts as all channels)."""
        return bool(self.unresolved_channels)


class LoreWrite(models.Model):
    """One write the model made into a living book (L-4): the record behind "AI updates".

    What the model wrote (``kind``, ``title``, ``aliases``, ``text``) and where
    it came from (chat, reply, model) never change. ``state`` moves
    held → applied/rejected and applied → undone; ``content_before`` /
    ``content_after`` are the entry's lore around the applied write, so an undo
    can tell whether anything changed since. ``edit_*`` keep the owner's edits
    to a held write until it is accepted.
    """

    # Labels are msgids too (gettext_noop: the same text): the pages show them translated.
    class Kind(models.TextChoices):
        CREATE = "create", gettext_noop("New entry")
        APPEND = "append", gettext_noop("Appended to an entry")

    class State(models.TextChoices):
        APPLIED = "applied", gettext_noop("Applied")
        HELD = "held", gettext_noop("Held for review")
        REJECTED = "rejected", gettext_noop("Rejected")
        UNDONE = "undone", gettext_noop("Undone")

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="lore_writes")
    book = models.ForeignKey(Book, on_delete=models.CASCADE, related_name="lore_writes")
    # Null while a held create waits. No constraint: the record keeps the id of an entry undone or deleted.
    entry = models.ForeignKey(Entry, null=True, blank=True, on_delete=models.DO_NOTHING, db_constraint=False,
                              related_name="lore_writes")
    # The chat lives in the cast app above books: its id, not a foreign key.
    chat_id = models.BigIntegerField()
    reply_id = models.CharField(max_length=120)
    model = models.CharField(max_length=120, blank=True, default="")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    title = models.CharField(max_length=200, blank=True, default="")
    aliases = models.JSONField(default=list, blank=True)
    text = models.TextField()
    state = models.CharField(max_length=8, choices=State.choices)
    edit_title = models.CharField(max_length=200, null=True, blank=True)
    edit_aliases = models.JSONField(null=True, blank=True)
    edit_text = models.TextField(null=True, blank=True)
    content_before = models.TextField(blank=True, default="")
    content_after = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)
    # "undo", "reply_reverted", "accepted", "rejected": why the state last changed.
    decided_by = models.CharField(max_length=16, blank=True, default="")

    objects = TenantScopedManager["LoreWrite"]()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["book", "created_at"], name="lorewrite_book_time"),
            models.Index(fields=["tenant", "chat_id", "reply_id"], name="lorewrite_reply"),
        ]
