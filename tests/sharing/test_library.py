"""The public library (P-5): browse, filter, sort, paginate, search by words and by meaning, book pages."""
from __future__ import annotations

import pytest
from django.db import connection

from books.services import book_update
from cast.models import Attachment
from cast.services import character_import
from sharing.selectors import library_search
from sharing.services import book_copy, book_vector_refresh_run, book_visibility_set, shared_books_sweep
from tests.books.factories import fill, make_book, make_entry
from tests.sharing.helpers import admin_actor, owner_actor, shared_book

pytestmark = pytest.mark.django_db


def _ids(response):
    assert response.status_code == 200, response.content
    return [book["id"] for book in response.json()["results"]]


def _publish(setup, title, *, entry_titles=(), entries=10, **fields):
    book = make_book(setup, owner="member", title=title, **fields)
    for name in entry_titles:
        make_entry(book, title=name)
    fill(book, max(0, entries - len(entry_titles)))
    book_visibility_set(actor=owner_actor(setup), book=book, visibility="public")
    book.refresh_from_db()
    return book


def test_library_lists_public_books_of_every_tenant_to_anyone(tenant_a, tenant_b, anon_client):
    mine = _publish(tenant_a, "Alpha world")
    theirs = _publish(tenant_b, "Beta world")
    shared_book(tenant_a, visibility="unlisted", title="Unlisted")
    shared_book(tenant_a, visibility="private", title="Private")
    assert _ids(anon_client.get("/api/v1/library/books")) == [theirs.pk, mine.pk]  # newest first
    assert _ids(tenant_b.read_client.get("/api/v1/library/books")) == [theirs.pk, mine.pk]
    body = anon_client.get("/api/v1/library/books").json()["results"][1]
    assert body["publisher"] == "Alpha" and body["entry_count"] == 10 and body["display"]["status"] == "original"
    assert "link" not in body and "owner" not in body


def test_filter_by_tag_and_language(tenant_a, tenant_b, anon_client):
    sea = _publish(tenant_a, "Sea", tags=["Pirates", "sea"], language="en")
    mar = _publish(tenant_b, "Mar", tags=["piratas"], language="es")
    assert _ids(anon_client.get("/api/v1/library/books", {"tag": "pirates"})) == [sea.pk]
    assert _ids(anon_client.get("/api/v1/library/books", {"tag": "PIRATAS"})) == [mar.pk]
    assert _ids(anon_client.get("/api/v1/library/books", {"language": "es"})) == [mar.pk]
    assert _ids(anon_client.get("/api/v1/library/books", {"language": "ES-mx"})) == [mar.pk]
    assert _ids(anon_client.get("/api/v1/library/books", {"tag": "sea", "language": "es"})) == []


def test_sort_by_most_copied_and_most_attached(tenant_a, tenant_b, anon_client):
    first = _publish(tenant_a, "First")
    second = _publish(tenant_a, "Second")
    third = _publish(tenant_a, "Third")
    book_copy(actor=admin_actor(tenant_b), book_id=first.pk)
    book_copy(actor=admin_actor(tenant_b), book_id=first.pk)
    book_copy(actor=admin_actor(tenant_b), book_id=second.pk)
    kael = character_import(tenant=tenant_b.tenant, name="Kael")
    Attachment.objects.create(tenant=tenant_b.tenant, book=third, character=kael)
    Attachment.objects.create(tenant=tenant_b.tenant, book=third)
    Attachment.objects.create(tenant=tenant_b.tenant, book=second)
    assert _ids(anon_client.get("/api/v1/library/books", {"sort": "newest"})) == [third.pk, second.pk, first.pk]
    assert _ids(anon_client.get("/api/v1/library/books", {"sort": "most_copied"})) == [first.pk, second.pk, third.pk]
    assert _ids(anon_client.get("/api/v1/library/books", {"sort": "most_attached"})) == [third.pk, second.pk, first.pk]
    counts = {b["id"]: (b["copy_count"], b["attach_count"]) for b in anon_client.get("/api/v1/library/books").json()["results"]}
    assert counts == {first.pk: (2, 0), second.pk: (1, 1), third.pk: (0, 2)}
    bad = anon_client.get("/api/v1/library/books", {"sort": "random"})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "sort"


