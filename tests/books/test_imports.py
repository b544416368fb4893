"""The import services through the database (I-1 … I-5): the corpus, naming, append/replace,
the receipt, every limit just under and just over with nothing written on refusal, and S-1."""

from __future__ import annotations

import json
from typing import Any

import pytest

from books.exports import book_export
from books.formats import entry_fingerprint, read_book
from books.formats.limits import MIB
from books.imports import book_import_into, book_import_new
from books.lineages import lineage_get_or_create
from books.models import Book, Entry, IndexingState, Profile, Scope
from lore_platform.errors import Conflict, LimitExceeded, NotFound, PayloadTooLarge, PermissionDenied, ValidationFailed
from tests.books.factories import admin_actor, entry_count, fill, make_book, make_entry, member_actor, version
from tests.books.formats.builders import card, card_book, chara_chunk, charx, png_with, st_entry, world, world_bytes
from tests.books.formats.corpus import manifest, predicted_refusal
from tests.books.io_support import (
    IMPORTABLE,
    REFUSED,
    assert_same_lore,
    entry_rows,
    filename_of,
    profile_for,
    tenant_state,
)
from tests.shared_data import require_shared

pytestmark = pytest.mark.django_db


def _corpus(relpath: str) -> bytes:
    return (require_shared("corpus") / relpath).read_bytes()


def _actor(setup: Any, profile: str) -> Any:
    return admin_actor(setup) if profile == Profile.SERVER else member_actor(setup)


def _entries(count: int, **fields: Any) -> bytes:
    return world_bytes(count, **fields)


def _refused(kind: type[Exception], call: Any, tenant: Any) -> Any:
    """``call()`` raises ``kind`` and the tenant's lore is exactly as before."""
    before = tenant_state(tenant)
    with pytest.raises(kind) as info:
        call()
    assert tenant_state(tenant) == before
    error = info.value
    assert error.message, error.as_dict()
    return error


# --- the corpus ---------------------------------------------------------------------------


@pytest.mark.parametrize("relpath", IMPORTABLE)
def test_corpus_file_imports_through_the_database(tenant_a, relpath):
    data = _corpus(relpath)
    row = manifest()[relpath]
    profile = profile_for(relpath)
    result = book_import_new(actor=_actor(tenant_a, profile), data=data, filename=filename_of(relpath), profile=profile)
    receipt = result.receipt
    if receipt["card_without_book"]:
        # I-1: a card without a book changes nothing.
        assert result.book is None and receipt["changes_nothing"] and receipt["added"] == 0
        assert Book.objects.for_tenant(tenant_a.tenant).count() == 0
        return
    book = result.book
    assert book.profile == profile
    assert book.title == read_book(data, filename=filename_of(relpath)).name.strip()
    assert receipt["added"] + receipt["skipped_count"] == row.entries
    assert entry_count(book) == receipt["added"] == len(receipt["entry_ids"])
    assert sorted(receipt["entry_ids"]) == sorted(
        Entry.objects.for_tenant(book.tenant).filter(book=book).values_list("pk", flat=True)
    )
    assert [r["position"] for r in entry_rows(book)] == list(range(receipt["added"]))
    assert all(item["reason"] for item in receipt["skipped"])
    assert receipt["book"]["id"] == book.pk and receipt["mode"] == "new"


@pytest.mark.parametrize("relpath", REFUSED)
def test_broken_corpus_file_is_refused_as_the_manifest_predicts(tenant_a, relpath):
    error = _refused(
        ValidationFailed,
        lambda: book_import_new(
            actor=member_actor(tenant_a), data=_corpus(relpath), filename=filename_of(relpath), profile="classic"
        ),
        tenant_a.tenant,
    )
    assert predicted_refusal(manifest()[relpath]) in error.message
    assert error.rule == "I-1"


