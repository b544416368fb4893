"""Export of one book from the database (I-6): every format, what travels and what does not, and S-1."""

from __future__ import annotations

import json

import pytest

from books.exports import book_as_imported, book_export
from books.formats import read_book
from books.formats.card_png import PNG_SIGNATURE
from books.imports import book_import_new
from books.models import Profile, Scope
from cast.services import character_import
from lore_platform.errors import NotFound, PermissionDenied, ValidationFailed
from tests.books.factories import admin_actor, make_book, make_entry, member_actor
from tests.books.formats.builders import st_entry, world
from tests.books.io_support import assert_same_lore

pytestmark = pytest.mark.django_db

LORE = "The salt road runs from Varn to the sea, and the toll is paid in iron."


def _book_with_everything(setup):
    book = make_book(
        setup,
        title="Varn: salt/iron",
        description="Trade lore",
        tags=["trade"],
        scan_depth=3,
        token_budget=900,
        recursive=True,
        extra={"wi": {"originalData": {"name": "Varn"}}},
    )
    make_entry(
        book,
        title="Salt road",
        content=LORE,
        keys=["salt", "road"],
        secondary_keys=["toll"],
        secondary_logic="not_any",
        constant=True,
        enabled=False,
        order=42,
        priority=3,
        probability=35,
        scan_depth=6,
        case_sensitive=True,
        whole_words=False,
        role="assistant",
        placement="before_persona",
        extra={"st": {"group": "roads", "sticky": 2, "position": 4, "depth": 1}, "novelai": {"searchRange": 500}},
    )
    make_entry(book, title="", content="An untitled entry keeps an empty comment.", keys=["untitled"])
    return book


@pytest.mark.parametrize("to", ["sillytavern", "card-v2", "card-v2-png", "native"])
def test_every_format_re_imports_to_the_same_book(tenant_a, tenant_b, to):
    book = _book_with_everything(tenant_a)
    payload, content_type, filename = book_export(actor=member_actor(tenant_a), book=book, to=to)
    assert content_type == ("image/png" if to == "card-v2-png" else "application/json; charset=utf-8")
    assert (
        filename
        == {
            "sillytavern": "Varn salt iron.json",
            "card-v2": "Varn salt iron.card.json",
            "card-v2-png": "Varn salt iron.png",
            "native": "Varn salt iron.loreweave.json",
        }[to]
    )
    again = book_import_new(actor=member_actor(tenant_b), data=payload, filename=filename, profile="classic")
    assert_same_lore(book, again.book)


def test_world_info_carries_activation_settings_and_enabled_states_but_no_tenant_state(tenant_a):
    lineage_book = make_book(tenant_a, owner=None, profile=Profile.SERVER, scope=Scope.PERSONA, title="Persona")
    make_entry(lineage_book, content=LORE, channels=["111"], unresolved_channels=["#legacy"], enabled=False)
    server = make_book(tenant_a, owner=None, profile=Profile.SERVER, title="Server", channels=["222"], active=False)
    make_entry(server, content=LORE)
    admin = admin_actor(tenant_a)
    for book in (lineage_book, server):
        doc = json.loads(book_export(actor=admin, book=book, to="sillytavern")[0])
        (entry,) = doc["entries"].values()
        text = json.dumps(doc)
        assert "111" not in text and "222" not in text and "#legacy" not in text  # I-6: channels stay home
        assert "active" not in doc and "collection" not in text
        assert entry["disable"] is (book is lineage_book)
        assert entry["content"] == LORE


def test_world_info_writes_sillytavern_field_names(tenant_a):
    book = _book_with_everything(tenant_a)
    doc = json.loads(book_export(actor=member_actor(tenant_a), book=book, to="sillytavern")[0])
    first, second = doc["entries"].values()
    assert first["comment"] == "Salt road" and second["comment"] == ""  # C-9
    assert first["key"] == ["salt", "road"] and first["keysecondary"] == ["toll"]
    assert first["selectiveLogic"] == 2 and first["disable"] is True and first["constant"] is True
    assert first["order"] == 42 and first["probability"] == 35 and first["useProbability"] is True
    assert first["position"] == 4 and first["depth"] == 1 and first["group"] == "roads" and first["sticky"] == 2
    assert first["role"] == 2 and first["scanDepth"] == 6 and first["caseSensitive"] is True
    assert first["loreweave"]["extra"]["novelai"] == {"searchRange": 500}  # fields we do not model travel
    assert doc["scan_depth"] == 3 and doc["token_budget"] == 900 and doc["recursive_scanning"] is True
    assert doc["originalData"] == {"name": "Varn"}


