"""Search by meaning that means something (issue 28, point 3): a relevance floor, fused ranking, and a
note while books are still being indexed."""
from __future__ import annotations

import pytest

from sharing.selectors import fuse_rankings, library_search
from sharing.services import book_vector_refresh_run, book_visibility_set
from tests.books.factories import fill, make_book, make_entry
from tests.sharing.helpers import owner_actor

pytestmark = pytest.mark.django_db


def _publish(setup, title, *, description="", entry_titles=(), embed=True):
    book = make_book(setup, owner="member", title=title, description=description)
    for name in entry_titles:
        make_entry(book, title=name)
    fill(book, max(0, 10 - len(entry_titles)))
    book_visibility_set(actor=owner_actor(setup), book=book, visibility="public")
    if embed:
        assert book_vector_refresh_run(tenant=book.tenant_id, book_id=book.pk) == "embedded"
    book.refresh_from_db()
    return book


@pytest.fixture
def shelf(tenant_a, tenant_b):
    return {
        "fallout": _publish(tenant_a, "Fallout New Vegas", entry_titles=[
            "The Mojave Wasteland", "NCR, New California Republic", "Caesar's Legion", "Great Khans", "Fiends"]),
        "sherlock": _publish(tenant_b, "nai_generated_sherlock_v4", entry_titles=[
            "A Study in Scarlet (1887)", "The Sign of the Four (1890)", "The Hound of the Baskervilles"]),
        # Books whose vector text is nearly nothing: close to any query, gibberish included.
        "bare": _publish(tenant_a, "kobold_story_aid_ewijson_keys"),
        "blank": _publish(tenant_b, "user_blank_entry_astra_q"),
        "ripple": _publish(tenant_a, "nai_ripple_v4", entry_titles=["Rome Burning"]),
    }


def test_a_query_that_matches_nothing_returns_nothing_and_says_so(shelf, anon_client):
    response = anon_client.get("/api/v1/library/books", {"q": "zzqx unrelated gibberish", "mode": "meaning"})
    assert response.status_code == 200
    body = response.json()
    assert (body["count"], body["results"]) == (0, [])
    assert body["indexing_incomplete"] is False and body["indexing"] == {"indexed": 5, "total": 5}
    page = anon_client.get("/library", {"q": "zzqx unrelated gibberish", "mode": "meaning"}).content.decode()
    assert "No book matches." in page and "0 books" in page


def test_meaning_still_finds_what_a_query_is_about(shelf):
    found = [b.pk for b in library_search(q="post-apocalyptic wasteland with mutants", mode="meaning")]
    assert found[:1] == [shelf["fallout"].pk]
    assert shelf["bare"].pk not in found and shelf["blank"].pk not in found
    sherlock = [b.pk for b in library_search(q="Sherlock Holmes detective in London", mode="meaning")]
    assert sherlock[:1] == [shelf["sherlock"].pk]


def test_every_word_of_the_query_in_the_text_is_found_even_below_the_floor(shelf):
    # A title typed in meaning mode: the words find it, whatever the vector says.
    assert [b.pk for b in library_search(q="kobold_story_aid_ewijson_keys", mode="meaning")][:1] == [shelf["bare"].pk]


def test_reciprocal_rank_fusion_rewards_agreement():
    assert fuse_rankings([[1, 2, 3], [2, 9]], k=60)[:1] == [2]  # in both lists beats first in one
    assert fuse_rankings([[1], []]) == [1]


def test_the_answer_and_the_page_say_while_books_are_still_being_indexed(tenant_a, anon_client):
    _publish(tenant_a, "Fallout New Vegas", entry_titles=["The Mojave Wasteland"])
    _publish(tenant_a, "Fallout - Western United States", entry_titles=["Mr. Handy", "Colorado"], embed=False)
    body = anon_client.get("/api/v1/library/books", {"q": "wasteland", "mode": "meaning"}).json()
    assert body["indexing_incomplete"] is True and body["indexing"] == {"indexed": 1, "total": 2}
    page = anon_client.get("/library", {"q": "wasteland", "mode": "meaning"}).content.decode()
    assert 'data-testid="indexing-note"' in page and "1 of 2" in page
    # Words search does not wait for vectors: no note.
    text = anon_client.get("/api/v1/library/books", {"q": "wasteland"}).json()
    assert "indexing_incomplete" not in text
