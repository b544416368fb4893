"""Delete for good the books trashed more than ``TRASH_KEEP_DAYS`` days ago, in every tenant.

Run it daily (cron or a systemd timer): `python manage.py books_trash_purge`.
"""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from books.services import books_trash_purge
from lore_platform.tenancy.models import Tenant


class Command(BaseCommand):
    help = "Delete books that have been in the trash longer than the keeping time (30 days)."

    def handle(self, *args: Any, **options: Any) -> None:
        total = 0
        for tenant in Tenant.objects.order_by("pk"):
            total += books_trash_purge(tenant)
        self.stdout.write(f"Purged {total} trashed book(s).")
