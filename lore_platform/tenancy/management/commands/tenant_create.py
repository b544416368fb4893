"""Operator command: a new tenant with an admin user and an API key."""
from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from lore_platform.errors import DomainError
from lore_platform.tenancy.models import Tenant
from lore_platform.tenancy.services import tenant_create


class Command(BaseCommand):
    help = "Create a tenant, its admin user and an API key (the key is printed once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="Tenant name")
        parser.add_argument("--admin", required=True, metavar="EMAIL", help="Admin user's email")
        parser.add_argument("--profile", default=Tenant.Profile.CLASSIC, choices=Tenant.Profile.values)
        parser.add_argument("--json", action="store_true", help="Print JSON instead of text")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            created = tenant_create(name=options["name"], admin_email=options["admin"], profile=options["profile"])
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "tenant": {"id": created.tenant.pk, "name": created.tenant.name, "slug": created.tenant.slug},
                        "admin": created.admin.email,
                        "api_key": created.key.secret,
                        "api_key_prefix": created.key.api_key.prefix,
                    }
                )
            )
            return
        self.stdout.write(f"Tenant:  {created.tenant.name} ({created.tenant.slug})")
        self.stdout.write(f"Admin:   {created.admin.email}")
        self.stdout.write(f"API key: {created.key.secret}")
        self.stdout.write("The key is shown once; store it now.")
