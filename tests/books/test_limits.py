"""Every limit just under, at and just over: refusals name field, limit and rule; nothing is written."""
from __future__ import annotations

import pytest

from books import limits, services
from books.models import Entry, Profile, Scope
from lore_platform.errors import LimitExceeded, ValidationFailed
from retrieval.engine.smart import canon_budget
from tests.books.factories import (
    SMART_LORE,
    admin_actor,
    entry_count,
    fill,
    make_book,
    make_entry,
    member_actor,
    snapshot,
    version,
)

pytestmark = pytest.mark.django_db


def _refused(exc_info, *, field, rule, limit=None, status=None):
    error = exc_info.value
    assert error.field == field
    assert error.rule == rule
    if limit is not None:
        assert error.details.get("limit", error.details.get("max")) == limit
    if status is not None:
        assert error.status == status


# --- book fields (W-12, C-2, C-3) ---------------------------------------------------


@pytest.mark.parametrize(
    "field,value,ok,limit,rule",
    [
        ("title", "t" * 119, True, 120, "W-12"),
        ("title", "t" * 120, True, 120, "W-12"),
        ("title", "t" * 121, False, 120, "W-12"),
        ("description", "d" * 1999, True, 2000, "W-12"),
        ("description", "d" * 2000, True, 2000, "W-12"),
        ("description", "d" * 2001, False, 2000, "W-12"),
        ("tags", [f"tag{i}" for i in range(19)], True, 20, "W-12"),
        ("tags", [f"tag{i}" for i in range(20)], True, 20, "W-12"),
        ("tags", [f"tag{i}" for i in range(21)], False, 20, "W-12"),
        ("tags", ["x" * 49], True, 50, "W-12"),
        ("tags", ["x" * 50], True, 50, "W-12"),
        ("tags", ["x" * 51], False, 50, "W-12"),
    ],
)
def test_book_field_maximums(tenant_a, field, value, ok, limit, rule):
    book = make_book(tenant_a)
    before = snapshot(book)
    actor = member_actor(tenant_a)
    if ok:
        services.book_update(actor=actor, book=book, **{field: value})
        assert version(book) == before[0] + 1
    else:
        with pytest.raises(LimitExceeded) as exc_info:
            services.book_update(actor=actor, book=book, **{field: value})
        expected_field = field if field != "tags" or len(value) > 20 else "tags[0]"
        _refused(exc_info, field=expected_field, rule=rule, limit=limit, status=422)
        assert snapshot(book) == before


def test_book_title_is_required(tenant_a):
    with pytest.raises(ValidationFailed) as exc_info:
        services.book_create(actor=member_actor(tenant_a), title="   ")
    _refused(exc_info, field="title", rule="W-12", status=400)


@pytest.mark.parametrize(
    "field,value,ok,rule",
    [
        ("scan_depth", 0, True, "C-2"),
        ("scan_depth", 100, True, "C-2"),
        ("scan_depth", 101, False, "C-2"),
        ("token_budget", 99, False, "C-3"),
        ("token_budget", 100, True, "C-3"),
        ("token_budget", 32_000, True, "C-3"),
        ("token_budget", 32_001, False, "C-3"),
    ],
)
def test_book_scan_settings_ranges(tenant_a, field, value, ok, rule):
    book = make_book(tenant_a)
    before = snapshot(book)
    if ok:
        assert getattr(services.book_update(actor=member_actor(tenant_a), book=book, **{field: value}), field) == value
    else:
        with pytest.raises(ValidationFailed) as exc_info:
            services.book_update(actor=member_actor(tenant_a), book=book, **{field: value})
        _refused(exc_info, field=field, rule=rule, status=400)
        assert snapshot(book) == before


# --- world-book entries (W-12) -----------------------------------------------------------


