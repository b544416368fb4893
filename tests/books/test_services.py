"""Services: the version counter, content hash and indexing state, `extra`, and the canon meter."""
from __future__ import annotations

import pytest

from books import selectors, services
from books.models import Book, Entry, IndexingState, Profile, Scope, content_hash
from lore_platform.errors import ValidationFailed
from tests.books.factories import SMART_LORE, admin_actor, make_book, make_entry, member_actor, version

pytestmark = pytest.mark.django_db


def test_book_create_owned_by_the_actor(tenant_a):
    book = services.book_create(actor=member_actor(tenant_a), title="  Varn  ", tags=["city", "city", " salt "])
    assert (book.title, book.owner_id, book.scope, book.profile, book.version) == (
        "Varn", tenant_a.member.pk, Scope.PERSONAL, Profile.CLASSIC, 1
    )
    assert book.tags == ["city", "salt"]
    assert book.tenant_id == tenant_a.tenant.pk


def test_server_books_are_tenant_owned_and_server_wide_by_default(tenant_a):
    book = services.book_create(actor=admin_actor(tenant_a), title="Factions", profile=Profile.SERVER)
    assert (book.owner_id, book.scope, book.is_tenant_owned) == (None, Scope.SERVER, True)
    with pytest.raises(ValidationFailed) as exc_info:
        services.book_create(actor=admin_actor(tenant_a), title="Mine", profile=Profile.SERVER, scope=Scope.PERSONAL)
    assert exc_info.value.rule == "S-2"


def test_unknown_and_read_only_fields_are_refused(tenant_a):
    book = make_book(tenant_a)
    with pytest.raises(ValidationFailed) as exc_info:
        services.book_update(actor=member_actor(tenant_a), book=book, version=99)
    assert exc_info.value.field == "version"
    with pytest.raises(ValidationFailed) as exc_info:
        services.entry_create(actor=member_actor(tenant_a), book=book, usage_count=5)
    assert exc_info.value.field == "usage_count"


def test_every_change_bumps_the_version_once(tenant_a):
    actor = member_actor(tenant_a)
    book = make_book(tenant_a)
    steps = [
        lambda: services.book_update(actor=actor, book=book, description="Salt and iron."),
        lambda: services.entry_create(actor=actor, book=book, content="first"),
        lambda: services.entries_create_bulk(actor=actor, book=book, entries=[{"content": "a"}, {"content": "b"}]),
        lambda: services.entry_update(actor=actor, entry=_first(book), content="changed"),
        lambda: services.entry_move(actor=actor, entry=_first(book), to="bottom"),
        lambda: services.entries_reorder(actor=actor, book=book, entry_ids=list(reversed(_ids(book)))),
        lambda: services.entries_bulk_set_enabled(actor=actor, book=book, entry_ids=_ids(book), enabled=False),
        lambda: services.entries_bulk_delete(actor=actor, book=book, entry_ids=_ids(book)[:1]),
        lambda: services.entry_delete(actor=actor, entry=_first(book)),
        lambda: services.book_set_active(actor=actor, book=book, active=False),
    ]
    for step in steps:
        before = version(book)
        step()
        assert version(book) == before + 1, step


def test_no_change_no_bump(tenant_a):
    actor = member_actor(tenant_a)
    book = make_book(tenant_a, description="Same")
    entry = make_entry(book, content="same content", enabled=True)
    before = version(book)
    services.book_update(actor=actor, book=book, description="Same")
    services.entry_update(actor=actor, entry=entry, content="same content")
    services.entries_bulk_set_enabled(actor=actor, book=book, entry_ids=[entry.pk], enabled=True)
    services.entry_move(actor=actor, entry=entry, to="top")
    services.book_set_active(actor=actor, book=book, active=True)
    assert version(book) == before


def test_usage_is_recorded_without_bumping_the_version(tenant_a):
    book = make_book(tenant_a)
    entry = make_entry(book)
    before = version(book)
    assert services.entries_record_usage(tenant=tenant_a.tenant, entry_ids=[entry.pk, entry.pk]) == 1
    entry.refresh_from_db()
    assert entry.usage_count == 1 and entry.last_used_at is not None
    assert version(book) == before


