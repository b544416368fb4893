"""Bulk enable / disable / delete (≤500, W-12) and bulk create: one transaction, all or nothing."""
from __future__ import annotations

import pytest

from books import services
from books.models import Entry, Profile
from lore_platform.errors import LimitExceeded, NotFound, ValidationFailed
from tests.books.factories import SMART_LORE, entry_count, fill, make_book, make_entry, member_actor, snapshot, version

pytestmark = pytest.mark.django_db


def _ids(book):
    return list(Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position").values_list("pk", flat=True))


def _enabled(book):
    return list(Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position").values_list("enabled", flat=True))


@pytest.mark.parametrize("count,ok", [(499, True), (500, True), (501, False)])
def test_bulk_disable_up_to_500(tenant_a, count, ok):
    book = make_book(tenant_a)
    fill(book, 501)
    ids = _ids(book)[:count]
    before = snapshot(book)
    if ok:
        result = services.entries_bulk_set_enabled(actor=member_actor(tenant_a), book=book, entry_ids=ids, enabled=False)
        assert (result.matched, result.changed, result.version) == (count, count, before[0] + 1)
        assert _enabled(book).count(False) == count
    else:
        with pytest.raises(LimitExceeded) as exc_info:
            services.entries_bulk_set_enabled(actor=member_actor(tenant_a), book=book, entry_ids=ids, enabled=False)
        assert (exc_info.value.field, exc_info.value.rule, exc_info.value.details["limit"]) == ("entry_ids", "W-12", 500)
        assert snapshot(book) == before


@pytest.mark.parametrize("count,ok", [(499, True), (500, True), (501, False)])
def test_bulk_delete_up_to_500(tenant_a, count, ok):
    book = make_book(tenant_a)
    fill(book, 501)
    before = snapshot(book)
    if ok:
        result = services.entries_bulk_delete(actor=member_actor(tenant_a), book=book, entry_ids=_ids(book)[:count])
        assert result.changed == count and entry_count(book) == 501 - count
    else:
        with pytest.raises(LimitExceeded):
            services.entries_bulk_delete(actor=member_actor(tenant_a), book=book, entry_ids=_ids(book)[:count])
        assert snapshot(book) == before


def test_bulk_enable_restores_and_counts_only_changes(tenant_a):
    book = make_book(tenant_a)
    a, b, c = (make_entry(book, enabled=flag) for flag in (True, False, False))
    result = services.entries_bulk_set_enabled(
        actor=member_actor(tenant_a), book=book, entry_ids=[a.pk, b.pk, c.pk], enabled=True
    )
    assert (result.matched, result.changed) == (3, 2)
    assert _enabled(book) == [True, True, True]


def test_bulk_action_with_a_foreign_id_changes_nothing(tenant_a, tenant_b):
    book = make_book(tenant_a)
    fill(book, 5)
    foreign = make_entry(make_book(tenant_b))
    own_other_book = make_entry(make_book(tenant_a, title="Other"))
    before = snapshot(book)
    for stray in (foreign.pk, own_other_book.pk, 10**9):
        with pytest.raises(NotFound) as exc_info:
            services.entries_bulk_delete(actor=member_actor(tenant_a), book=book, entry_ids=[*_ids(book), stray])
        assert exc_info.value.details["missing"] == [stray]
        with pytest.raises(NotFound):
            services.entries_bulk_set_enabled(
                actor=member_actor(tenant_a), book=book, entry_ids=[*_ids(book), stray], enabled=False
            )
    assert snapshot(book) == before
    assert Entry.objects.for_tenant(tenant_b.tenant).filter(pk=foreign.pk).exists()


def test_bulk_create_with_one_bad_entry_writes_nothing_and_names_it(tenant_a):
    book = make_book(tenant_a, profile=Profile.SMART)
    batch = [{"title": f"Entry {i}", "content": SMART_LORE} for i in range(10)]
    batch[7]["content"] = "short"
    before = snapshot(book)
    with pytest.raises(ValidationFailed) as exc_info:
        services.entries_create_bulk(actor=member_actor(tenant_a), book=book, entries=batch)
    assert (exc_info.value.field, exc_info.value.rule) == ("entries[7].content", "W-12")
    assert snapshot(book) == before


def test_bulk_create_failing_mid_write_rolls_back(tenant_a, monkeypatch):
    book = make_book(tenant_a)
    make_entry(book, title="Existing")
    before = snapshot(book)
    def explode(book, entry_ids):
        # The rows are written; a failure after them must undo them all.
        assert len(entry_ids) == 5
        raise RuntimeError("indexing hook failed")

    monkeypatch.setattr(services.versions, "_entries_content_changed", explode)
    with pytest.raises(RuntimeError):
        services.entries_create_bulk(
            actor=member_actor(tenant_a), book=book, entries=[{"content": f"lore {i}"} for i in range(5)]
        )
    assert snapshot(book) == before


def test_bulk_delete_failing_mid_write_rolls_back(tenant_a, monkeypatch):
    book = make_book(tenant_a)
    fill(book, 6)
    before = snapshot(book)

    def explode(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(services.versions, "book_version_bump", explode)
    with pytest.raises(RuntimeError):
        services.entries_bulk_delete(actor=member_actor(tenant_a), book=book, entry_ids=_ids(book)[:3])
    assert snapshot(book) == before


# --- through the API --------------------------------------------------------------------------


@pytest.mark.parametrize("action,enabled_after", [("disable", False), ("enable", True)])
def test_api_bulk_enable_disable(tenant_a, action, enabled_after):
    book = make_book(tenant_a)
    fill(book, 4, enabled=not enabled_after)
    ids = _ids(book)[:3]
    response = tenant_a.member_client.post(
        f"/api/v1/books/{book.pk}/entries/bulk", {"action": action, "entry_ids": ids}, format="json"
    )
    assert response.status_code == 200
    assert response.json() == {"action": action, "matched": 3, "changed": 3, "version": version(book)}
    assert _enabled(book) == [enabled_after] * 3 + [not enabled_after]


def test_api_bulk_delete_and_501_refused(tenant_a):
    book = make_book(tenant_a)
    fill(book, 501)
    before = snapshot(book)
    response = tenant_a.member_client.post(
        f"/api/v1/books/{book.pk}/entries/bulk", {"action": "delete", "entry_ids": _ids(book)}, format="json"
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert (error["field"], error["rule"], error["details"]["limit"]) == ("entry_ids", "W-12", 500)
    assert snapshot(book) == before
    response = tenant_a.member_client.post(
        f"/api/v1/books/{book.pk}/entries/bulk", {"action": "delete", "entry_ids": _ids(book)[:500]}, format="json"
    )
    assert response.status_code == 200 and response.json()["changed"] == 500
    assert entry_count(book) == 1


def test_api_bulk_create(tenant_a):
    book = make_book(tenant_a, profile=Profile.SMART)
    make_entry(book, title="First")
    response = tenant_a.member_client.post(
        f"/api/v1/books/{book.pk}/entries/bulk-create",
        {"entries": [{"title": "Varn", "content": SMART_LORE, "canon": True}, {"title": "Sal", "content": SMART_LORE}]},
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert [(e["title"], e["position"], e["canon"]) for e in body["entries"]] == [("Varn", 1, True), ("Sal", 2, False)]
    assert body["version"] == version(book)


def test_api_bulk_create_error_names_the_entry(tenant_a):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER)
    before = snapshot(book)
    response = tenant_a.admin_client.post(
        f"/api/v1/books/{book.pk}/entries/bulk-create",
        {"entries": [{"content": "fine"}, {"content": "x" * 4001}]},
        format="json",
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert (error["field"], error["rule"], error["details"]["limit"]) == ("entries[1].content", "S-3", 4000)
    assert snapshot(book) == before