@pytest.mark.parametrize(
    "fields,ok,field,rule,exc",
    [
        ({"title": "X"}, False, "title", "W-12", ValidationFailed),
        ({"title": "Xy"}, True, None, None, None),
        ({"title": "x" * 99}, True, None, None, None),
        ({"title": "x" * 100}, True, None, None, None),
        ({"title": "x" * 101}, False, "title", "W-12", LimitExceeded),
        ({"content": "c" * 19}, False, "content", "W-12", ValidationFailed),
        ({"content": "c" * 20}, True, None, None, None),
        ({"content": "c" * 19_999}, True, None, None, None),
        ({"content": "c" * 20_000}, True, None, None, None),
        ({"content": "c" * 20_001}, False, "content", "W-12", LimitExceeded),
        ({"keys": [f"alias {i}" for i in range(49)]}, True, None, None, None),
        ({"keys": [f"alias {i}" for i in range(50)]}, True, None, None, None),
        ({"keys": [f"alias {i}" for i in range(51)]}, False, "keys", "W-12", LimitExceeded),
        ({"keys": ["a" * 119]}, True, None, None, None),
        ({"keys": ["a" * 120]}, True, None, None, None),
        ({"keys": ["a" * 121]}, False, "keys[0]", "W-12", LimitExceeded),
    ],
)
def test_world_book_entry_limits(tenant_a, fields, ok, field, rule, exc):
    book = make_book(tenant_a, profile=Profile.SMART)
    values = {"title": "Varn", "content": SMART_LORE, **fields}
    before = snapshot(book)
    if ok:
        entry = services.entry_create(actor=member_actor(tenant_a), book=book, **values)
        assert entry.pk and entry_count(book) == 1
    else:
        with pytest.raises(exc) as exc_info:
            services.entry_create(actor=member_actor(tenant_a), book=book, **values)
        _refused(exc_info, field=field, rule=rule)
        assert snapshot(book) == before


def test_world_book_entry_update_is_checked_too(tenant_a):
    book = make_book(tenant_a, profile=Profile.SMART)
    entry = make_entry(book)
    before = snapshot(book)
    with pytest.raises(LimitExceeded) as exc_info:
        services.entry_update(actor=member_actor(tenant_a), entry=entry, content="c" * 20_001)
    _refused(exc_info, field="content", rule="W-12", limit=20_000)
    assert snapshot(book) == before


@pytest.mark.parametrize("existing,adding,ok", [(1998, 1, True), (1999, 1, True), (2000, 1, False), (1999, 2, False)])
def test_world_book_holds_2000_entries(tenant_a, existing, adding, ok):
    book = make_book(tenant_a, profile=Profile.SMART)
    fill(book, existing)
    before = snapshot(book)
    batch = [{"title": f"New {i}", "content": SMART_LORE} for i in range(adding)]
    if ok:
        services.entries_create_bulk(actor=member_actor(tenant_a), book=book, entries=batch)
        assert entry_count(book) == existing + adding
    else:
        with pytest.raises(LimitExceeded) as exc_info:
            services.entries_create_bulk(actor=member_actor(tenant_a), book=book, entries=batch)
        _refused(exc_info, field="entries", rule="W-12", limit=2000, status=422)
        assert exc_info.value.details["existing"] == existing
        assert snapshot(book) == before


# --- server lorebooks (S-3, S-14) ----------------------------------------------------------


@pytest.mark.parametrize("length,ok", [(3999, True), (4000, True), (4001, False)])
def test_server_entry_content_is_at_most_4000(tenant_a, length, ok):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER)
    before = snapshot(book)
    if ok:
        services.entry_create(actor=admin_actor(tenant_a), book=book, title="Lore", content="x" * length)
        assert entry_count(book) == 1
    else:
        with pytest.raises(LimitExceeded) as exc_info:
            services.entry_create(actor=admin_actor(tenant_a), book=book, title="Lore", content="x" * length)
        _refused(exc_info, field="content", rule="S-3", limit=4000, status=422)
        assert snapshot(book) == before


@pytest.mark.parametrize("existing,ok", [(248, True), (249, True), (250, False)])
def test_persona_lineage_holds_250_entries(tenant_a, existing, ok):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER, scope=Scope.PERSONA)
    fill(book, existing)
    before = snapshot(book)
    if ok:
        services.entry_create(actor=admin_actor(tenant_a), book=book, title="One more", content="lore")
        assert entry_count(book) == existing + 1
    else:
        with pytest.raises(LimitExceeded) as exc_info:
            services.entry_create(actor=admin_actor(tenant_a), book=book, title="One more", content="lore")
        _refused(exc_info, field="entries", rule="S-14", limit=250)
        assert exc_info.value.details["scope"] == "lineage"
        assert snapshot(book) == before