def test_content_hash_and_indexing_state(tenant_a, monkeypatch):
    calls = []
    monkeypatch.setattr(services.versions, "_entry_content_changed", lambda entry: calls.append(entry.pk))
    actor = member_actor(tenant_a)
    book = make_book(tenant_a, profile=Profile.SMART)
    entry = services.entry_create(actor=actor, book=book, title="Varn", content=SMART_LORE, keys=["Varn city"])
    assert entry.content_hash == content_hash("Varn", SMART_LORE, ["Varn city"])
    assert entry.indexing_state == IndexingState.PENDING
    assert calls == [entry.pk]

    Entry.objects.for_tenant(tenant_a.tenant).filter(pk=entry.pk).update(indexing_state=IndexingState.INDEXED)
    entry.refresh_from_db()
    services.entry_update(actor=actor, entry=entry, enabled=False, priority=3)  # not indexed text
    entry.refresh_from_db()
    assert entry.indexing_state == IndexingState.INDEXED and calls == [entry.pk]

    services.entry_update(actor=actor, entry=entry, keys=["Varn", "river city"])  # aliases are indexed text
    entry.refresh_from_db()
    assert entry.indexing_state == IndexingState.PENDING
    assert entry.content_hash == content_hash("Varn", SMART_LORE, ["Varn", "river city"])
    assert calls == [entry.pk, entry.pk]


def test_bulk_create_hashes_each_entry(tenant_a, monkeypatch):
    calls = []
    monkeypatch.setattr(services.versions, "_entries_content_changed", lambda book, ids: calls.extend(ids))
    book = make_book(tenant_a)
    created = services.entries_create_bulk(
        actor=member_actor(tenant_a), book=book, entries=[{"title": "A", "content": "one"}, {"title": "B"}]
    )
    assert [e.content_hash for e in created] == [content_hash("A", "one", []), content_hash("B", "", [])]
    assert calls == [e.pk for e in created] and all(calls)
    assert [e.position for e in created] == [0, 1]


def test_extra_keeps_unmodelled_fields_and_canon_is_constant(tenant_a):
    book = make_book(tenant_a)
    extra = {"sticky": 2, "group": "weather", "characterFilter": {"names": ["Ada"]}}
    entry = services.entry_create(actor=member_actor(tenant_a), book=book, content="x", canon=True, extra=extra)
    entry.refresh_from_db()
    assert entry.extra == extra and entry.constant and entry.canon
    with pytest.raises(ValidationFailed):
        services.entry_create(actor=member_actor(tenant_a), book=book, canon=True, constant=False)


def test_every_spec_field_round_trips(tenant_a):
    book = make_book(tenant_a)
    fields = {
        "title": "Storm", "content": "Rain.", "keys": ["storm", "/a+/"], "secondary_keys": ["night"],
        "secondary_logic": "not_all", "selective": False, "constant": False, "enabled": False, "order": 7,
        "priority": -2, "probability": 0, "scan_depth": 9, "case_sensitive": True, "whole_words": False,
        "role": "assistant", "placement": "before_persona", "extra": {"uid": 4},
    }
    entry = services.entry_create(actor=member_actor(tenant_a), book=book, **fields)
    entry.refresh_from_db()
    assert {name: getattr(entry, name) for name in fields} == fields


def test_living_world_needs_a_private_owned_world_book(tenant_a):
    smart = make_book(tenant_a, profile=Profile.SMART)
    assert services.book_update(actor=member_actor(tenant_a), book=smart, living_world=True).living_world
    classic = make_book(tenant_a)
    with pytest.raises(ValidationFailed) as exc_info:
        services.book_update(actor=member_actor(tenant_a), book=classic, living_world=True)
    assert exc_info.value.rule == "L-1"
    tenant_book = make_book(tenant_a, owner=None, profile=Profile.SMART)
    with pytest.raises(ValidationFailed):
        services.book_update(actor=admin_actor(tenant_a), book=tenant_book, living_world=True)


def test_book_delete_removes_its_entries(tenant_a):
    book = make_book(tenant_a)
    make_entry(book)
    services.book_delete(actor=member_actor(tenant_a), book=book)
    assert not Book.objects.for_tenant(tenant_a.tenant).exists()
    assert not Entry.objects.for_tenant(tenant_a.tenant).exists()


# --- canon meter (W-1) -------------------------------------------------------------------


def test_canon_meter_counts_enabled_canon_in_list_order(tenant_a):
    book = make_book(tenant_a, profile=Profile.SMART)
    make_entry(book, title="World frame", content="w" * 2_000, constant=True)  # 500 tokens
    make_entry(book, title="Magic", content="m" * 1_600, constant=True)  # 400 tokens
    make_entry(book, title="Tone", content="t" * 400, constant=True)  # 100 tokens
    make_entry(book, title="Off", content="o" * 4_000, constant=True, enabled=False)
    make_entry(book, title="Relevant", content="r" * 4_000)
    meter = selectors.book_canon_meter(book=book, input_window=8_000, tokenizer="ceil-chars-4")  # budget 800
    assert (meter.budget, meter.tokens, meter.injected_tokens) == (800, 1_000, 600)
    assert meter.message == "Core canon: 1,000 tokens per turn"
    assert meter.over_budget and "1 canon entry would not be injected" in meter.warning
    assert [(line.title, line.fits) for line in meter.entries] == [
        ("World frame", True), ("Magic", False), ("Tone", True)
    ]