@pytest.mark.parametrize("relpath", IMPORTABLE)
def test_corpus_round_trips_through_the_database(tenant_a, tenant_b, relpath):
    """import → export (SillyTavern world info) → import gives the same book (I-6, C-9)."""
    profile = profile_for(relpath)
    first = book_import_new(
        actor=_actor(tenant_a, profile), data=_corpus(relpath), filename=filename_of(relpath), profile=profile
    ).book
    if first is None:
        return  # a card without a book: nothing to export
    payload, _, filename = book_export(actor=_actor(tenant_a, profile), book=first, to="sillytavern")
    # Another tenant, no typed name: the name must come back from the file itself.
    second = book_import_new(actor=_actor(tenant_b, profile), data=payload, filename=filename, profile=profile)
    assert second.receipt["skipped_count"] == 0
    assert_same_lore(first, second.book)


@pytest.mark.parametrize("to", ["card-v2", "card-v2-png", "native"])
@pytest.mark.parametrize(
    "relpath",
    [
        "st-worldinfo/sillytavern_eldoria_2024-09.json",
        "png-chara/user_cronos_mysteria.png",
        "card-json/kj_luk_wing_lung_v3.json",
        "st-worldinfo/user_x_world.json",
        "novelai/nai_tool_test_v6.lorebook",
        "st-worldinfo/chub_hybrid_lythora_station.json",
    ],
)
def test_round_trip_through_the_card_and_native_exports(tenant_a, tenant_b, relpath, to):
    profile = profile_for(relpath)
    first = book_import_new(
        actor=_actor(tenant_a, profile), data=_corpus(relpath), filename=filename_of(relpath), profile=profile
    ).book
    payload, _, filename = book_export(actor=_actor(tenant_a, profile), book=first, to=to)
    second = book_import_new(actor=_actor(tenant_b, profile), data=payload, filename=filename, profile=profile).book
    assert_same_lore(first, second)


def test_world_file_and_its_card_import_the_same_entries(tenant_a, tenant_b):
    world_book = book_import_new(
        actor=member_actor(tenant_a),
        data=_corpus("st-worldinfo/user_mysteria.json"),
        filename="m.json",
        profile="classic",
    ).book
    card_book_ = book_import_new(
        actor=member_actor(tenant_b),
        data=_corpus("png-chara/user_cronos_mysteria.png"),
        filename="c.png",
        profile="classic",
    ).book
    assert_same_lore(world_book, card_book_, title=False)


# --- I-2: naming a new book ---------------------------------------------------------------


def test_new_book_name_comes_from_the_file_then_the_file_name_then_typed(tenant_a):
    actor = member_actor(tenant_a)
    named = book_import_new(
        actor=actor,
        data=json.dumps(world([st_entry(0)], name="Named inside")).encode(),
        filename="f.json",
        profile="classic",
    )
    assert named.book.title == "Named inside"
    unnamed = book_import_new(actor=actor, data=_entries(1), filename="From the file name.json", profile="classic")
    assert unnamed.book.title == "From the file name"
    typed = book_import_new(actor=actor, data=_entries(1), filename="x.json", profile="classic", title="  Typed  ")
    assert typed.book.title == "Typed"
    nameless = book_import_new(actor=actor, data=_entries(1), filename=None, profile="classic")
    assert nameless.book.title == "Imported book"


def test_an_existing_name_is_rejected_and_nothing_is_written(tenant_a):
    actor = member_actor(tenant_a)
    make_book(tenant_a, title="Harbour  Lore")
    for title in ("Harbour Lore", "harbour lore", " HARBOUR   LORE "):
        error = _refused(
            Conflict,
            lambda title=title: book_import_new(
                actor=actor, data=_entries(3), filename="x.json", profile="classic", title=title
            ),
            tenant_a.tenant,
        )
        assert error.rule == "I-2" and error.field == "title"
    # The name in the file is checked the same way.
    _refused(
        Conflict,
        lambda: book_import_new(
            actor=actor,
            data=json.dumps(world([st_entry(0)], name="harbour lore")).encode(),
            filename="x.json",
            profile="classic",
        ),
        tenant_a.tenant,
    )


def test_names_are_per_owner(tenant_a):
    make_book(tenant_a, owner="admin", title="Shared name")
    assert book_import_new(
        actor=member_actor(tenant_a), data=_entries(1), filename="x", profile="classic", title="Shared name"
    ).book
    # Tenant-owned books share one namespace.
    make_book(tenant_a, owner=None, profile=Profile.SERVER, title="Server rules")
    _refused(
        Conflict,
        lambda: book_import_new(
            actor=admin_actor(tenant_a), data=_entries(1), filename="x", profile="server", title="server rules"
        ),
        tenant_a.tenant,
    )


