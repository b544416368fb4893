"""Are the pages' translations compiled where the running code reads them?

``python -m lore_platform.web.catalogues`` exits 1 naming every language of ``LANGUAGES`` whose
compiled catalogue (``django.mo``) is missing, unreadable or older than its ``django.po`` (fewer
messages): its pages would show English. deploy/Dockerfile runs it on the installed package.
"""
from __future__ import annotations

import gettext
import os
import re
import sys
from pathlib import Path

LOCALE = Path(__file__).resolve().parent / "locale"
# A translated one-line message: its msgid and a non-empty msgstr (or msgstr[0]).
_ENTRY = re.compile(r'^msgid "(.+)"\n(?:msgid_plural "[^\n]*"\n)?msgstr(?:\[0\])? "(.+)"$', re.MULTILINE)


def _unquote(text: str) -> str:
    return text.replace('\\"', '"').replace("\\n", "\n").replace("\\t", "\t").replace("\\\\", "\\")


def translated_msgids(po: Path) -> set[str]:
    """The messages msgfmt compiles from ``po``: translated, not fuzzy."""
    found = set()
    for block in po.read_text(encoding="utf-8").split("\n\n"):
        if "#, fuzzy" in block or "fuzzy," in block:
            continue
        for match in _ENTRY.finditer(block):
            found.add(_unquote(match.group(1)))
    return found


def catalogue_problems(locale: Path = LOCALE) -> list[str]:
    """What is wrong with each translated language's compiled catalogue (empty: all good)."""
    from django.conf import settings

    problems = []
    for code, _name in settings.LANGUAGES:
        if code == settings.LANGUAGE_CODE:
            continue  # the source language needs no catalogue
        po, mo = (locale / code / "LC_MESSAGES" / f"django.{ext}" for ext in ("po", "mo"))
        if not mo.is_file():
            problems.append(f"{code}: {mo} is missing (run scripts/compile-messages.sh)")
            continue
        try:
            with mo.open("rb") as handle:
                compiled = gettext.GNUTranslations(handle)._catalog  # type: ignore[attr-defined]
        except OSError as exc:
            problems.append(f"{code}: {mo} is unreadable: {exc}")
            continue
        wanted = translated_msgids(po) if po.is_file() else set()
        keys = {k[0] if isinstance(k, tuple) else k for k in compiled}
        absent = sorted(m for m in wanted if m not in keys)
        if absent:
            problems.append(f"{code}: {mo} lacks {len(absent)} of {len(wanted)} messages, e.g. {absent[0]!r} "
                            "(stale: run scripts/compile-messages.sh --force)")
    return problems


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lore_platform.settings")  # as manage.py does
    problems = catalogue_problems()
    for line in problems:
        print(f"catalogues: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
