"""Translation for display (P-4): tasks, the per-version cache and the API, with the real toy package.

The toy Argos package translates exactly the 40 English sentences of
xling-eval.json into Spanish, so every expected output here is exact.
"""
from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from books.services import book_update
from sharing.models import BookTranslation, TranslationStatus
from sharing.services import book_translate_run, book_visibility_set, shared_books_sweep, texts_translate
from sharing.translation import PackageTranslator, sentences_split
from tests.books.factories import make_book, make_entry
from tests.shared_data import require_shared
from tests.sharing.helpers import owner_actor

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_library_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about translation; the vector task is covered in test_library."""
    monkeypatch.setattr("sharing.services.book_vector_refresh_run", lambda **kwargs: "skipped")


def shortest_sentence_pair(item: dict[str, Any]) -> tuple[str, str]:
    pairs = list(zip(sentences_split(item["text_en"]), sentences_split(item["text_es"]), strict=True))
    return min(pairs, key=lambda pair: len(pair[0]))


def xling_book(setup: Any, xling: dict[str, Any], *, entries: int = 10) -> tuple[Any, dict[str, Any]]:
    """A private English book whose every text the toy translates; returns the book and the expected Spanish."""
    items = xling["entries"]
    title_en, title_es = shortest_sentence_pair(items[11])  # "They meet only under a new moon."
    book = make_book(setup, owner="member", title=title_en, description=items[15]["text_en"], language="en")
    expected: dict[str, Any] = {"title": title_es, "description": items[15]["text_es"], "entries": []}
    for i in range(entries):
        entry_title_en, entry_title_es = shortest_sentence_pair(items[(i + 10) % 20])
        make_entry(
            book,
            title=entry_title_en,
            content=items[i]["text_en"],
            keys=[items[i]["title"].split()[0].lower()],
        )
        expected["entries"].append({"title": entry_title_es, "content": items[i]["text_es"]})
    return book, expected


def publish(setup: Any, book: Any, capture: Any, *, run_tasks: bool = True) -> None:
    with capture(execute=run_tasks):
        response = setup.member_client.post(
            f"/api/v1/books/{book.pk}/visibility", {"visibility": "public"}, format="json"
        )
        assert response.status_code == 200, response.content
    book.refresh_from_db()


def test_a_published_book_is_translated_for_display_exactly(
    tenant_a, anon_client, toy_package, xling, django_capture_on_commit_callbacks
):
    book, expected = xling_book(tenant_a, xling)
    publish(tenant_a, book, django_capture_on_commit_callbacks)

    row = BookTranslation.objects.for_tenant(tenant_a.tenant).get(book=book, language="es")
    assert (row.status, row.version, row.source_language) == (TranslationStatus.READY, book.version, "en")

    page = anon_client.get(f"/api/v1/library/books/{book.pk}", {"lang": "es"}).json()
    assert (page["title"], page["description"]) == (expected["title"], expected["description"])
    assert page["display"] == {
        "requested": "es", "language": "es", "status": "ready", "translated": True, "message": None
    }
    assert page["original"] == {"title": book.title, "description": book.description}
    assert page["language"] == "en"

    entries = anon_client.get(f"/api/v1/library/books/{book.pk}/entries", {"lang": "es"}).json()
    assert [{"title": e["title"], "content": e["content"]} for e in entries["results"]] == expected["entries"]
    assert all(e["translated"] for e in entries["results"]) and entries["display"]["status"] == "ready"

    listed = anon_client.get("/api/v1/library/books", {"lang": "es"}).json()["results"]
    assert [(b["title"], b["display"]["status"]) for b in listed] == [(expected["title"], "ready")]

    # No language, or the book's own language: the original, and it says so.
    for params in ({}, {"lang": "en"}, {"lang": "en-GB"}):
        original = anon_client.get(f"/api/v1/library/books/{book.pk}", params).json()
        assert original["title"] == book.title and original["display"]["status"] == "original"
        assert original["original"] is None


def test_unlisted_books_are_translated_and_read_by_link(
    tenant_a, anon_client, toy_package, xling, django_capture_on_commit_callbacks
):
    book, expected = xling_book(tenant_a, xling, entries=2)
    with django_capture_on_commit_callbacks(execute=True):
        share = book_visibility_set(actor=owner_actor(tenant_a), book=book, visibility="unlisted")
    page = anon_client.get(f"/api/v1/library/links/{share.link_token}", {"lang": "es"}).json()
    assert page["title"] == expected["title"] and page["display"]["status"] == "ready"
    entries = anon_client.get(f"/api/v1/library/links/{share.link_token}/entries", {"lang": "es"}).json()
    assert [e["content"] for e in entries["results"]] == [e["content"] for e in expected["entries"]]


def test_the_original_is_served_while_the_translation_is_pending(
    tenant_a, anon_client, toy_package, xling, django_capture_on_commit_callbacks
):
    book, _ = xling_book(tenant_a, xling)
    publish(tenant_a, book, django_capture_on_commit_callbacks, run_tasks=False)
    page = anon_client.get(f"/api/v1/library/books/{book.pk}", {"lang": "es"}).json()
    assert page["title"] == book.title
    assert page["display"]["status"] == "pending" and page["display"]["language"] == "en"
    assert page["display"]["translated"] is False and "original" in page["display"]["message"]


def test_without_a_package_translation_is_unavailable(
    tenant_a, anon_client, xling, settings, django_capture_on_commit_callbacks
):
    book, _ = xling_book(tenant_a, xling)
    publish(tenant_a, book, django_capture_on_commit_callbacks)
    assert not BookTranslation.objects.for_tenant(tenant_a.tenant).exists()
    page = anon_client.get(f"/api/v1/library/books/{book.pk}", {"lang": "es"}).json()
    assert page["title"] == book.title
    assert page["display"]["status"] == "unavailable"
    assert page["display"]["message"] == "Translation is unavailable: no language package for en → es is installed."
    not_offered = anon_client.get(f"/api/v1/library/books/{book.pk}", {"lang": "fr"}).json()["display"]
    assert not_offered["status"] == "unavailable" and "not one of this server's display languages" in not_offered["message"]
    languages = anon_client.get("/api/v1/library/languages").json()
    assert languages == {"display_languages": ["en", "es"], "installed_pairs": []}


def test_a_display_language_without_its_package_is_unavailable(
    tenant_a, anon_client, toy_package, xling, settings, django_capture_on_commit_callbacks
):
    settings.LOREWEAVE_DISPLAY_LANGUAGES = ["en", "es", "fr"]
    book, _ = xling_book(tenant_a, xling)
    publish(tenant_a, book, django_capture_on_commit_callbacks)
    languages = set(BookTranslation.objects.for_tenant(tenant_a.tenant).values_list("language", flat=True))
    assert languages == {"es"}
    french = anon_client.get(f"/api/v1/library/books/{book.pk}", {"lang": "fr"}).json()["display"]
    assert french["status"] == "unavailable" and "en → fr" in french["message"]
    sharing = tenant_a.member_client.get(f"/api/v1/books/{book.pk}/sharing").json()["translations"]
    assert [(t["language"], t["status"]) for t in sharing] == [("es", "ready"), ("fr", "unavailable")]
    assert anon_client.get("/api/v1/library/languages").json()["installed_pairs"] == [{"source": "en", "target": "es"}]


class CountingTranslator(PackageTranslator):
    def __init__(self, packages_dir: Any, *, fail: bool = False) -> None:
        super().__init__(packages_dir)
        self.calls = 0
        self.fail = fail

    def translate(self, texts: list[str], *, source: str, target: str) -> list[str]:
        self.calls += 1
        if self.fail:
            raise RuntimeError("the model file is corrupt")
        return super().translate(texts, source=source, target=target)


def test_translations_are_cached_per_version_and_follow_changes(
    tenant_a, anon_client, toy_package, xling, django_capture_on_commit_callbacks
):
    book, expected = xling_book(tenant_a, xling)
    publish(tenant_a, book, django_capture_on_commit_callbacks)
    first_version = book.version

    counting = CountingTranslator(toy_package)
    assert book_translate_run(tenant=book.tenant_id, book_id=book.pk, language="es", translator=counting) == "current"
    assert counting.calls == 0  # idempotent: a ready translation of this version is not redone

    new_title_en, new_title_es = shortest_sentence_pair(xling["entries"][4])
    # The books app publishes the edit after commit (books.events); nothing has run yet.
    with django_capture_on_commit_callbacks() as queued:
        book_update(actor=owner_actor(tenant_a), book=book, title=new_title_en)
    assert queued
    book.refresh_from_db()
    with django_capture_on_commit_callbacks() as page_queued:
        stale = anon_client.get(f"/api/v1/library/books/{book.pk}", {"lang": "es"}).json()
    # The cached translation is of an older version: the page serves the original and says so
    # (and asks for the refresh itself, after its own commit).
    assert stale["title"] == new_title_en and stale["display"]["status"] == "pending"

    with django_capture_on_commit_callbacks(execute=True):
        for callback in [*queued, *page_queued]:
            callback()
    fresh = anon_client.get(f"/api/v1/library/books/{book.pk}", {"lang": "es"}).json()
    assert fresh["title"] == new_title_es and fresh["display"]["status"] == "ready"
    rows = list(BookTranslation.objects.for_tenant(tenant_a.tenant).values_list("version", "status"))
    assert rows == [(book.version, "ready")] and book.version > first_version  # the old version was pruned


def test_a_failed_translation_is_recorded_and_the_original_served(
    tenant_a, anon_client, toy_package, xling, django_capture_on_commit_callbacks
):
    book, _ = xling_book(tenant_a, xling, entries=10)
    publish(tenant_a, book, django_capture_on_commit_callbacks, run_tasks=False)
    broken = CountingTranslator(toy_package, fail=True)
    assert book_translate_run(tenant=book.tenant_id, book_id=book.pk, language="es", translator=broken) == "failed"
    row = BookTranslation.objects.for_tenant(tenant_a.tenant).get(book=book)
    assert row.status == "failed" and "corrupt" in row.error
    page = anon_client.get(f"/api/v1/library/books/{book.pk}", {"lang": "es"}).json()
    assert page["title"] == book.title and page["display"]["status"] == "failed"


def test_private_books_are_not_translated(tenant_a, toy_package, xling):
    book, _ = xling_book(tenant_a, xling)
    assert book_translate_run(tenant=book.tenant_id, book_id=book.pk, language="es") == "private"
    assert book_translate_run(tenant=book.tenant_id, book_id=10**9, language="es") == "missing"
    assert not BookTranslation.objects.for_tenant(tenant_a.tenant).exists()


def test_lost_translation_tasks_are_sent_again_by_the_sweep(
    tenant_a, toy_package, xling, django_capture_on_commit_callbacks
):
    book, _ = xling_book(tenant_a, xling)
    publish(tenant_a, book, django_capture_on_commit_callbacks, run_tasks=False)
    with django_capture_on_commit_callbacks(execute=True):  # the refresh runs; the translation task is "lost"
        from sharing.services import book_shared_refresh_run

        book_shared_refresh_run(tenant=book.tenant_id, book_id=book.pk)
    BookTranslation.objects.for_tenant(tenant_a.tenant).update(
        status="pending", requested_at="2000-01-01T00:00:00Z"
    )
    assert shared_books_sweep() == {"refreshed": 0, "translations_resent": 1}
    assert BookTranslation.objects.for_tenant(tenant_a.tenant).get(book=book).status == "ready"


def test_decorators_and_blank_lines_are_kept_verbatim():
    seen: list[str] = []

    def upper(lines: list[str]) -> list[str]:
        seen.extend(lines)
        return [line.upper() for line in lines]

    out = texts_translate(upper, ["@@depth 4\nThe sea.\n\nThe sky.", "", "@@keep"])
    assert out == ["@@depth 4\nTHE SEA.\n\nTHE SKY.", "", "@@keep"]
    assert seen == ["The sea.", "The sky."]


def test_translation_install_command(
    tenant_a, anon_client, xling, settings, tmp_path, django_capture_on_commit_callbacks
):
    book, expected = xling_book(tenant_a, xling)
    publish(tenant_a, book, django_capture_on_commit_callbacks)  # no package yet: nothing to translate
    settings.LOREWEAVE_TRANSLATION_PACKAGES_DIR = str(tmp_path / "packages")
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("translation_install", str(require_shared("recipes", "translate-en_es-toy.argosmodel")), stdout=out)
    assert "Installed en → es" in out.getvalue() and "Queued 1 shared book(s)" in out.getvalue()
    page = anon_client.get(f"/api/v1/library/books/{book.pk}", {"lang": "es"}).json()
    assert page["title"] == expected["title"] and page["display"]["status"] == "ready"

    listing = StringIO()
    call_command("translation_install", "--list", stdout=listing)
    assert "en → es" in listing.getvalue() and "Display languages: en, es" in listing.getvalue()


def test_translation_install_refuses_a_bad_file(tmp_path, settings):
    from django.core.management.base import CommandError

    settings.LOREWEAVE_TRANSLATION_PACKAGES_DIR = str(tmp_path / "packages")
    bogus = tmp_path / "bogus.argosmodel"
    bogus.write_bytes(b"not a zip")
    with pytest.raises(CommandError, match="not an Argos package"):
        call_command("translation_install", str(bogus))
    with pytest.raises(CommandError, match="No such file"):
        call_command("translation_install", str(tmp_path / "missing.argosmodel"))
