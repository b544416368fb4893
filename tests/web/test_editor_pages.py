"""The book editor through Django's test client (issue 15, points 4 and 8): bulk actions and their
limit, warnings on rows, the indexing state's poll, reordering, the entry form per profile with the
services' messages and rule IDs inline, CSRF and tenant isolation.

Browser checks of the same pages (htmx poll, drag, axe) are in test_editor_browser.py.
"""
from __future__ import annotations

import re

import pytest
from django.test import Client

from books.models import Book, Entry, IndexingState, Profile, Scope
from sharing.services import book_visibility_set
from tests.books.factories import fill, make_book, make_entry, member_actor
from tests.web.support import signed_in

pytestmark = pytest.mark.django_db

LORE = "La ciudad fluvial de Varn comercia sal por hierro cada primavera."


def html(response) -> str:
    return response.content.decode()


def entries_of(book: Book) -> list[Entry]:
    return list(Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position", "id"))


def row(page: str, entry: Entry) -> str:
    """The editor's table row of ``entry``."""
    match = re.search(rf'<tr data-entry="{entry.pk}".*?</tr>', page, re.DOTALL)
    assert match, f"no row for entry {entry.pk}"
    return match.group(0)


def field_error(page: str, name: str) -> str:
    """The inline error shown next to form field ``name`` ('' when none)."""
    match = re.search(rf'<p class="error" id="id_{name}-error"[^>]*>([^<]*)</p>', page)
    return match.group(1) if match else ""


# --- bulk enable / disable / delete ------------------------------------------------------------


def test_bulk_disable_enable_and_delete_the_ticked_entries(tenant_a):
    book = make_book(tenant_a, title="World", profile="smart")
    fill(book, 5)
    one, two, three, four, five = entries_of(book)
    owner = signed_in(tenant_a.member)
    back = f"/books/{book.pk}"
    done = owner.post(f"/books/{book.pk}/entries/bulk",
                      {"bulk": "disable", "entry": [one.pk, two.pk], "next": back}, follow=True)
    assert "2 entries changed." in html(done)
    assert [e.enabled for e in entries_of(book)] == [False, False, True, True, True]
    assert 'class="disabled"' in row(html(done), one) and 'class="disabled"' not in row(html(done), three)
    owner.post(f"/books/{book.pk}/entries/bulk", {"bulk": "enable", "entry": [two.pk], "next": back})
    assert [e.enabled for e in entries_of(book)] == [False, True, True, True, True]
    owner.post(f"/books/{book.pk}/entries/bulk", {"bulk": "delete", "entry": [three.pk, four.pk], "next": back})
    assert [e.pk for e in entries_of(book)] == [one.pk, two.pk, five.pk]
    assert [e.position for e in entries_of(book)] == [0, 1, 2]  # the list closes up


def test_bulk_refuses_more_than_500_entries_whole_naming_w12(tenant_a):
    book = make_book(tenant_a, title="Big", profile="smart")
    fill(book, 501)
    ids = [e.pk for e in entries_of(book)]
    owner = signed_in(tenant_a.member)
    refused = owner.post(f"/books/{book.pk}/entries/bulk", {"bulk": "disable", "entry": ids}, follow=True)
    assert refused.status_code == 200 and "W-12" in html(refused) and "500" in html(refused)
    assert all(e.enabled for e in entries_of(book))  # nothing changed
    owner.post(f"/books/{book.pk}/entries/bulk", {"bulk": "disable", "entry": ids[:500]})
    assert sum(not e.enabled for e in entries_of(book)) == 500


def test_bulk_delete_below_ten_entries_of_a_public_book_is_refused(tenant_a):
    book = make_book(tenant_a, title="Shared", profile="smart")
    fill(book, 10)
    book_visibility_set(actor=member_actor(tenant_a), book=book, visibility="public")
    owner = signed_in(tenant_a.member)
    first = entries_of(book)[0]
    refused = owner.post(f"/books/{book.pk}/entries/bulk", {"bulk": "delete", "entry": [first.pk]}, follow=True)
    assert "P-1" in html(refused) and len(entries_of(book)) == 10


# --- warnings on rows ---------------------------------------------------------------------------


def test_rows_show_the_warnings_of_their_entries(tenant_a):
    world = make_book(tenant_a, title="World", profile="smart")
    used = make_entry(world, title="Varn", content=LORE, usage_count=3)
    long = make_entry(world, title="Crónica", content="La crónica de la ciudad y de sus reyes. " * 200)
    multi = make_entry(world, title="Dos temas",
                       content="# Varn\nLa ciudad fluvial comercia sal.\n\n# Lira\nEl bosque canta con el viento.")
    never = make_entry(world, title="Olvidada", content=LORE + " Nadie la nombra.")
    slow = make_entry(world, title="Lenta", content=LORE + " Tiene una clave lenta.",
                      regex_overruns={"/(a+)+$/": "took longer than 50 ms"})
    page = html(signed_in(tenant_a.member).get(f"/books/{world.pk}"))
    assert 'data-warning="long_entry"' in row(page, long)
    assert 'data-warning="multi_topic"' in row(page, multi)
    assert 'data-warning="never_surfaced"' in row(page, never)  # the book is in use: Varn was used
    assert 'data-warning="regex_timeout"' in row(page, slow) and "C-5" in row(page, slow)
    assert "data-warning" not in row(page, used)

    classic = make_book(tenant_a, title="Keys", profile="classic")
    odd = make_entry(classic, title="Rara", content="@@brillar\nVarn brilla de noche.")
    plain = make_entry(classic, title="Normal", content="@@scan_depth 2\nVarn comercia sal.")
    page = html(signed_in(tenant_a.member).get(f"/books/{classic.pk}"))
    assert 'data-warning="unknown_decorator"' in row(page, odd) and "C-13" in row(page, odd)
    assert "data-warning" not in row(page, plain)


# --- the indexing state refreshes itself --------------------------------------------------------


def test_pending_rows_poll_with_htmx_until_indexed(tenant_a):
    book = make_book(tenant_a, title="World", profile="smart")
    entry = make_entry(book, title="Varn", content=LORE, indexing_state=IndexingState.PENDING)
    owner = signed_in(tenant_a.member)
    page = html(owner.get(f"/books/{book.pk}"))
    assert 'hx-trigger="every 2s"' in page
    poll = re.search(r'hx-get="([^"]+)"', page).group(1).replace("&amp;", "&")
    assert "Indexing for smart retrieval…" in row(page, entry)
    # The poll answers the list alone (no page around it) …
    part = html(owner.get(poll, HTTP_HX_REQUEST="true"))
    assert part.lstrip().startswith("<form") and "<html" not in part
    # … and stops once nothing on the page is pending.
    Entry.objects.for_tenant(tenant_a.tenant).filter(pk=entry.pk).update(indexing_state=IndexingState.INDEXED)
    part = html(owner.get(poll, HTTP_HX_REQUEST="true"))
    assert "hx-trigger" not in part and "Indexing for smart retrieval…" not in part
    assert "Enabled" in row(part, entry)


def test_a_disabled_entry_does_not_keep_the_list_polling(tenant_a):
    book = make_book(tenant_a, title="World", profile="smart")
    make_entry(book, title="Varn", content=LORE, enabled=False, indexing_state=IndexingState.PENDING)
    assert "hx-trigger" not in html(signed_in(tenant_a.member).get(f"/books/{book.pk}"))


# --- reorder ----------------------------------------------------------------------------------


def test_drop_on_a_row_and_move_to_top_or_bottom_persist_the_order(tenant_a):
    book = make_book(tenant_a, title="World", profile="smart")
    a, b, c, d = (make_entry(book, title=t, content=LORE) for t in ("Uno", "Dos", "Tres", "Cuatro"))
    owner = signed_in(tenant_a.member)
    # What editor.js posts when a row is dropped on the third row (its data-position).
    page = html(owner.get(f"/books/{book.pk}"))
    assert 'data-position="2"' in row(page, c) and 'draggable="true"' in row(page, c)
    owner.post(f"/books/{book.pk}/entries/{a.pk}/move", {"position": "2"})
    assert [e.title for e in entries_of(book)] == ["Dos", "Tres", "Uno", "Cuatro"]
    owner.post(f"/books/{book.pk}/entries/{d.pk}/move", {"to": "top"})
    owner.post(f"/books/{book.pk}/entries/{b.pk}/move", {"to": "bottom"})
    assert [e.title for e in entries_of(book)] == ["Cuatro", "Tres", "Uno", "Dos"]
    page = html(owner.get(f"/books/{book.pk}"))
    assert page.index(">Cuatro<") < page.index(">Tres<") < page.index(">Uno<") < page.index(">Dos<")


def test_rows_are_not_draggable_in_a_filtered_or_sorted_list(tenant_a):
    book = make_book(tenant_a, title="World", profile="smart")
    entry = make_entry(book, title="Varn", content=LORE)
    owner = signed_in(tenant_a.member)
    assert 'draggable="true"' not in row(html(owner.get(f"/books/{book.pk}?sort=title")), entry)
    assert 'draggable="true"' not in row(html(owner.get(f"/books/{book.pk}?q=Varn")), entry)


# --- the entry form, per profile --------------------------------------------------------------


def form_fields(page: str) -> set[str]:
    form = page[page.index('class="card entry-form"'):]
    form = form[:form.index("</form>")]
    # ``version`` is the hidden version the form was loaded with (issue 27), not an entry field.
    return set(re.findall(r'name="([a-z_]+)"', form)) - {"csrfmiddlewaretoken", "next", "version"}


def _loaded_version(page: str) -> str:
    found = re.search(r'<input type="hidden" name="version" value="(\d+)"', page)
    assert found, "the entry form carries the version it was loaded with"
    return found.group(1)


def test_two_tabs_editing_one_entry_the_stale_save_is_told_and_overwrites_nothing(tenant_a):
    book = make_book(tenant_a, title="World", profile="smart")
    entry = make_entry(book, title="Varn", content=LORE, keys=["la ciudad"])
    owner = signed_in(tenant_a.member)
    url = f"/books/{book.pk}/entries/{entry.pk}"
    first_tab, second_tab = _loaded_version(html(owner.get(url))), _loaded_version(html(owner.get(url)))
    saved = owner.post(url, {"title": "Varn", "content": LORE + " Tab one.", "keys": "la ciudad", "enabled": "on",
                             "version": first_tab})
    assert saved.status_code == 302
    stale = owner.post(url, {"title": "Varn", "content": LORE + " Tab two.", "keys": "la ciudad", "enabled": "on",
                             "version": second_tab})
    assert stale.status_code == 412
    page = html(stale)
    assert "changed in another tab or by someone else" in page
    assert "Tab two&#x27;s lore." in page or LORE + " Tab two." in page  # what they typed is still there
    assert _loaded_version(page) == second_tab  # saving again is refused again until they reload
    entry.refresh_from_db()
    assert entry.content == LORE + " Tab one."
    # Reloaded, the save goes through.
    fresh = _loaded_version(html(owner.get(url)))
    assert fresh != second_tab
    assert owner.post(url, {"title": "Varn", "content": LORE + " Tab two.", "keys": "la ciudad", "enabled": "on",
                            "version": fresh}).status_code == 302
    entry.refresh_from_db()
    assert entry.content == LORE + " Tab two."


def test_each_row_opens_its_entry_form_and_saving_goes_through_the_service(tenant_a):
    book = make_book(tenant_a, title="World", profile="smart")
    entry = make_entry(book, title="Varn", content=LORE, keys=["la ciudad"])
    owner = signed_in(tenant_a.member)
    link = re.search(r'<a href="([^"]+)" data-testid="entry-link">Varn<', html(owner.get(f"/books/{book.pk}")))
    assert link and link.group(1) == f"/books/{book.pk}/entries/{entry.pk}"
    page = html(owner.get(link.group(1)))
    assert form_fields(page) == {"title", "content", "keys", "canon", "enabled"}  # smart: canon and aliases
    assert "Aliases" in page and "la ciudad</textarea>" in page
    saved = owner.post(link.group(1), {"title": "Varn del Río", "content": LORE, "keys": "la ciudad\nel puerto",
                                       "canon": "on", "enabled": "on", "next": f"/books/{book.pk}?page=1"})
    assert saved.status_code == 302 and saved["Location"] == f"/books/{book.pk}?page=1"
    entry.refresh_from_db()
    assert (entry.title, entry.keys, entry.constant, entry.enabled) == ("Varn del Río", ["la ciudad", "el puerto"],
                                                                      True, True)
    owner.post(link.group(1), {"title": "Varn del Río", "content": LORE, "keys": ""})  # unticked: off
    entry.refresh_from_db()
    assert (entry.constant, entry.enabled, entry.keys) == (False, False, [])


def test_classic_form_has_keys_and_activation_settings_and_saves_them(tenant_a):
    book = make_book(tenant_a, title="Keys", profile="classic")
    entry = make_entry(book, title="Varn", content=LORE, keys=["varn"])
    owner = signed_in(tenant_a.member)
    page = html(owner.get(f"/books/{book.pk}/entries/{entry.pk}"))
    assert form_fields(page) == {"title", "content", "keys", "secondary_keys", "secondary_logic", "selective",
                                 "key_expression", "constant", "enabled", "order", "priority", "probability", "scan_depth",
                                 "case_sensitive", "whole_words", "role"}
    owner.post(f"/books/{book.pk}/entries/{entry.pk}", {
        "title": "Varn", "content": "@@scan_depth 2\n" + LORE, "keys": "varn, río\n/ciudad\\s+fluvial/i",
        "secondary_keys": "sal", "secondary_logic": "not_any", "selective": "on", "enabled": "on",
        "order": "50", "priority": "3", "probability": "75", "scan_depth": "4", "case_sensitive": "true",
        "whole_words": "", "role": "assistant"})
    entry.refresh_from_db()
    assert entry.keys == ["varn", "río", "/ciudad\\s+fluvial/i"] and entry.secondary_keys == ["sal"]
    assert (entry.secondary_logic, entry.order, entry.priority, entry.probability, entry.scan_depth) == (
        "not_any", 50, 3, 75, 4)
    assert (entry.case_sensitive, entry.whole_words, entry.role) == (True, None, "assistant")
    # Decorators are shown on the form, read by the same parser as the engine.
    assert 'data-decorator="scan_depth"' in html(owner.get(f"/books/{book.pk}/entries/{entry.pk}"))


def test_server_channels_and_collection_toggle_are_for_admins_only(tenant_a):
    persona = make_book(tenant_a, owner=None, title="Persona", profile="server", scope=Scope.PERSONA)
    entry = make_entry(persona, title="Varn", content=LORE, keys=["varn"])
    admin, member = signed_in(tenant_a.admin), signed_in(tenant_a.member)
    admin_page = html(admin.get(f"/books/{persona.pk}/entries/{entry.pk}"))
    assert "channels" in form_fields(admin_page) and "placement" in form_fields(admin_page)
    member_page = member.get(f"/books/{persona.pk}/entries/{entry.pk}")
    assert member_page.status_code == 200  # members read the lore (S-1) …
    assert "channels" not in form_fields(html(member_page)) and "Save entry" not in html(member_page)
    refused = member.post(f"/books/{persona.pk}/entries/{entry.pk}", {"title": "Mine", "content": LORE})
    assert refused.status_code == 403 and "S-1" in html(refused)  # … and never edit it
    admin.post(f"/books/{persona.pk}/entries/{entry.pk}", {
        "title": "Varn", "content": LORE, "keys": "varn", "channels": "123\n456", "enabled": "on",
        "secondary_logic": "and_any", "placement": "before_persona", "order": "100"})
    entry.refresh_from_db()
    assert entry.channels == ["123", "456"] and entry.placement == "before_persona"

    collection = make_book(tenant_a, owner=None, title="Server", profile="server", scope=Scope.SERVER)
    assert 'name="active"' in html(admin.get(f"/books/{collection.pk}"))
    assert 'name="active"' not in html(member.get(f"/books/{collection.pk}"))
    assert member.post(f"/books/{collection.pk}/active", {}).status_code == 403
    admin.post(f"/books/{collection.pk}/active", {})  # unticked: off (S-12)
    assert Book.objects.for_tenant(tenant_a.tenant).get(pk=collection.pk).active is False


def test_a_member_own_server_book_has_no_channels(tenant_a):
    book = make_book(tenant_a, title="Mine", profile="server")
    entry = make_entry(book, title="Varn", content=LORE)
    assert "channels" not in form_fields(html(signed_in(tenant_a.member).get(f"/books/{book.pk}/entries/{entry.pk}")))


def test_inline_errors_carry_the_services_message_and_rule(tenant_a):
    world = make_book(tenant_a, title="World", profile="smart")
    entry = make_entry(world, title="Varn", content=LORE)
    owner = signed_in(tenant_a.member)
    refused = owner.post(f"/books/{world.pk}/entries/{entry.pk}", {"title": "V", "content": LORE, "enabled": "on"})
    assert refused.status_code == 400 and "W-12" in field_error(html(refused), "title")
    entry.refresh_from_db()
    assert entry.title == "Varn"

    classic = make_book(tenant_a, title="Keys", profile="classic")
    entry = make_entry(classic, title="Varn", content=LORE)
    url = f"/books/{classic.pk}/entries/{entry.pk}"
    base = {"title": "Varn", "content": LORE, "enabled": "on", "secondary_logic": "and_any", "role": "system"}
    page = html(owner.post(url, {**base, "probability": "150"}))
    assert "S-6" in field_error(page, "probability") and "150" in field_error(page, "probability")
    page = html(owner.post(url, {**base, "order": "pronto"}))
    assert "whole number" in field_error(page, "order")
    page = html(owner.post(url, {**base, "content": "@@probability 150\n" + LORE}))
    assert "C-13" in field_error(page, "content")
    page = html(owner.post(url, {**base, "keys": "\n".join(f"k{i}" for i in range(501))}))
    assert "500" in field_error(page, "keys")
    entry.refresh_from_db()
    assert (entry.probability, entry.order, entry.content, entry.keys) == (None, 100, LORE, [])
    # The add form is the same form: the same message in the same place.
    added = owner.post(f"/books/{classic.pk}/entries", {**base, "probability": "150"})
    assert added.status_code == 400 and "S-6" in field_error(html(added), "probability")


def test_delete_an_entry_from_its_form(tenant_a):
    book = make_book(tenant_a, title="World", profile="smart")
    keep, gone = make_entry(book, title="Uno", content=LORE), make_entry(book, title="Dos", content=LORE)
    owner = signed_in(tenant_a.member)
    page = html(owner.get(f"/books/{book.pk}/entries/{gone.pk}"))
    assert f'action="/books/{book.pk}/entries/{gone.pk}/delete"' in page
    done = owner.post(f"/books/{book.pk}/entries/{gone.pk}/delete", {"next": f"/books/{book.pk}"}, follow=True)
    assert "Entry deleted." in html(done) and [e.pk for e in entries_of(book)] == [keep.pk]


def test_deleting_below_ten_entries_of_a_public_book_is_refused_on_the_form(tenant_a):
    book = make_book(tenant_a, title="Shared", profile="smart")
    fill(book, 10)
    book_visibility_set(actor=member_actor(tenant_a), book=book, visibility="public")
    entry = entries_of(book)[0]
    refused = signed_in(tenant_a.member).post(f"/books/{book.pk}/entries/{entry.pk}/delete", follow=True)
    assert "P-1" in html(refused) and len(entries_of(book)) == 10


# --- CSRF and tenant isolation ------------------------------------------------------------------


def test_the_editor_forms_need_their_csrf_token(tenant_a):
    book = make_book(tenant_a, owner=None, title="Server", profile="server", scope=Scope.SERVER)
    entry = make_entry(book, title="Varn", content=LORE)
    client = signed_in(tenant_a.admin, csrf=True)
    for path in (f"/books/{book.pk}/entries/{entry.pk}", f"/books/{book.pk}/entries/{entry.pk}/delete",
                 f"/books/{book.pk}/active", f"/books/{book.pk}/entries", f"/books/{book.pk}/entries/bulk",
                 f"/books/{book.pk}/entries/{entry.pk}/move"):
        assert client.post(path, {"title": "x", "content": LORE, "bulk": "delete", "entry": [entry.pk],
                                  "to": "top"}).status_code == 403, path
    assert [e.title for e in entries_of(book)] == ["Varn"]
    assert Book.objects.for_tenant(tenant_a.tenant).get(pk=book.pk).active is True
    for page in (f"/books/{book.pk}", f"/books/{book.pk}/entries/{entry.pk}"):
        body = html(client.get(page))
        assert body.count("<form method=\"post\"") == body.count("csrfmiddlewaretoken"), page


def test_another_tenants_book_and_entries_are_404(tenant_a, tenant_b):
    book = make_book(tenant_a, title="Private", profile="classic")
    entry = make_entry(book, title="Varn", content=LORE)
    stranger = signed_in(tenant_b.admin)
    for path in (f"/books/{book.pk}", f"/books/{book.pk}/entries/{entry.pk}"):
        assert stranger.get(path).status_code == 404, path
    for path in (f"/books/{book.pk}/entries/{entry.pk}", f"/books/{book.pk}/entries/{entry.pk}/delete",
                 f"/books/{book.pk}/active", f"/books/{book.pk}/entries/bulk", f"/books/{book.pk}/entries"):
        assert stranger.post(path, {"title": "x", "content": LORE, "bulk": "delete",
                                    "entry": [entry.pk]}).status_code == 404, path
    # Another book's entry through this tenant's own book is 404 too.
    other = make_book(tenant_a, title="Other", profile="classic")
    assert signed_in(tenant_a.member).get(f"/books/{other.pk}/entries/{entry.pk}").status_code == 404
    assert [e.title for e in entries_of(book)] == ["Varn"]
    assert Client().get(f"/books/{book.pk}/entries/{entry.pk}").status_code in (302, 404)


def test_canon_meter_follows_canon_edits(tenant_a):
    """The meter is cached per book version: an edit that changes canon shows at once."""
    book = make_book(tenant_a, title="World", profile="smart")
    entry = make_entry(book, title="Varn", content=LORE)
    owner = signed_in(tenant_a.member)
    meter = re.compile(r'data-testid="canon-meter">[^<]*?(\d+)')
    assert meter.search(html(owner.get(f"/books/{book.pk}"))).group(1) == "0"
    owner.post(f"/books/{book.pk}/entries/{entry.pk}", {"title": "Varn", "content": LORE, "canon": "on",
                                                         "enabled": "on"})
    assert int(meter.search(html(owner.get(f"/books/{book.pk}"))).group(1)) > 0
    owner.post(f"/books/{book.pk}/entries/bulk", {"bulk": "disable", "entry": [entry.pk]})
    assert meter.search(html(owner.get(f"/books/{book.pk}"))).group(1) == "0"


def test_the_editor_page_does_a_fixed_number_of_queries_whatever_the_page_size(tenant_a, django_assert_max_num_queries):
    """No per-row queries: a page of 50 rows costs the queries of a page of one."""
    book = make_book(tenant_a, title="Big", profile=Profile.SMART)
    fill(book, 1)
    owner = signed_in(tenant_a.member)
    owner.get(f"/books/{book.pk}")
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as one:
        owner.get(f"/books/{book.pk}?model=gpt-4o-mini")
    fill(book, 120)
    with CaptureQueriesContext(connection) as many:
        owner.get(f"/books/{book.pk}?model=gpt-4o-mini")
    assert len(many) <= len(one)
