"""Operator command: add a member (or admin) to a tenant, optionally with an API key."""
from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from lore_platform.errors import DomainError
from lore_platform.tenancy.models import Membership, Tenant
from lore_platform.tenancy.services import member_add_as_operator, member_api_key_create


class Command(BaseCommand):
    help = "Add a user to a tenant with a role; --key also prints an API key acting as that member (shown once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="Tenant slug")
        parser.add_argument("email", help="The member's email (the user is created if new)")
        parser.add_argument("--role", default=Membership.Role.MEMBER, choices=Membership.Role.values)
        parser.add_argument("--key", choices=["read", "write"], help="Also issue an API key with this scope")
        parser.add_argument("--json", action="store_true", help="Print JSON instead of text")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant with slug {options['tenant']!r}.")
        try:
            membership = member_add_as_operator(tenant=tenant, email=options["email"], role=options["role"])
            issued = None
            if options["key"]:
                issued = member_api_key_create(tenant=tenant, membership_id=membership.pk,
                                               name=f"{membership.user.email} key", scopes=[options["key"]])
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        if options["json"]:
            self.stdout.write(json.dumps({"tenant": tenant.slug, "member": membership.user.email, "id": membership.pk,
                                          "role": membership.role, "api_key": issued.secret if issued else None}))
            return
        self.stdout.write(f"Member:  {membership.user.email} ({membership.role}) in {tenant.name} ({tenant.slug})")
        if issued:
            self.stdout.write(f"API key: {issued.secret}")
            self.stdout.write("The key is shown once; store it now.")
