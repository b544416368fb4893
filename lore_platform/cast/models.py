from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

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

    objects: TenantScopedManager[Lineage] = TenantScopedManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "key"], name="lineage_unique_key_per_tenant")]


class Character(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="characters")
    name = models.CharField(max_length=120)
    lineage = models.ForeignKey(Lineage, on_delete=models.PROTECT, related_name="characters")
    created_at = models.DateTimeField(default=timezone.now)

    objects: TenantScopedManager[Character] = TenantScopedManager()