def test_pagination(tenant_a, anon_client):
    books = [_publish(tenant_a, f"Book {i}") for i in range(5)]
    page = anon_client.get("/api/v1/library/books", {"page_size": 2}).json()
    assert page["count"] == 5 and [b["id"] for b in page["results"]] == [books[4].pk, books[3].pk]
    assert page["next"] and page["previous"] is None
    last = anon_client.get("/api/v1/library/books", {"page_size": 2, "page": 3}).json()
    assert [b["id"] for b in last["results"]] == [books[0].pk]


def test_text_search_over_title_description_tags_and_entry_titles(tenant_a, tenant_b, anon_client):
    coast = _publish(tenant_a, "The Salt Coast", description="Smugglers and storms.", tags=["maritime"])
    forest = _publish(tenant_b, "Thornwood", entry_titles=["Bramble Court", "Lighthouse keeper"])
    shared_book(tenant_a, visibility="unlisted", title="Salt mines")
    search = lambda q: _ids(anon_client.get("/api/v1/library/books", {"q": q}))  # noqa: E731
    assert search("salt") == [coast.pk]
    assert search("smugglers") == [coast.pk]
    assert search("maritime") == [coast.pk]
    assert search("bramble") == [forest.pk]
    assert search("salt bramble") == []  # every word must match
    assert search("dragons") == []
    assert _ids(tenant_b.read_client.get("/api/v1/library/books", {"q": "salt"})) == [coast.pk]


def test_title_matches_rank_above_entry_title_matches(tenant_a, anon_client):
    titled = _publish(tenant_a, "Lighthouse stories")
    inside = _publish(tenant_a, "Harbor tales", entry_titles=["Lighthouse"])  # newer
    _publish(tenant_a, "Unrelated")
    by_relevance = _ids(anon_client.get("/api/v1/library/books", {"q": "lighthouse"}))
    assert by_relevance == [titled.pk, inside.pk]
    newest = _ids(anon_client.get("/api/v1/library/books", {"q": "lighthouse", "sort": "newest"}))
    assert newest == [inside.pk, titled.pk]


@pytest.mark.postgres
def test_postgres_full_text_search_stems_and_reads_web_syntax(tenant_a, tenant_b, anon_client):
    assert connection.vendor == "postgresql"
    ships = _publish(tenant_a, "Sailing ships of the north", language="en")
    barcos = _publish(tenant_b, "Barcos del norte", description="Las naves cruzan los mares helados.", language="es")
    search = lambda **p: _ids(anon_client.get("/api/v1/library/books", p))  # noqa: E731
    assert search(q="ship") == [ships.pk]  # english stemming: ship ~ ships
    assert search(q="sailed") == [ships.pk]
    assert search(q="nave", lang="es") == [barcos.pk]  # the query read in Spanish: nave ~ naves
    assert search(q="north -sailing") == []
    assert search(q='"sailing ships"') == [ships.pk]
    assert set(search(q="norte OR north")) == {ships.pk, barcos.pk}


def test_an_edited_public_book_is_found_by_its_new_title_after_the_sweep(
    tenant_a, anon_client, django_capture_on_commit_callbacks, monkeypatch
):
    monkeypatch.setattr("sharing.services.book_vector_refresh_run", lambda **kwargs: "skipped")
    book = _publish(tenant_a, "Old name")
    book_update(actor=owner_actor(tenant_a), book=book, title="Brand new name")
    _refresh_lost(book)
    assert _ids(anon_client.get("/api/v1/library/books", {"q": "brand"})) == []  # its refresh task was lost
    with django_capture_on_commit_callbacks(execute=True):
        assert shared_books_sweep() == {"refreshed": 1, "translations_resent": 0}
    assert _ids(anon_client.get("/api/v1/library/books", {"q": "brand"})) == [book.pk]
    with django_capture_on_commit_callbacks(execute=True):
        assert shared_books_sweep() == {"refreshed": 0, "translations_resent": 0}  # nothing left behind


