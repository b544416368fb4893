"""Are the pages' translations compiled where the running code reads them?

``python -m web.catalogues`` exits 1 naming every language of ``LANGUAGES`` whose
compiled catalogue (``django.mo``) is missing, unreadable or older than its ``django.po`` (fewer
messages): its pages would show English. deploy/Dockerfile runs it on the installed package.
"""
from __future__ import annotations

import ast
import gettext
import os
import re
import sys
from functools import cache
from pathlib import Path

LOCALE = Path(__file__).resolve().parent / "locale"
# The source tree the package was built from (a checkout, or an installed package's parent).
SOURCE_ROOT = Path(__file__).resolve().parents[1]

# The code whose refusals (lore_platform.errors.DomainError) reach a page: the services and selectors the
# page views call, whose English messages the Spanish catalogue translates for the pages
# (web.refusals). Left out: the API layer (English by contract), command-line tools, migrations, the
# language-model client (its failures are stored on the job in English and shown under a translated hint).
PAGE_SOURCES = ("books", "sharing", "cast", "jobs", "lore_platform/tenancy/services.py",
                "web")
NOT_PAGE_SOURCES = ("/api/", "/migrations/", "/management/", "books/formats/cli.py", "jobs/llm.py")
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


def page_source_files(root: Path = SOURCE_ROOT) -> list[Path]:
    """The Python files of ``PAGE_SOURCES`` under ``root``."""
    files: list[Path] = []
    for source in PAGE_SOURCES:
        path = root / source
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return [f for f in files if not any(part in f.relative_to(root).as_posix() for part in NOT_PAGE_SOURCES)]


@cache
def refusal_class_names(root: Path = SOURCE_ROOT) -> frozenset[str]:
    """``DomainError`` and every subclass the sources define, read from the source (names are what
    the catalogue tools need: xgettext's keywords, the refusal checks)."""
    names = {"DomainError"}
    trees = [ast.parse(f.read_text(encoding="utf-8")) for f in [root / "lore_platform/errors.py", *page_source_files(root)]]
    grew = True
    while grew:
        grew = False
        for tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name not in names:
                    bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                    if bases & names:
                        names.add(node.name)
                        grew = True
    return frozenset(names)


def message_call_names(root: Path = SOURCE_ROOT) -> frozenset[str]:
    """The calls whose first argument is an English message pages translate: every refusal class,
    ``Term``, ``entry_warning``, ``field_refusal`` (the editor's one-field refusal) and the file
    readers' ``refuse`` / ``refuse_clipped`` / ``too_large`` (books.formats.jsonio), and ``Phrase`` (an import
    receipt's notes and reasons)."""
    return refusal_class_names(root) | {"Term", "Phrase", "entry_warning", "field_refusal", "refuse", "refuse_clipped",
                                        "too_large"}


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")  # as manage.py does
    problems = catalogue_problems()
    for line in problems:
        print(f"catalogues: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
