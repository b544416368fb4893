"""Create (or refresh) the demo tenant, user, API key and the demo book.

Run by `make run`. Idempotent: the tenant and book are created once, and the
demo key stays the same across runs of the same database: the database keeps
only its hash, so the key itself is kept in ``$LOREWEAVE_DATA_DIR/demo-api-key``
(mode 0600). ``--new-key`` revokes it and prints a fresh one.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import transaction

from lore_platform.tenancy.models import ApiKey, Tenant
from lore_platform.tenancy.selectors import actor_for_api_key, api_key_authenticate
from lore_platform.tenancy.services import (
    IssuedKey,
    api_key_create,
    api_key_revoke,
    tenant_create,
    user_get_or_create,
)

DEMO_BOOK = Path(__file__).resolve().parents[2] / "demo_book.json"
DEMO_TENANT = "Demo"
DEMO_ADMIN = "demo@loreweave.local"
DEMO_KEY_NAME = "demo key"


class Command(BaseCommand):
    help = "Create the demo tenant, admin, API key and demo book; print the key."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--json", action="store_true")
        parser.add_argument("--new-key", action="store_true", help="Revoke the demo key and issue a new one")

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        key_file = Path(settings.DATA_DIR) / "demo-api-key"
        tenant = Tenant.objects.filter(name=DEMO_TENANT).first()
        reused = False
        if tenant is None:
            created = tenant_create(name=DEMO_TENANT, admin_email=DEMO_ADMIN)
            tenant, issued = created.tenant, created.key
            issued.api_key.name = DEMO_KEY_NAME
            issued.api_key.save(update_fields=["name"])
        else:
            kept = None if options["new_key"] else _kept_key(key_file, tenant)
            if kept is not None:
                issued, reused = kept, True
            else:
                admin = user_get_or_create(email=DEMO_ADMIN)
                for old in ApiKey.objects.for_tenant(tenant).filter(name=DEMO_KEY_NAME, revoked_at__isnull=True):
                    api_key_revoke(tenant=tenant, key_id=old.pk)
                issued = api_key_create(tenant=tenant, name=DEMO_KEY_NAME, scopes=["read", "write"], user=admin)
        if not reused:
            key_file.parent.mkdir(parents=True, exist_ok=True)
            key_file.touch(mode=0o600)
            key_file.write_text(issued.secret + "\n", encoding="utf-8")

        book_id = self._ensure_demo_book(issued.api_key)
        if options["json"]:
            self.stdout.write(json.dumps({"tenant": tenant.slug, "api_key": issued.secret, "book_id": book_id,
                                          "key_reused": reused}))
            return
        self.stdout.write(f"Demo tenant: {tenant.name} ({tenant.slug}); admin {DEMO_ADMIN}")
        self.stdout.write(f"Demo book:   id {book_id}")
        state = "the same as last run" if reused else "new"
        self.stdout.write(f"Demo API key ({state}; kept in {key_file}): {issued.secret}")
        port = os.environ.get("PORT", "8000")
        self.stdout.write(f'Try: curl -H "Authorization: Api-Key {issued.secret}" http://127.0.0.1:{port}/api/v1/tenant')

    def _ensure_demo_book(self, api_key: ApiKey) -> int:
        from books.models import Book
        from books.services import book_create, entries_create_bulk

        spec = json.loads(DEMO_BOOK.read_text(encoding="utf-8"))
        existing = Book.objects.for_tenant(api_key.tenant).filter(title=spec["title"]).first()
        if existing is not None:
            return existing.pk
        actor = actor_for_api_key(api_key)
        book = book_create(
            actor=actor,
            title=spec["title"],
            profile=spec["profile"],
            description=spec["description"],
            tags=spec["tags"],
            language=spec["language"],
        )
        entries_create_bulk(actor=actor, book=book, entries=spec["entries"])
        return book.pk


def _kept_key(key_file: Path, tenant: Tenant) -> IssuedKey | None:
    """The key written by an earlier run, if it still works for this database's demo tenant."""
    try:
        secret = key_file.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    api_key = api_key_authenticate(secret)
    if api_key is None or api_key.tenant_id != tenant.pk or api_key.name != DEMO_KEY_NAME:
        return None
    return IssuedKey(api_key=api_key, secret=secret)