def _refresh_lost(book):
    """The refresh the books app asked for was requested 11 minutes ago and never ran (a lost task)."""
    from datetime import timedelta

    from django.utils import timezone

    from sharing.models import BookShare

    BookShare.objects.for_tenant(book.tenant).filter(book=book).update(
        refresh_requested_at=timezone.now() - timedelta(minutes=11)
    )


def test_the_book_page_schedules_a_refresh_once_when_behind(tenant_a, anon_client, django_capture_on_commit_callbacks):
    book = _publish(tenant_a, "Old name")
    book_update(actor=owner_actor(tenant_a), book=book, title="New name")
    _refresh_lost(book)
    with django_capture_on_commit_callbacks() as callbacks:
        assert anon_client.get(f"/api/v1/library/books/{book.pk}").status_code == 200
        assert anon_client.get(f"/api/v1/library/books/{book.pk}").status_code == 200
    assert len(callbacks) == 1


def test_search_by_meaning_works_across_languages(tenant_a, tenant_b, anon_client):
    volcano = _publish(
        tenant_a,
        "Ashenveil Citadel",
        description="A fortress city built inside the crater of an extinct volcano, ruled by Smith-Lords.",
        entry_titles=["Forges", "Lava channels"],
    )
    pirates = _publish(
        tenant_b,
        "Captain Ysolde Varga",
        description="The one-eyed pirate captain of the ship Sea Widow, searching for her lost daughter.",
    )
    _publish(tenant_a, "The Moonwell", description="A sacred spring whose water glows under the full moon.")
    hidden = shared_book(tenant_b, visibility="unlisted", title="Volcano forge city")
    for book in (volcano, pirates, hidden):
        assert book_vector_refresh_run(tenant=book.tenant_id, book_id=book.pk) == "embedded"
    assert book_vector_refresh_run(tenant=volcano.tenant_id, book_id=volcano.pk) == "current"
    response = anon_client.get(
        "/api/v1/library/books", {"q": "¿Qué ciudad fortificada usa el calor de un volcán?", "mode": "meaning"}
    )
    results = response.json()["results"]
    assert [b["id"] for b in results][:1] == [volcano.pk]
    assert hidden.pk not in [b["id"] for b in results]  # unlisted books are never listed
    assert 0 < results[0]["similarity"] <= 1
    assert [b.pk for b in library_search(q="a pirate woman who lost her child", mode="meaning")][:1] == [pirates.pk]
    filtered = anon_client.get("/api/v1/library/books", {"q": "volcano", "mode": "meaning", "language": "fr"})
    assert filtered.json()["results"] == []


def test_book_page_and_entries_are_readable_by_anyone(tenant_a, anon_client):
    book = _publish(tenant_a, "Coast", entry_titles=["First", "Second"], entries=12)
    page = anon_client.get(f"/api/v1/library/books/{book.pk}").json()
    assert (page["id"], page["title"], page["entry_count"], page["visibility"]) == (book.pk, "Coast", 12, "public")
    entries = anon_client.get(f"/api/v1/library/books/{book.pk}/entries", {"page_size": 5}).json()
    assert entries["count"] == 12 and [e["title"] for e in entries["results"][:2]] == ["First", "Second"]
    assert entries["display"]["status"] == "original" and entries["next"]