def test_a_typed_title_that_is_not_text_is_refused(tenant_a):
    error = _refused(
        ValidationFailed,
        lambda: book_import_new(
            actor=member_actor(tenant_a), data=_entries(1), filename="x", profile="classic", title="a\x00b"
        ),
        tenant_a.tenant,
    )
    assert error.field == "title"


def test_a_typed_title_over_the_limit_is_refused(tenant_a):
    error = _refused(
        LimitExceeded,
        lambda: book_import_new(
            actor=member_actor(tenant_a), data=_entries(1), filename="x", profile="classic", title="t" * 121
        ),
        tenant_a.tenant,
    )
    assert error.rule == "W-12"
    ok = book_import_new(
        actor=member_actor(tenant_a), data=_entries(1), filename="x", profile="classic", title="t" * 120
    )
    assert len(ok.book.title) == 120


def test_a_card_without_a_book_changes_nothing(tenant_a):
    actor = member_actor(tenant_a)
    target = make_book(tenant_a)
    make_entry(target)
    before = tenant_state(tenant_a.tenant)
    data = json.dumps(card(None)).encode()
    new = book_import_new(actor=actor, data=data, filename="c.json", profile="classic")
    assert new.book is None and new.receipt["changes_nothing"] is True
    into = book_import_into(actor=actor, book=target, data=data, filename="c.json", mode="replace")
    assert into.receipt["changes_nothing"] is True and into.receipt["added"] == 0
    assert tenant_state(tenant_a.tenant) == before


# --- append and replace --------------------------------------------------------------------


def test_append_skips_entries_that_already_exist(tenant_a):
    actor = member_actor(tenant_a)
    book = make_book(tenant_a)
    make_entry(book, title="Entry 0", content=json.loads(_entries(1))["entries"]["0"]["content"])
    start = version(book)
    entries = [
        st_entry(0),  # same title and content as the existing entry
        st_entry(
            1, key=["other"], comment="  ENTRY 0 ", content=st_entry(0)["content"].upper() + "  "
        ),  # same after normalising
        st_entry(2, comment="Entry 0", content="Different lore under the same title, so not a duplicate."),
        st_entry(3),
        st_entry(4, comment="Entry 3", content=st_entry(3)["content"], key=["changed keys"]),  # duplicate in the file
    ]
    result = book_import_into(actor=actor, book=book, data=json.dumps(world(entries)).encode(), filename="w.json")
    receipt = result.receipt
    assert receipt["mode"] == "append" and receipt["added"] == 2
    reasons = {item["index"]: item["reason"] for item in receipt["skipped"]}
    assert reasons[0].startswith("already in the book") and reasons[1].startswith("already in the book")
    assert reasons[4] == "duplicate of entry #3 in this file"
    rows = entry_rows(book)
    assert [r["title"] for r in rows] == ["Entry 0", "Entry 0", "Entry 3"]
    assert [r["position"] for r in rows] == [0, 1, 2]
    assert version(book) > start
    # The same file again adds nothing.
    again = book_import_into(actor=actor, book=book, data=json.dumps(world(entries)).encode(), filename="w.json")
    assert again.receipt["added"] == 0 and again.receipt["skipped_count"] == 5


def test_append_into_a_world_book_finds_entries_whose_title_was_made_up(tenant_a):
    """A world-book entry needs a title; an untitled entry gets one, and a second import still finds it."""
    actor = member_actor(tenant_a)
    data = json.dumps(world([st_entry(0, comment=""), st_entry(1, comment="")])).encode()
    first = book_import_new(actor=actor, data=data, filename="w.json", profile="smart")
    assert first.receipt["added"] == 2 and all(r["title"] for r in entry_rows(first.book))
    again = book_import_into(actor=actor, book=first.book, data=data, filename="w.json")
    assert again.receipt["added"] == 0 and again.receipt["skipped_count"] == 2


