"""A service's refusal as a person sees it on the pages (web.refusals): on the form next
to its field, as one message on the page a view redirects to, or, when missing or forbidden (P-3),
as the page of its own that ``refusals_as_pages`` makes. Through real pages, Django's test client.
"""
from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from books.models import Book, Entry, Profile, Visibility
from cast.services import character_import
from jobs.models import Job
from tests.books.factories import fill, make_book
from tests.jobs import conftest as jobs_fixtures
from tests.web.support import signed_in

no_model = jobs_fixtures.no_model  # the split job then runs the deterministic splitter, queued here

pytestmark = pytest.mark.django_db

NOTES = "# The Drowned Isles\n\n## Saltmarch\nA fishing town on stilts where the tide-priests ring the bells.\n"


def html(response: Any) -> str:
    return response.content.decode()


def error_messages(page: str) -> list[str]:
    """The error messages at the top of a page (Django's messages, as base.html shows them)."""
    return re.findall(r'<p class="msg error">([^<]*)</p>', page)


def field_errors(page: str, field: str) -> list[str]:
    """The errors shown next to one form field (_form.html)."""
    return re.findall(rf'<p class="error" id="id_{field}-error" role="alert">([^<]*)</p>', page)


def split_queued(client: Client, capture: Any) -> Job:
    """A split job started through its page and left queued (its task not run)."""
    with capture(execute=False):
        started = client.post("/jobs/split", {"text": NOTES})
    assert started.status_code == 302, html(started)
    return Job.objects.unscoped().get(pk=int(started["Location"].rsplit("/", 1)[-1]))


def test_a_form_refusal_shows_next_to_its_field_with_its_rule(tenant_a):
    book = make_book(tenant_a, title="World", profile=Profile.SMART)
    owner = signed_in(tenant_a.member)
    refused = owner.post(f"/books/{book.pk}/entries", {"title": "Varn", "content": "too short"})
    assert refused.status_code == 400
    (error,) = field_errors(html(refused), "content")
    assert error.count("W-12") == 1
    assert error_messages(html(refused)) == []  # on the form, not also on top of the page
    assert not Entry.objects.for_tenant(tenant_a.tenant).filter(book=book).exists()


def test_a_form_refusal_without_a_field_of_its_own_shows_on_top_of_the_form_with_its_rule(
    tenant_a, no_model, settings, django_capture_on_commit_callbacks
):
    settings.LOREWEAVE_JOBS_CONCURRENT = 1
    owner = signed_in(tenant_a.member)
    split_queued(owner, django_capture_on_commit_callbacks)
    refused = owner.post("/jobs/split", {"text": NOTES})
    assert refused.status_code == 429
    (error,) = re.findall(r'<div class="errors" role="alert"><p>([^<]*)</p></div>', html(refused))
    # The quota's message does not name its rule: the page adds it, once.
    assert "at most 1 run at once" in error and error.endswith("(A-3)") and error.count("A-3") == 1
    assert Job.objects.for_tenant(tenant_a.tenant).count() == 1


def test_a_form_refusal_of_a_book_i_may_not_read_stays_on_the_form(tenant_a, tenant_b):
    # A 404 the form's input caused (a stale link, W-9) is the field's, at the API's status: not the 404 page.
    other = make_book(tenant_b, title="Theirs", profile=Profile.SMART)
    character = character_import(tenant=tenant_a.tenant, name="Mara")
    owner = signed_in(tenant_a.member)
    refused = owner.post(f"/characters/{character.pk}/attach",
                         {f"character{character.pk}-link_token": f"not-the-link-of-{other.pk}"})
    assert refused.status_code == 404
    page = html(refused)
    (error,) = re.findall(rf'id="id_character{character.pk}-link_token-error" role="alert">([^<]*)<', page)
    assert "link is no longer valid" in error
    assert "Mara" in page  # the characters page, shown again with the form


def test_publishing_too_small_a_book_says_p1_once_on_the_book_page(tenant_a):
    book = make_book(tenant_a, title="Almost", profile=Profile.SMART)
    fill(book, 9)
    owner = signed_in(tenant_a.member)
    refused = owner.post(f"/books/{book.pk}/visibility", {"visibility": "public"}, follow=True)
    assert refused.status_code == 200 and refused.redirect_chain[-1][0] == f"/books/{book.pk}"
    (message,) = error_messages(html(refused))
    assert "at least 10 entries" in message and message.count("P-1") == 1
    assert Book.objects.for_tenant(tenant_a.tenant).get(pk=book.pk).visibility == Visibility.PRIVATE
    assert error_messages(html(owner.get(f"/books/{book.pk}"))) == []  # said once, not again


@pytest.mark.parametrize(("fields", "said"), [
    # Its message names L-1 already: the page used to add "(L-1)" a second time.
    ({"profile": Profile.SMART, "visibility": Visibility.UNLISTED},
     "The living world needs a private book owned by a user (L-1)."),
    # Its message does not: the page adds it.
    ({"profile": Profile.CLASSIC}, "The living world is a world-book feature. (L-1)"),
])
def test_the_living_world_switch_says_its_rule_once(tenant_a, fields, said):
    book = make_book(tenant_a, title="World", **fields)
    owner = signed_in(tenant_a.member)
    refused = owner.post(f"/books/{book.pk}/living-world", {"living_world": "on"}, follow=True)
    assert refused.redirect_chain[-1][0] == f"/books/{book.pk}"
    assert error_messages(html(refused)) == [said]
    assert not Book.objects.for_tenant(tenant_a.tenant).get(pk=book.pk).living_world


def test_a_refused_action_on_a_job_of_another_workspace_is_the_404_page(
    tenant_a, tenant_b, no_model, django_capture_on_commit_callbacks
):
    job = split_queued(signed_in(tenant_b.member), django_capture_on_commit_callbacks)
    mine = signed_in(tenant_a.member)
    for action in ("cancel", "retry"):
        response = mine.post(f"/jobs/{job.pk}/{action}")
        assert response.status_code == 404, action  # P-3: missing and forbidden look alike
        assert error_messages(html(mine.get("/jobs"))) == []  # and no message left for the next page
    assert Job.objects.unscoped().get(pk=job.pk).state == job.state
