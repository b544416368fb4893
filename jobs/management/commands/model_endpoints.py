"""Operator command: the model endpoints tenants may choose and where the server may connect (A-3, issue 26).

Reads the settings the server reads (``LOREWEAVE_LLM_*``, ``MODEL_ENDPOINTS``, ``MODEL_TENANT_ENDPOINTS``,
``OUTBOUND_ALLOW``) and fails (exit 1) on one it cannot use, so a typo is found before a job meets it;
``--url`` says whether a URL a tenant might give would be allowed (resolved now, as a connection would).
"""
from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from jobs.selectors import operator_endpoints
from lore_platform import outbound


class Command(BaseCommand):
    help = "List the operator's model endpoints and the outbound allow-list; --url checks a URL against the rule."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", action="append", default=[], help="A URL to check against the rule (repeatable)")
        parser.add_argument("--json", action="store_true", help="Print JSON instead of text")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            endpoints = list(operator_endpoints().values())
            allow = outbound.allow_list()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        checked = []
        for url in options["url"]:
            try:
                outbound.url_check(url)
                checked.append({"url": url, "allowed": True, "why": ""})
            except outbound.OutboundRefused as refused:
                checked.append({"url": url, "allowed": False, "why": str(refused)})
        report: dict[str, Any] = {
            "endpoints": [{"name": e.name, "base_url": e.base_url, "model": e.model, "api_key_set": bool(e.api_key)}
                          for e in endpoints],
            "tenant_endpoints": bool(settings.MODEL_TENANT_ENDPOINTS),
            "outbound_allow": [str(entry) for entry in allow],
            "checked": checked,
        }
        if options["json"]:
            self.stdout.write(json.dumps(report))
            return
        if not endpoints:
            self.stdout.write("No model endpoints: generate says no model is configured (A-3).")
        for n, e in enumerate(report["endpoints"]):
            default = " (the default)" if n == 0 else ""
            key = "key set" if e["api_key_set"] else "no key"
            self.stdout.write(f"Endpoint {e['name']}{default}: {e['base_url']} model={e['model'] or '—'} {key}")
        self.stdout.write("Tenant URLs: " + ("permitted, checked against the rule" if report["tenant_endpoints"]
                                             else "not permitted (tenants choose an endpoint)"))
        self.stdout.write("Allow-list: " + (", ".join(report["outbound_allow"]) or "empty"))
        for item in checked:
            self.stdout.write(f"{item['url']}: " + ("allowed" if item["allowed"] else f"refused: {item['why']}"))