def test_replace_changes_that_book_only(tenant_a):
    actor = member_actor(tenant_a)
    book = make_book(tenant_a, title="Target", description="Kept", tags=["kept"])
    other = make_book(tenant_a, title="Other")
    for _ in range(3):
        make_entry(book)
    make_entry(other)
    other_before = (entry_rows(other), version(other))
    data = json.dumps(world([st_entry(0), st_entry(1, disable=True)], scan_depth=7, recursive_scanning=True)).encode()
    result = book_import_into(actor=actor, book=book, data=data, filename="w.json", mode="replace")
    assert result.receipt["replaced"] == 3 and result.receipt["added"] == 2
    rows = entry_rows(book)
    assert [r["title"] for r in rows] == ["Entry 0", "Entry 1"] and [r["enabled"] for r in rows] == [True, False]
    fresh = Book.objects.for_tenant(tenant_a.tenant).get(pk=book.pk)
    assert (fresh.title, fresh.description, fresh.tags) == ("Target", "Kept", ["kept"])
    assert (fresh.scan_depth, fresh.recursive) == (7, True)
    assert (entry_rows(other), version(other)) == other_before


def test_replace_with_nothing_usable_empties_the_book_and_counts_a_version(tenant_a):
    book = make_book(tenant_a)
    make_entry(book)
    start = version(book)
    result = book_import_into(
        actor=member_actor(tenant_a),
        book=book,
        data=json.dumps(world([st_entry(0, content="")])).encode(),
        filename="w.json",
        mode="replace",
    )
    assert result.receipt["added"] == 0 and result.receipt["replaced"] == 1 and entry_count(book) == 0
    assert version(book) > start


def test_unknown_mode_is_refused(tenant_a):
    book = make_book(tenant_a)
    error = _refused(
        ValidationFailed,
        lambda: book_import_into(actor=member_actor(tenant_a), book=book, data=_entries(1), filename="x", mode="merge"),
        tenant_a.tenant,
    )
    assert error.field == "mode"


# --- the receipt (I-4) -----------------------------------------------------------------------


def test_receipt_names_skipped_entries_and_unsupported_settings(tenant_a):
    entries = [
        st_entry(0, group="g1", sticky=2),
        st_entry(1, content="   "),
        st_entry(2, key=["/regex+/i"], position=4, depth=2),
    ]
    result = book_import_new(
        actor=admin_actor(tenant_a), data=json.dumps(world(entries)).encode(), filename="w.json", profile="server"
    )
    receipt = result.receipt
    assert receipt["added"] == 2
    assert receipt["skipped"] == [{"index": 1, "entry": "Entry 1", "reason": "empty content"}]
    assert receipt["unsupported_counts"]["group"] == 1 and receipt["unsupported_counts"]["sticky"] == 1
    assert receipt["unsupported_counts"]["regex_keys"] == 1
    # Unsupported settings are kept in extra and travel on export.
    rows = entry_rows(result.book)
    assert rows[0]["extra"]["st"]["group"] == "g1"
    assert rows[1]["placement"] == "before_persona" and rows[1]["extra"]["st"]["position"] == 4


def test_channels_only_land_in_persona_books(tenant_a):
    native = {
        "format": "loreweave-native",
        "version": 1,
        "books": [
            {
                "title": "Chan",
                "entries": [
                    {
                        "title": "A",
                        "content": "Lore with a channel restriction.",
                        "channels": ["123"],
                        "unresolved_channels": ["#old"],
                    }
                ],
            }
        ],
    }
    data = json.dumps(native).encode()
    classic = book_import_new(actor=member_actor(tenant_a), data=data, filename="n.json", profile="classic")
    assert entry_rows(classic.book)[0]["channels"] == [] and any("S-11" in w for w in classic.receipt["warnings"])
    lineage = lineage_get_or_create(tenant=tenant_a.tenant, key="Hero")
    persona = book_import_new(
        actor=admin_actor(tenant_a),
        data=data,
        filename="n.json",
        profile="server",
        scope="persona",
        lineage=lineage,
        title="Persona chan",
    )
    row = entry_rows(persona.book)[0]
    assert row["channels"] == ["123"] and row["unresolved_channels"] == ["#old"]


