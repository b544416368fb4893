"""Install an Argos Translate language package for display translations (P-4).

    python manage.py translation_install /path/to/translate-en_es-1_0.argosmodel

The package is unpacked into ``LOREWEAVE_TRANSLATION_PACKAGES_DIR`` (default
``<data dir>/translation-packages``), which every web and worker process reads;
then every shared book the new pair covers is queued for translation (unless
``--no-schedule``). ``--list`` shows what is installed.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from lore_platform.errors import DomainError
from sharing import config
from sharing.services import translations_schedule_for_pair
from sharing.translation import package_install_from_path, packages_installed


class Command(BaseCommand):
    help = "Install an Argos Translate .argosmodel language package and translate shared books with it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", nargs="?", help="The .argosmodel file to install.")
        parser.add_argument(
            "--no-schedule", action="store_true", help="Install only; do not queue translations of shared books."
        )
        parser.add_argument("--list", action="store_true", help="List installed packages and display languages.")

    def handle(self, *args: Any, **options: Any) -> None:
        folder = config.packages_dir()
        if options["list"]:
            self._list(folder)
            return
        if not options["path"]:
            raise CommandError("Give the path of an .argosmodel file (or --list).")
        archive = Path(options["path"])
        if not archive.is_file():
            raise CommandError(f"No such file: {archive}")
        try:
            package = package_install_from_path(archive, folder)
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        source, target = package.pair
        self.stdout.write(
            self.style.SUCCESS(f"Installed {source} → {target} (version {package.version or '?'}) into {package.path}")
        )
        languages = config.display_languages()
        if target not in languages:
            self.stdout.write(
                self.style.WARNING(
                    f"{target!r} is not a display language ({', '.join(languages) or 'none'}): add it to "
                    "LOREWEAVE_DISPLAY_LANGUAGES to translate books into it."
                )
            )
            return
        if options["no_schedule"]:
            return
        queued = translations_schedule_for_pair(source, target)
        self.stdout.write(f"Queued {queued} shared book(s) for translation {source} → {target}.")

    def _list(self, folder: Path) -> None:
        self.stdout.write(f"Packages in {folder}:")
        installed = packages_installed(folder)
        for package in installed:
            self.stdout.write(f"  {package.from_code} → {package.to_code}  version {package.version or '?'}")
        if not installed:
            self.stdout.write("  (none)")
        self.stdout.write(f"Display languages: {', '.join(config.display_languages()) or '(none)'}")
