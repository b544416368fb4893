"""Operator command: repair stored text holding NUL or unpaired surrogates (issue 26, point 5)."""
from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from lore_platform.text_repair import text_repair_rows


class Command(BaseCommand):
    help = (
        "Find rows stored before the API checked text (NUL, unpaired UTF-16 surrogates) in every text and JSON "
        "column, and repair them: U+FFFD for each unpaired surrogate, NUL dropped. --dry-run only counts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Count what would be repaired; write nothing")
        parser.add_argument("--json", action="store_true", help="Print JSON instead of text")

    def handle(self, *args: Any, **options: Any) -> None:
        dry_run = options["dry_run"]
        reports = text_repair_rows(dry_run=dry_run)
        rows = sum(r.rows for r in reports)
        values = sum(r.values for r in reports)
        if options["json"]:
            self.stdout.write(json.dumps({
                "dry_run": dry_run, "rows": rows, "values": values,
                "models": [{"model": r.label, "scanned": r.scanned, "rows": r.rows, "values": r.values,
                            "fields": r.fields} for r in reports],
            }))
            return
        verb = "would repair" if dry_run else "repaired"
        for r in reports:
            where = ", ".join(f"{name} ×{count}" for name, count in sorted(r.fields.items()))
            self.stdout.write(f"{r.label}: {verb} {r.rows} of {r.scanned} rows ({where})")
        self.stdout.write(f"{'Dry run: ' if dry_run else ''}{verb} {values} values in {rows} rows.")
