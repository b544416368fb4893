"""A service's refusal on a page speaks the page's language; the API keeps English.

The services raise ``DomainError``s with English messages (the API's words); a message with values is a
template (``values=``) so a page can fill in its translation (``web.refusals``). The
catalogue checks below read every refusal a page can show, in the sources that pages call, and fail on
one the Spanish catalogue does not translate, on a translation whose placeholders differ from the
English (it could not be filled in), and on an f-string message (a page could not translate it).
"""
from __future__ import annotations

import ast
import gettext
import string
import subprocess
from functools import cache
from pathlib import Path

import pytest
from django.test import Client
from django.utils import translation

from lore_platform.errors import DomainError, Term, ValidationFailed
from web.catalogues import message_call_names, page_source_files
from web.refusals import refusal_said, refusal_text

REPO = Path(__file__).resolve().parents[2]
PO = REPO / "web/locale/es/LC_MESSAGES/django.po"


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def refusals_in_sources() -> list[tuple[str, ast.Call]]:
    """(file:line, call) of every refusal, ``Term`` and entry warning constructed in the page sources."""
    found = []
    names = message_call_names()
    for path in page_source_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and _called_name(node) in names and node.args:
                found.append((f"{path.relative_to(REPO)}:{node.lineno}", node))
    return found


def compiled(po: Path) -> dict[str, str]:
    """A catalogue as msgfmt compiles it (fuzzy entries left out, as in production)."""
    done = subprocess.run(["msgfmt", "--check", "-o", "-", str(po)], check=True, capture_output=True)
    import io

    catalogue = gettext.GNUTranslations(io.BytesIO(done.stdout))._catalog  # type: ignore[attr-defined]
    return {k: v for k, v in catalogue.items() if isinstance(k, str) and k}


@cache
def spanish_catalogue() -> dict[str, str]:
    return compiled(PO)


def placeholders(template: str) -> list[tuple[str, str]]:
    return sorted((name, spec or "") for _, name, spec, _ in string.Formatter().parse(template) if name is not None)


def test_no_page_refusal_is_an_f_string() -> None:
    f_strings = [where for where, call in refusals_in_sources() if isinstance(call.args[0], ast.JoinedStr)]
    assert f_strings == [], "pass a template and values= instead, so a page can translate it"


def test_every_page_refusal_has_a_spanish_translation() -> None:
    catalogue = spanish_catalogue()
    missing = sorted({
        f"{where}: {call.args[0].value!r}" for where, call in refusals_in_sources()
        if isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)
        and not catalogue.get(call.args[0].value)
    })
    assert missing == []


def test_every_translated_template_takes_the_same_values() -> None:
    catalogue = spanish_catalogue()
    differ = []
    for where, call in refusals_in_sources():
        template = call.args[0]
        if isinstance(template, ast.Constant) and isinstance(template.value, str) and template.value in catalogue:
            with_values = any(k.arg == "values" for k in call.keywords)
            english = placeholders(template.value) if with_values else []
            if placeholders(catalogue[template.value]) != english:
                differ.append(f"{where}: {template.value!r} -> {catalogue[template.value]!r}")
    assert differ == []


def test_a_refusal_with_values_is_filled_in_in_either_language() -> None:
    refusal = ValidationFailed("{what} is {length:,} characters; it needs at least {minimum:,} ({rule}).",
                               values={"what": Term("The book title"), "length": 1200, "minimum": 1, "rule": "W-12"},
                               field="title", rule="W-12")
    assert refusal.message == "The book title is 1,200 characters; it needs at least 1 (W-12)."
    assert refusal.as_dict()["message"] == refusal.message  # the API's English
    with translation.override("en"):
        assert refusal_text(refusal) == refusal.message


def test_a_translation_that_does_not_fit_its_values_falls_back_to_english(monkeypatch) -> None:
    refusal = DomainError("Only {count} left.", values={"count": 3})
    monkeypatch.setattr("web.refusals.gettext", lambda text: "Solo quedan {cuantos}.")
    assert refusal_said(refusal) == "Only 3 left."
    monkeypatch.setattr("web.refusals.gettext", lambda text: "Solo quedan {count}.")
    assert refusal_said(refusal) == "Solo quedan 3."


@pytest.mark.django_db
def test_a_spanish_page_says_the_refusal_in_spanish_and_the_api_in_english(tenant_a) -> None:
    from sharing.services import book_visibility_set
    from tests.books.factories import fill, make_book, member_actor
    from tests.web.support import signed_in
    from tests.web.test_editor_pages import entries_of, html

    book = make_book(tenant_a, title="Shared", profile="smart")
    fill(book, 10)
    book_visibility_set(actor=member_actor(tenant_a), book=book, visibility="public")
    first = entries_of(book)[0]
    owner = signed_in(tenant_a.member)
    refused = owner.post(f"/books/{book.pk}/entries/bulk", {"bulk": "delete", "entry": [first.pk]}, follow=True,
                         HTTP_ACCEPT_LANGUAGE="es")
    page = html(refused)
    assert len(entries_of(book)) == 10  # nothing deleted
    with translation.override("es"):
        spanish = refusal_text(_public_floor_refusal(book))
    assert spanish in page and "P-1" in page
    assert "A public book keeps" not in page
    api = Client(HTTP_AUTHORIZATION=f"Api-Key {tenant_a.member_key}", HTTP_ACCEPT_LANGUAGE="es")
    answer = api.delete(f"/api/v1/books/{book.pk}/entries/{first.pk}")
    assert answer.status_code == 422 and answer.json()["error"]["rule"] == "P-1"
    assert answer.json()["error"]["message"].startswith("A public book keeps")