@pytest.mark.parametrize("visibility", ["unlisted", "private"])
def test_book_page_by_id_is_only_for_public_books(tenant_a, anon_client, visibility):
    book = shared_book(tenant_a, visibility=visibility, entries=2)
    for client in (anon_client, tenant_a.member_client):
        assert client.get(f"/api/v1/library/books/{book.pk}").status_code == 404
        assert client.get(f"/api/v1/library/books/{book.pk}/entries").status_code == 404


@pytest.mark.postgres
def test_pgvector_search_can_use_the_hnsw_index(tenant_a):
    import numpy as np

    from sharing.models import BookVector
    from sharing.selectors import nearest_books_pgvector

    book = _publish(tenant_a, "Indexed")
    BookVector.objects.create(
        tenant=tenant_a.tenant, book=book, model_name="m", dimension=512, content_hash="x",
        embedding=np.ones(512, dtype=np.float32),
    )
    query = nearest_books_pgvector(BookVector.objects.for_tenant(tenant_a.tenant), np.ones(512, dtype=np.float32), 512)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = query.explain()
    assert "sharing_bookvector_hnsw_512" in plan
    assert [row.book_id for row in query] == [book.pk]


def test_the_books_change_hook_refreshes_a_shared_book_once(
    tenant_a, anon_client, django_capture_on_commit_callbacks, monkeypatch
):
    from sharing.services import book_shared_changed

    monkeypatch.setattr("sharing.services.book_vector_refresh_run", lambda **kwargs: "skipped")
    private = shared_book(tenant_a, visibility="private")
    assert book_shared_changed(private) is False  # private books have no library state to refresh
    book = _publish(tenant_a, "Old name")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        # book_update publishes the change after commit (books.events, on every version bump).
        book_update(actor=owner_actor(tenant_a), book=book, title="Renamed")
    assert len(callbacks) >= 1
    book.refresh_from_db()
    assert book_shared_changed(book) is False  # refreshed once already: nothing more to schedule
    assert _ids(anon_client.get("/api/v1/library/books", {"q": "renamed"})) == [book.pk]


def test_responses_match_their_documented_shapes(tenant_a, tenant_b, anon_client, client):
    from sharing.api import serializers as s

    book = _publish(tenant_a, "Shapes")
    page = anon_client.get(f"/api/v1/library/books/{book.pk}").json()
    assert set(page) == set(s.LibraryBookOut().fields) and set(page["display"]) == set(s.DisplayOut().fields)
    listed = anon_client.get("/api/v1/library/books").json()["results"][0]
    assert set(listed) == set(s.LibraryBookOut().fields)
    entries = anon_client.get(f"/api/v1/library/books/{book.pk}/entries").json()
    assert set(entries) == set(s.LibraryEntriesOut().fields)
    assert set(entries["results"][0]) == set(s.LibraryEntryOut().fields)
    sharing = tenant_a.member_client.get(f"/api/v1/books/{book.pk}/sharing").json()
    assert set(sharing) == set(s.SharingOut().fields) and set(sharing["link"]) == set(s.LinkOut().fields)
    copied = tenant_b.admin_client.post("/api/v1/library/copies", {"book_id": book.pk}, format="json").json()
    assert set(copied) == set(s.CopyOut().fields) and set(copied["book"]) == set(s.CopyBookOut().fields)
    assert set(copied["source"]) == set(s.SourceOut().fields)
    assert set(anon_client.get("/api/v1/library/languages").json()) == set(s.LanguagesOut().fields)

    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    for path in (
        "/api/v1/library/books",
        "/api/v1/library/books/{book_id}",
        "/api/v1/library/books/{book_id}/entries",
        "/api/v1/library/links/{token}",
        "/api/v1/library/links/{token}/entries",
        "/api/v1/library/languages",
        "/api/v1/library/copies",
        "/api/v1/books/{book_id}/sharing",
        "/api/v1/books/{book_id}/visibility",
        "/api/v1/books/{book_id}/link/rotate",
    ):
        assert path in schema, path