# --- I-3: every limit just under and just over, nothing written on refusal -------------------


def test_import_batch_500_just_under_and_over(tenant_a):
    actor = member_actor(tenant_a)
    book = make_book(tenant_a, title="Target")
    start = version(book)
    error = _refused(
        LimitExceeded,
        lambda: book_import_into(actor=actor, book=book, data=_entries(501), filename="x"),
        tenant_a.tenant,
    )
    assert error.rule == "I-3" and error.details["limit"] == 500
    _refused(
        LimitExceeded,
        lambda: book_import_new(actor=actor, data=_entries(501), filename="x", profile="classic"),
        tenant_a.tenant,
    )
    assert version(book) == start
    assert book_import_into(actor=actor, book=book, data=_entries(500), filename="x").receipt["added"] == 500
    assert book_import_new(actor=actor, data=_entries(500), filename="y", profile="classic").receipt["added"] == 500


def test_world_book_2000_entries_just_under_and_over(tenant_a):
    actor = member_actor(tenant_a)
    book = make_book(tenant_a, profile=Profile.SMART)
    fill(book, 1990)
    error = _refused(
        LimitExceeded,
        lambda: book_import_into(actor=actor, book=book, data=_entries(11), filename="x"),
        tenant_a.tenant,
    )
    assert error.rule == "W-12" and error.details["limit"] == 2000 and error.details["existing"] == 1990
    assert book_import_into(actor=actor, book=book, data=_entries(10), filename="x").receipt["added"] == 10
    assert entry_count(book) == 2000
    # Replace counts the book without its current entries.
    assert (
        book_import_into(actor=actor, book=book, data=_entries(500), filename="x", mode="replace").receipt["added"]
        == 500
    )


def test_persona_250_entries_just_under_and_over(tenant_a):
    actor = admin_actor(tenant_a)
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER, scope=Scope.PERSONA)
    fill(book, 240)
    error = _refused(
        LimitExceeded,
        lambda: book_import_into(actor=actor, book=book, data=_entries(11), filename="x"),
        tenant_a.tenant,
    )
    assert error.rule == "S-14"
    assert book_import_into(actor=actor, book=book, data=_entries(10), filename="x").receipt["added"] == 10
    # A new persona book: 250 fit, 251 do not.
    lineage = lineage_get_or_create(tenant=tenant_a.tenant, key="Another persona")
    _refused(
        LimitExceeded,
        lambda: book_import_new(
            actor=actor, data=_entries(251), filename="x", profile="server", scope="persona", lineage=lineage
        ),
        tenant_a.tenant,
    )
    assert (
        book_import_new(
            actor=actor, data=_entries(250), filename="x", profile="server", scope="persona", lineage=lineage
        ).receipt["added"]
        == 250
    )


def test_server_wide_pool_250_just_under_and_over(tenant_a):
    actor = admin_actor(tenant_a)
    existing = make_book(tenant_a, owner=None, profile=Profile.SERVER, title="Rules")
    fill(existing, 200)
    error = _refused(
        LimitExceeded,
        lambda: book_import_new(actor=actor, data=_entries(51), filename="New", profile="server"),
        tenant_a.tenant,
    )
    assert error.rule == "S-14" and error.details["existing"] == 200
    _refused(
        LimitExceeded,
        lambda: book_import_into(actor=actor, book=existing, data=_entries(51), filename="x"),
        tenant_a.tenant,
    )
    result = book_import_new(actor=actor, data=_entries(50), filename="New", profile="server")
    assert result.book.scope == Scope.SERVER and result.receipt["added"] == 50


def test_server_entry_content_4000_just_under_and_over(tenant_a):
    actor = admin_actor(tenant_a)
    # S-3 on import: the over-long entry is skipped with its reason, the rest imports.
    over = json.dumps(world([st_entry(0), st_entry(1, content="x" * 4001)])).encode()
    receipt = book_import_new(actor=actor, data=over, filename="x", profile="server", title="Over").receipt
    assert receipt["added"] == 1 and receipt["skipped"][0]["index"] == 1 and "S-3" in receipt["skipped"][0]["reason"]
    fits = json.dumps(world([st_entry(0), st_entry(1, content="x" * 4000)])).encode()
    assert book_import_new(actor=actor, data=fits, filename="x", profile="server").receipt["added"] == 2