def _public_floor_refusal(book) -> DomainError:
    from books import limits

    try:
        limits.public_floor_check(book, remaining=9, field="entry")
    except DomainError as exc:
        return exc
    raise AssertionError("a public book of 10 entries let one go")


def test_refreshing_the_catalogue_keeps_every_translation_and_finds_every_refusal(tmp_path) -> None:
    """`makemessages` (this project's) from the root, on a copy of the source: nothing translated
    turns obsolete (Django's own command, run in web, would drop every service refusal),
    and every refusal of the page sources is a msgid of the refreshed catalogue."""
    import shutil
    import sys


    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "var", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis", "*.mo"))
    po = source / PO.relative_to(REPO)
    refreshed = subprocess.run([sys.executable, "manage.py", "makemessages", "-l", "es", "--no-location", "--no-wrap"],
                               cwd=source, capture_output=True, text=True, timeout=120, check=False)
    assert refreshed.returncode == 0, refreshed.stderr[-2000:]
    lost = sorted(set(spanish_catalogue()) - set(compiled(po)))
    assert lost == [], "translations the refresh made obsolete: mark their msgids (gettext_noop) where defined"
    extracted = set(_msgids(po))
    refusals = {call.args[0].value for _, call in refusals_in_sources()
                if isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)}
    assert sorted(refusals - extracted) == []


def _msgids(po: Path) -> list[str]:
    """Every live msgid of a catalogue, translated or not (msgfmt keeps only translated ones)."""
    import re

    found = []
    for block in po.read_text(encoding="utf-8").split("\n\n"):
        match = re.search(r'^msgid ((?:"(?:[^"\\]|\\.)*"\n?)+)', block, re.MULTILINE)
        if match:
            parts = re.findall(r'"((?:[^"\\]|\\.)*)"', match.group(1))
            found.append(ast.literal_eval('"' + "".join(parts) + '"'))
    return found


@pytest.mark.django_db
def test_entry_warnings_on_a_spanish_page_are_spanish_and_english_in_the_api(tenant_a) -> None:
    from tests.books.factories import make_book, make_entry
    from tests.web.support import signed_in
    from tests.web.test_editor_pages import html

    world = make_book(tenant_a, title="Mundo", profile="smart")
    make_entry(world, title="Varn", content="La ciudad fluvial de Varn comercia sal.", usage_count=3)
    long = make_entry(world, title="Crónica", content="La crónica de la ciudad y de sus reyes. " * 200)
    spanish = html(signed_in(tenant_a.member).get(f"/books/{world.pk}", HTTP_ACCEPT_LANGUAGE="es"))
    english = html(signed_in(tenant_a.member).get(f"/books/{world.pk}", HTTP_ACCEPT_LANGUAGE="en"))
    assert "Divídela en entradas" in spanish and "Split it into focused entries" not in spanish
    assert "Split it into focused entries" in english and "(W-11)" in spanish
    api = Client(HTTP_AUTHORIZATION=f"Api-Key {tenant_a.member_key}", HTTP_ACCEPT_LANGUAGE="es")
    answer = api.get(f"/api/v1/books/{world.pk}/entries/{long.pk}")
    warnings = {w["code"]: w["message"] for w in answer.json()["warnings"]}
    assert warnings["long_entry"].endswith("Split it into focused entries.")


@pytest.mark.django_db
def test_an_import_receipt_on_a_spanish_page_is_spanish_and_english_in_the_api(tenant_a) -> None:
    from books.models import Book
    from tests.web.support import signed_in, world_info
    from tests.web.test_editor_pages import html
    from tests.web.test_pages import upload

    owner = signed_in(tenant_a.member)
    page = html(owner.post("/books", {"action": "import", "profile": "smart", "language": "es",
                                      "file": upload(world_info())}, follow=True, HTTP_ACCEPT_LANGUAGE="es"))
    assert "duplicado de la entrada n.º 1 de este archivo" in page and "contenido vacío" in page
    assert "duplicate of entry" not in page and "empty content" not in page
    book = Book.objects.for_tenant(tenant_a.tenant).get()
    api = Client(HTTP_AUTHORIZATION=f"Api-Key {tenant_a.member_key}", HTTP_ACCEPT_LANGUAGE="es")
    answer = api.post(f"/api/v1/books/{book.pk}/import", {"file": upload(world_info()), "mode": "append"})
    reasons = {row["reason"] for row in answer.json()["receipt"]["skipped"]}
    assert "already in the book (same title and content)" in reasons and "empty content" in reasons
