"""Django's ``makemessages``, also reading the services' refusals into the pages' catalogue.

A refusal's English message (``raise NotFound("No such book.")``, a template with ``values=``), every
``Term`` and every entry warning are msgids: pages translate them (``web.refusals``). Django's command only reads
gettext calls and writes each file's messages next to the nearest ``locale`` folder; this one also takes
every ``DomainError`` class as an xgettext keyword and writes everything into the one catalogue the pages
read (``web/locale``). Run from the repository root:

    python manage.py makemessages -l es --no-location --no-wrap

Messages no longer in the code become obsolete (``#~``) as usual; translations of the rest are kept.
"""
from __future__ import annotations

from typing import Any

from django.core.management.commands import makemessages

from web.catalogues import LOCALE, message_call_names

# Not the product: tests, benchmarks and tooling hold no page text (their refusals are examples).
NOT_SCANNED = ("tests", "bench", "deploy", "scripts", "var", "control", "docs", "build", "dist", "node_modules",
               "*/api/*", "*/migrations/*", "*/management/*", "books/formats/cli.py", "jobs/llm.py",
               "retrieval/*", "config/cli.py")


class Command(makemessages.Command):
    xgettext_options = [*makemessages.Command.xgettext_options,
                        *(f"--keyword={name}" for name in sorted(message_call_names()))]

    def handle(self, *args: Any, **options: Any) -> None:
        options["ignore_patterns"] = [*options.get("ignore_patterns", []), *NOT_SCANNED]
        super().handle(*args, **options)

    def find_files(self, root: str) -> list[Any]:
        files = super().find_files(root)
        for translatable in files:
            translatable.locale_dir = str(LOCALE)  # one catalogue for every page's text
        return files