def test_json_2_mb_just_under_and_over(tenant_a):
    actor = member_actor(tenant_a)
    body = _entries(3)
    exact = body + b" " * (2 * MIB - len(body))
    _refused(
        PayloadTooLarge,
        lambda: book_import_new(actor=actor, data=exact + b" ", filename="x", profile="classic"),
        tenant_a.tenant,
    )
    assert book_import_new(actor=actor, data=exact, filename="x", profile="classic").receipt["added"] == 3


def test_card_size_limits_are_host_settings_just_under_and_over(tenant_a, settings):
    actor = member_actor(tenant_a)
    png = png_with(chara_chunk(card(card_book(2))))
    archive = charx({"card.json": json.dumps(card(card_book(2)))})
    settings.LOREWEAVE_IMPORT_LIMITS = {"max_png_bytes": len(png) - 1, "max_charx_bytes": len(archive) - 1}
    error = _refused(
        PayloadTooLarge,
        lambda: book_import_new(actor=actor, data=png, filename="c.png", profile="classic"),
        tenant_a.tenant,
    )
    assert error.rule == "I-3" and error.details["limit"] == len(png) - 1
    _refused(
        PayloadTooLarge,
        lambda: book_import_new(actor=actor, data=archive, filename="c.charx", profile="classic"),
        tenant_a.tenant,
    )
    settings.LOREWEAVE_IMPORT_LIMITS = {"max_png_bytes": len(png), "max_charx_bytes": len(archive)}
    assert book_import_new(actor=actor, data=png, filename="c.png", profile="classic").receipt["added"] == 2
    assert (
        book_import_new(actor=actor, data=archive, filename="d.charx", profile="classic", title="D").receipt["added"]
        == 2
    )


def test_a_failure_during_the_writes_rolls_everything_back(tenant_a, monkeypatch):
    """The check step passed, then a write failed: the new book is gone too (one transaction)."""
    import books.imports as imports

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValidationFailed("disk on fire", field="entries", rule="I-3")

    monkeypatch.setattr(imports, "entries_create_bulk", broken)
    _refused(
        ValidationFailed,
        lambda: book_import_new(actor=member_actor(tenant_a), data=_entries(3), filename="x", profile="classic"),
        tenant_a.tenant,
    )
    book = make_book(tenant_a)
    make_entry(book)
    _refused(
        ValidationFailed,
        lambda: book_import_into(
            actor=member_actor(tenant_a), book=book, data=_entries(3), filename="x", mode="replace"
        ),
        tenant_a.tenant,
    )


def test_text_no_database_can_store_is_refused(tenant_a):
    for content in ("nul \u0000 inside the lore text", "lone \ud800 surrogate in the lore"):
        data = json.dumps(world([st_entry(0, content=content)])).encode()
        error = _refused(
            ValidationFailed,
            lambda data=data: book_import_new(actor=member_actor(tenant_a), data=data, filename="x", profile="classic"),
            tenant_a.tenant,
        )
        assert error.field == "entries.0.content" and error.rule == "I-1"
    data = json.dumps(world([st_entry(0, mystery={"deep": ["\u0000"]})])).encode()
    error = _refused(
        ValidationFailed,
        lambda: book_import_new(actor=member_actor(tenant_a), data=data, filename="x", profile="classic"),
        tenant_a.tenant,
    )
    assert error.field.startswith("entries.0.extra")


# --- S-1: who may import ------------------------------------------------------------------------