def test_canon_meter_keeps_the_first_entry_and_has_no_warning_under_budget(tenant_a):
    book = make_book(tenant_a, profile=Profile.SMART)
    make_entry(book, title="Huge", content="h" * 20_000, constant=True)  # 5,000 tokens > 4,000 cap
    meter = selectors.book_canon_meter(book=book, model_id="any-model", input_window=1_000_000)
    assert meter.tokens_are_estimate  # an unknown model: the engine's high estimate
    assert meter.budget == 4_000 and meter.entries[0].fits and meter.over_budget
    small = make_book(tenant_a, profile=Profile.SMART)
    make_entry(small, content="s" * 400, constant=True)
    meter = selectors.book_canon_meter(book=small, input_window=128_000, tokenizer="ceil-chars-4")
    assert (meter.tokens, meter.over_budget, meter.warning) == (100, False, None)


def test_canon_meter_uses_the_models_tokenizer_and_window(tenant_a):
    from retrieval.engine.tokenizers import tokenizer_for

    book = make_book(tenant_a, profile=Profile.SMART)
    text = "The river city of Varn trades salt for iron every spring. " * 40
    make_entry(book, content=text, constant=True)
    meter = selectors.book_canon_meter(book=book, model_id="gpt-4")  # 8,192-token window in the registry
    assert (meter.input_window, meter.budget, meter.tokenizer) == (8_192, 819, "cl100k_base")
    assert meter.tokens == tokenizer_for("gpt-4").count(text) and not meter.tokens_are_estimate


def test_canon_meter_packs_as_the_live_selection_does(tenant_a):
    """W-1 in one place: the meter's "fits" is what the smart turn injects as canon."""
    from retrieval.adapter.loading import engine_book
    from retrieval.engine.smart import smart_assemble
    from retrieval.engine.tokenizers import tokenizer_by_name
    from retrieval.engine.values import Message, Model, TurnRequest

    book = make_book(tenant_a, profile=Profile.SMART)
    for title, chars in (("Frame", 2_000), ("Magic", 1_600), ("Off", 400), ("Tone", 400), ("Coda", 800)):
        make_entry(book, title=title, content="c" * chars, constant=True, enabled=title != "Off")
    make_entry(book, title="Relevant", content="r" * 400)
    meter = selectors.book_canon_meter(book=book, input_window=8_000, tokenizer="ceil-chars-4")
    request = TurnRequest(
        profile="smart", books=(engine_book(book),), chat=(Message(role="user", text="Hi."),),
        model=Model(tokenizer="ceil-chars-4", input_window=8_000),
    )
    selection = smart_assemble(request, tokenizer=tokenizer_by_name("ceil-chars-4"))
    canon = [i for i in selection.injections if i.slot == "canon"]
    assert [str(line.entry_id) for line in meter.entries if line.fits] == [i.entry for i in canon]
    assert meter.injected_tokens == sum(i.tokens for i in canon) == 800
    assert [line.title for line in meter.entries if not line.fits] == ["Magic"]


def test_canon_meter_needs_an_input_window_for_unknown_models(tenant_a):
    book = make_book(tenant_a, profile=Profile.SMART)
    with pytest.raises(ValidationFailed) as exc_info:
        selectors.book_canon_meter(book=book, model_id="unknown-model-xyz")
    assert (exc_info.value.field, exc_info.value.rule) == ("input_window", "W-1")


def _ids(book):
    return list(Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position").values_list("pk", flat=True))


def _first(book):
    return Entry.objects.for_tenant(book.tenant).filter(book=book).order_by("position").first()


def test_enable_changes_reach_the_indexing_hook(tenant_a, monkeypatch):
    calls = []
    monkeypatch.setattr(services.versions, "_entries_enabled_changed", lambda book, ids: calls.append(sorted(ids)))
    book = make_book(tenant_a, profile=Profile.SMART)
    on, off = make_entry(book, enabled=True), make_entry(book, enabled=False)
    services.entries_bulk_set_enabled(actor=member_actor(tenant_a), book=book, entry_ids=[on.pk, off.pk], enabled=False)
    services.entry_update(actor=member_actor(tenant_a), entry=on, enabled=True)
    services.entry_update(actor=member_actor(tenant_a), entry=on, title="Renamed")
    assert calls == [[on.pk], [on.pk]]