def test_card_exports_embed_the_book(tenant_a):
    book = _book_with_everything(tenant_a)
    actor = member_actor(tenant_a)
    card = json.loads(book_export(actor=actor, book=book, to="card-v2")[0])
    assert card["spec"] == "chara_card_v2"
    assert [e["comment"] for e in card["data"]["character_book"]["entries"]] == ["Salt road", ""]
    png, _, _ = book_export(actor=actor, book=book, to="card-v2-png")
    assert png.startswith(PNG_SIGNATURE)
    read = read_book(png)
    assert read.source_format == "card-v2-png" and [e.enabled for e in read.entries] == [False, True]


def test_native_export_keeps_collection_state_channels_and_lineage(tenant_a):
    character_import(tenant=tenant_a.tenant, name="Hero", lineage_key="Hero of Varn")
    from books.lineages import lineage_get_or_create

    lineage = lineage_get_or_create(tenant=tenant_a.tenant, key="Hero of Varn")
    book = make_book(
        tenant_a,
        owner=None,
        profile=Profile.SERVER,
        scope=Scope.PERSONA,
        lineage=lineage,
        title="Hero lore",
        active=False,
    )
    make_entry(book, content=LORE, channels=["111"], unresolved_channels=["#legacy"])
    doc = json.loads(book_export(actor=admin_actor(tenant_a), book=book, to="native")[0])
    (only,) = doc["books"]
    assert only["collection"]["scope"] == "persona" and only["collection"]["lineage_key"] == "hero of varn"
    assert only["collection"]["active"] is False and only["collection"]["owner"] is None
    assert only["entries"][0]["channels"] == ["111"] and only["entries"][0]["unresolved_channels"] == ["#legacy"]
    assert doc["lineages"] == [{"key": "hero of varn", "characters": ["Hero"]}]


def test_book_as_imported_reads_rows_in_list_order(tenant_a):
    book = make_book(tenant_a)
    make_entry(book, title="Second", position=1)
    make_entry(book, title="First", position=0)
    imported = book_as_imported(book)
    assert [e.title for e in imported.entries] == ["First", "Second"]
    assert imported.collection is None
    assert book_as_imported(book, with_collection=True).collection.owner == tenant_a.member.email


def test_who_may_export(tenant_a, tenant_b):
    own = make_book(tenant_a)
    make_entry(own)
    public = make_book(tenant_a, owner="admin", title="Admin's public", visibility="public")
    server = make_book(tenant_a, owner=None, profile=Profile.SERVER, title="Server")
    member, admin = member_actor(tenant_a), admin_actor(tenant_a)
    reader = member_actor(tenant_a, scopes=frozenset({"read"}))
    # A read-only key may export: it is a read.
    assert book_export(actor=reader, book=own, to="sillytavern")[0]
    assert book_export(actor=admin, book=server, to="native")[0]
    with pytest.raises(PermissionDenied) as denied:
        book_export(actor=member, book=server, to="sillytavern")
    assert denied.value.rule == "S-1"
    # Whoever reads a book exports it without tenant-only state; its native form is the owner's (I-6).
    assert book_export(actor=member, book=public, to="sillytavern")[0]
    with pytest.raises(PermissionDenied) as native:
        book_export(actor=member, book=public, to="native")
    assert native.value.rule == "I-6"
    with pytest.raises(NotFound):
        book_export(actor=admin, book=own, to="sillytavern")  # a member's private book
    with pytest.raises(NotFound):
        book_export(actor=admin_actor(tenant_b), book=own, to="sillytavern")
    with pytest.raises(ValidationFailed) as bad:
        book_export(actor=member, book=own, to="docx")
    assert bad.value.field == "format"


def test_export_of_an_imported_file_restores_its_unknown_fields(tenant_a):
    doc = world([st_entry(0, mysteryField={"kept": [1, 2]}, comment="Kept name")], customTop="kept too")
    imported = book_import_new(
        actor=member_actor(tenant_a), data=json.dumps(doc).encode(), filename="w.json", profile="classic"
    )
    out = json.loads(book_export(actor=member_actor(tenant_a), book=imported.book, to="sillytavern")[0])
    assert out["customTop"] == "kept too"
    assert out["entries"]["0"]["mysteryField"] == {"kept": [1, 2]}
    assert out["entries"]["0"]["comment"] == "Kept name"