def test_who_may_import(tenant_a, tenant_b):
    member, admin = member_actor(tenant_a), admin_actor(tenant_a)
    reader = member_actor(tenant_a, scopes=frozenset({"read"}))
    own = make_book(tenant_a)
    admins = make_book(tenant_a, owner="admin", title="Admin's")
    server = make_book(tenant_a, owner=None, profile=Profile.SERVER, title="Server")
    foreign = make_book(tenant_b, title="Foreign")
    t = tenant_a.tenant
    _refused(
        PermissionDenied, lambda: book_import_new(actor=reader, data=_entries(1), filename="x", profile="classic"), t
    )
    _refused(PermissionDenied, lambda: book_import_into(actor=reader, book=own, data=_entries(1), filename="x"), t)
    _refused(
        PermissionDenied, lambda: book_import_new(actor=member, data=_entries(1), filename="x", profile="server"), t
    )
    lineage = lineage_get_or_create(tenant=t, key="P")
    _refused(
        PermissionDenied,
        lambda: book_import_new(
            actor=member, data=_entries(1), filename="x", profile="server", scope="persona", lineage=lineage
        ),
        t,
    )
    _refused(PermissionDenied, lambda: book_import_into(actor=member, book=server, data=_entries(1), filename="x"), t)
    _refused(NotFound, lambda: book_import_into(actor=member, book=admins, data=_entries(1), filename="x"), t)
    _refused(NotFound, lambda: book_import_into(actor=admin, book=foreign, data=_entries(1), filename="x"), t)
    # Admins import server books; owners their own.
    assert book_import_into(actor=admin, book=server, data=_entries(1), filename="x").receipt["added"] == 1
    assert book_import_into(actor=member, book=own, data=_entries(1), filename="x").receipt["added"] == 1


def test_persona_books_and_only_they_name_a_lineage(tenant_a):
    actor = admin_actor(tenant_a)
    lineage = lineage_get_or_create(tenant=tenant_a.tenant, key="Hero")
    for scope, given in (("persona", None), ("server", lineage)):
        error = _refused(
            ValidationFailed,
            lambda scope=scope, given=given: book_import_new(
                actor=actor, data=_entries(1), filename="x", profile="server", scope=scope, lineage=given
            ),
            tenant_a.tenant,
        )
        assert error.field == "lineage" and error.rule == "S-2"
    error = _refused(
        ValidationFailed,
        lambda: book_import_new(actor=actor, data=_entries(1), filename="x", profile="classic", scope="galaxy"),
        tenant_a.tenant,
    )
    assert error.field == "scope"


def test_a_persona_whose_lineage_has_its_book_is_a_conflict(tenant_a):
    actor = admin_actor(tenant_a)
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER, scope=Scope.PERSONA)
    error = _refused(
        Conflict,
        lambda: book_import_new(
            actor=actor, data=_entries(1), filename="x", profile="server", scope="persona", lineage=book.lineage
        ),
        tenant_a.tenant,
    )
    assert error.rule == "S-2"


# --- smart books are indexed after commit ----------------------------------------------------------


def test_smart_import_schedules_indexing_of_the_new_entries_after_commit(
    tenant_a, monkeypatch, django_capture_on_commit_callbacks
):
    import books.events as events

    calls: list[tuple[Any, list[int]]] = []
    real = events.entries_changed

    def spy(*, book: Any, entry_ids: Any) -> None:
        calls.append((book.tenant, sorted(entry_ids)))
        real(book=book, entry_ids=entry_ids)

    monkeypatch.setattr(events, "entries_changed", spy)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        result = book_import_new(
            actor=member_actor(tenant_a),
            data=_corpus("st-worldinfo/sillytavern_eldoria_2024-09.json"),
            filename="e.json",
            profile="smart",
        )
    assert calls == [(tenant_a.tenant, sorted(result.receipt["entry_ids"]))]
    assert callbacks, "indexing must run after commit, not inside the transaction"
    states = set(
        Entry.objects.for_tenant(tenant_a.tenant).filter(book=result.book).values_list("indexing_state", flat=True)
    )
    assert states == {IndexingState.PENDING}
    assert result.receipt["keys_as"] == "aliases"


def test_fingerprint_is_the_documented_rule():
    assert entry_fingerprint(" The  Harbour ", "Lore\nTEXT ") == entry_fingerprint("the harbour", "lore text")
    assert entry_fingerprint("Ｔｈｅ", "x") == entry_fingerprint("the", "x")  # NFKC: full-width letters
    assert entry_fingerprint("a", "x") != entry_fingerprint("a", "y")