@pytest.mark.parametrize("existing,ok", [(248, True), (249, True), (250, False)])
def test_server_wide_books_share_250_entries(tenant_a, existing, ok):
    first = make_book(tenant_a, owner=None, profile=Profile.SERVER, title="Factions")
    second = make_book(tenant_a, owner=None, profile=Profile.SERVER, title="Places")
    fill(first, existing // 2)
    fill(second, existing - existing // 2)
    before = (snapshot(first), snapshot(second))
    if ok:
        services.entry_create(actor=admin_actor(tenant_a), book=second, title="One more", content="lore")
        assert entry_count(first) + entry_count(second) == existing + 1
    else:
        with pytest.raises(LimitExceeded) as exc_info:
            services.entry_create(actor=admin_actor(tenant_a), book=first, title="One more", content="lore")
        _refused(exc_info, field="entries", rule="S-14", limit=250)
        assert exc_info.value.details["scope"] == "server_wide"
        assert (snapshot(first), snapshot(second)) == before


def test_persona_and_server_wide_limits_are_separate(tenant_a, make_tenant):
    server_wide = make_book(tenant_a, owner=None, profile=Profile.SERVER)
    persona = make_book(tenant_a, owner=None, profile=Profile.SERVER, scope=Scope.PERSONA)
    other_persona = make_book(tenant_a, owner=None, profile=Profile.SERVER, scope=Scope.PERSONA)
    fill(server_wide, 250)
    fill(persona, 250)
    # A full server-wide pool and a full persona leave another persona untouched …
    services.entry_create(actor=admin_actor(tenant_a), book=other_persona, title="Mine", content="lore")
    # … and another tenant's pool is its own.
    tenant_c = make_tenant("Gamma")
    services.entry_create(
        actor=admin_actor(tenant_c), book=make_book(tenant_c, owner=None, profile=Profile.SERVER), title="T", content="x"
    )
    assert entry_count(other_persona) == 1


def test_server_bulk_import_over_the_limit_writes_nothing(tenant_a):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER, scope=Scope.PERSONA)
    fill(book, 200)
    before = snapshot(book)
    batch = [{"title": f"Imported {i}", "content": "lore"} for i in range(51)]
    with pytest.raises(LimitExceeded) as exc_info:
        services.entries_create_bulk(actor=admin_actor(tenant_a), book=book, entries=batch)
    _refused(exc_info, field="entries", rule="S-14", limit=250)
    assert exc_info.value.details == {
        "limit": 250, "actual": 251, "existing": 200, "adding": 51, "scope": "lineage", "unit": "entries"
    }
    assert snapshot(book) == before
    services.entries_create_bulk(actor=admin_actor(tenant_a), book=book, entries=batch[:50])
    assert entry_count(book) == 250


@pytest.mark.parametrize(
    "profile,value,ok,rule",
    [
        (Profile.SERVER, 0, False, "S-5"),
        (Profile.SERVER, 1, True, "S-5"),
        (Profile.SERVER, 100, True, "S-5"),
        (Profile.SERVER, 101, False, "S-5"),
        (Profile.CLASSIC, 0, True, "C-2"),
        (Profile.CLASSIC, 101, False, "C-2"),
    ],
)
def test_entry_scan_depth_range(tenant_a, profile, value, ok, rule):
    owner = None if profile == Profile.SERVER else "member"
    book = make_book(tenant_a, owner=owner, profile=profile)
    actor = admin_actor(tenant_a) if owner is None else member_actor(tenant_a)
    if ok:
        assert services.entry_create(actor=actor, book=book, content="lore", scan_depth=value).scan_depth == value
    else:
        with pytest.raises(ValidationFailed) as exc_info:
            services.entry_create(actor=actor, book=book, content="lore", scan_depth=value)
        _refused(exc_info, field="scan_depth", rule=rule, status=400)
        assert entry_count(book) == 0


@pytest.mark.parametrize("value,ok", [(-1, False), (0, True), (100, True), (101, False), (None, True)])
def test_probability_range(tenant_a, value, ok):
    book = make_book(tenant_a)
    if ok:
        assert services.entry_create(actor=member_actor(tenant_a), book=book, probability=value).probability == value
    else:
        with pytest.raises(ValidationFailed) as exc_info:
            services.entry_create(actor=member_actor(tenant_a), book=book, probability=value)
        _refused(exc_info, field="probability", rule="S-6", status=400)
        assert entry_count(book) == 0


def test_classic_books_have_no_content_cap(tenant_a):
    book = make_book(tenant_a)
    entry = services.entry_create(actor=member_actor(tenant_a), book=book, content="x" * 50_000)
    assert entry.pk and len(entry.content) == 50_000


def test_classic_and_sillytavern_books_hold_20000_entries(tenant_a):
    # Issue 29: one turn may activate every entry of a book, so the cap bounds the worst turn.
    tavern = make_book(tenant_a, profile=Profile.SILLYTAVERN)
    capacity = limits.entry_capacity(tavern)
    assert capacity is not None and (capacity.limit.value, capacity.limit.rule, capacity.used) == (20_000, "C-5", 0)
    book = make_book(tenant_a, profile=Profile.CLASSIC)
    fill(book, 19_998)
    services.entries_create_bulk(actor=member_actor(tenant_a), book=book, entries=[{"content": "one more"}])
    assert entry_count(book) == 19_999
    before = snapshot(book)
    with pytest.raises(LimitExceeded) as exc_info:
        services.entries_create_bulk(
            actor=member_actor(tenant_a), book=book, entries=[{"content": "a"}, {"content": "b"}]
        )
    _refused(exc_info, field="entries", rule="C-5", limit=20_000, status=422)
    assert exc_info.value.details["existing"] == 19_999 and exc_info.value.details["adding"] == 2
    assert snapshot(book) == before
    services.entry_create(actor=member_actor(tenant_a), book=book, content="the last one")
    response = tenant_a.member_client.post(
        f"/api/v1/books/{book.pk}/entries", {"title": "Over", "content": "one too many"}, format="json"
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert (error["code"], error["field"], error["rule"]) == ("limit_exceeded", "entries", "C-5")
    assert "20,001" in error["message"] and "20,000" in error["message"]
    assert entry_count(book) == 20_000


@pytest.mark.parametrize("size,ok", [(499, True), (500, True), (501, False)])
def test_one_batch_creates_at_most_500_entries(tenant_a, size, ok):
    book = make_book(tenant_a)
    batch = [{"title": f"E{i}", "content": "lore"} for i in range(size)]
    if ok:
        assert len(services.entries_create_bulk(actor=member_actor(tenant_a), book=book, entries=batch)) == size
    else:
        with pytest.raises(LimitExceeded) as exc_info:
            services.entries_create_bulk(actor=member_actor(tenant_a), book=book, entries=batch)
        _refused(exc_info, field="entries", rule="I-3", limit=500)
        assert entry_count(book) == 0


@pytest.mark.parametrize("window,budget", [(8_000, 800), (39_999, 3_999), (40_000, 4_000), (200_000, 4_000)])
def test_canon_budget_is_10_percent_capped_at_4000(window, budget):
    assert canon_budget(window) == budget


# --- the API names field, limit and rule ---------------------------------------------------


def test_api_limit_error_body(tenant_a):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER)
    response = tenant_a.admin_client.post(
        f"/api/v1/books/{book.pk}/entries", {"title": "Lore", "content": "x" * 4001}, format="json"
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "limit_exceeded"
    assert error["field"] == "content"
    assert error["rule"] == "S-3"
    assert error["details"] == {"limit": 4000, "actual": 4001, "unit": "characters"}
    assert "4,000" in error["message"]
    assert not Entry.objects.for_tenant(tenant_a.tenant).exists()


def test_api_too_short_is_400_with_rule(tenant_a):
    book = make_book(tenant_a, profile=Profile.SMART)
    response = tenant_a.member_client.post(
        f"/api/v1/books/{book.pk}/entries", {"title": "Varn", "content": "too short"}, format="json"
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["field"], error["rule"], error["details"]["min"]) == ("content", "W-12", 20)
    assert entry_count(book) == 0


def test_api_book_title_too_long(tenant_a):
    response = tenant_a.member_client.post("/api/v1/books", {"title": "t" * 121}, format="json")
    assert response.status_code == 422
    error = response.json()["error"]
    assert (error["field"], error["rule"], error["details"]["limit"]) == ("title", "W-12", 120)
