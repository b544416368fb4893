"""The tenant's native full backup and its restore (I-6): channels, collection state and
lineages survive; admins only; a restore is all or nothing and never overwrites."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backup.services import tenant_backup, tenant_restore
from books.lineages import lineage_get_or_create
from books.models import Book, Lineage, Profile, Scope
from cast.models import Character
from cast.services import character_import
from lore_platform.errors import Conflict, LimitExceeded, PayloadTooLarge, PermissionDenied, ValidationFailed
from lore_platform.tenancy.services import membership_set
from tests.books.factories import SMART_LORE, admin_actor, fill, make_book, make_entry, member_actor
from tests.books.io_support import assert_same_lore, entry_rows, tenant_state

pytestmark = pytest.mark.django_db

COLLECTION = ("profile", "scope", "visibility", "active", "channels", "tags", "language", "living_world", "living_world_review",
              "description")


def _lore(setup: Any) -> dict[str, Book]:
    """A tenant with one of every kind of book."""
    tenant = setup.tenant
    character_import(tenant=tenant, name="Hero", lineage_key="Hero of Varn")
    character_import(tenant=tenant, name="Hero (alt)", lineage_key="Hero of Varn")
    lineage_get_or_create(tenant=tenant, key="Bookless lineage")
    hero = Lineage.objects.for_tenant(tenant).get(key="hero of varn")
    books = {
        "server": make_book(
            setup, owner=None, profile=Profile.SERVER, title="Server rules", channels=["222"], active=False
        ),
        "persona": make_book(
            setup, owner=None, profile=Profile.SERVER, scope=Scope.PERSONA, lineage=hero, title="Hero lore"
        ),
        "mine": make_book(
            setup,
            owner="member",
            title="My notes",
            tags=["notes"],
            language="es",
            scan_depth=4,
            recursive=True,
            extra={"wi": {"originalData": {"name": "x"}}},
        ),
        "world": make_book(setup, owner="admin", profile=Profile.SMART, title="World", living_world=True,
                           living_world_review=True),
        "admins": make_book(setup, owner="admin", title="Admin's own", description="Kept"),
        "public": make_book(setup, owner="member", title="Published", visibility="public"),
    }
    make_entry(books["server"], content="Server-wide lore for every persona.", enabled=False, order=5)
    make_entry(
        books["persona"], content="Persona lore in two channels.", channels=["111", "333"], unresolved_channels=["#old"]
    )
    make_entry(books["persona"], content="Persona lore everywhere.", placement="before_persona", probability=0)
    make_entry(
        books["mine"], title="", content="Untitled note", keys=["note"], extra={"st": {"group": "g", "sticky": 1}}
    )
    make_entry(books["world"], content=SMART_LORE, constant=True)
    make_entry(books["admins"], content="Admin lore.")
    fill(books["public"], 10)
    return books


def _restored(tenant: Any, title: str) -> Book:
    return Book.objects.for_tenant(tenant).get(title=title)


def test_backup_is_admins_only(tenant_a):
    _lore(tenant_a)
    with pytest.raises(PermissionDenied) as denied:
        tenant_backup(actor=member_actor(tenant_a))
    assert denied.value.rule == "S-1"
    # A read is enough: an admin's read-only key may back up.
    assert tenant_backup(actor=admin_actor(tenant_a, scopes=frozenset({"read"})))


def test_backup_holds_what_the_admin_may_read(tenant_a):
    books = _lore(tenant_a)
    doc = json.loads(tenant_backup(actor=admin_actor(tenant_a)))
    assert doc["format"] == "loreweave-native" and doc["version"] == 1
    titles = {b["title"] for b in doc["books"]}
    # A member's private books stay theirs alone (books.access); non-private ones are in.
    assert titles == {"Server rules", "Hero lore", "World", "Admin's own", "Published"}
    persona = next(b for b in doc["books"] if b["title"] == "Hero lore")
    assert persona["collection"]["lineage_key"] == "hero of varn"
    assert persona["entries"][0]["channels"] == ["111", "333"]
    server = next(b for b in doc["books"] if b["title"] == "Server rules")
    assert server["collection"]["channels"] == ["222"] and server["collection"]["active"] is False
    assert {"key": "hero of varn", "characters": ["Hero", "Hero (alt)"]} in doc["lineages"]
    assert {"key": "bookless lineage", "characters": []} in doc["lineages"]
    assert books["mine"].title not in titles


def test_backup_and_restore_into_another_tenant(tenant_a, tenant_b):
    books = _lore(tenant_a)
    # The member's private books join the backup once they are shared with the tenant.
    Book.objects.for_tenant(tenant_a.tenant).filter(pk=books["mine"].pk).update(visibility="unlisted")
    # The member of tenant A is also a member of tenant B: their books go back to them.
    membership_set(tenant=tenant_b.tenant, user=tenant_a.member, role="member")
    data = tenant_backup(actor=admin_actor(tenant_a))

    receipt = tenant_restore(actor=admin_actor(tenant_b), data=data)
    assert receipt["books_restored"] == 6 and receipt["entries_restored"] == 16
    assert receipt["lineages"] == 2 and receipt["characters_created"] == 2
    for key, source in books.items():
        source.refresh_from_db()
        restored = _restored(tenant_b.tenant, source.title)
        assert_same_lore(source, restored)
        for field in COLLECTION:
            assert getattr(restored, field) == getattr(source, field), (key, field)
    owners = {b.title: b.owner for b in Book.objects.for_tenant(tenant_b.tenant).select_related("owner")}
    assert (
        owners["My notes"] == tenant_a.member and owners["Admin's own"] == tenant_b.admin
    )  # not a member: the restorer
    assert owners["World"] == tenant_b.admin and _restored(tenant_b.tenant, "World").living_world is True
    assert _restored(tenant_b.tenant, "World").living_world_review is True
    assert owners["Server rules"] is None and owners["Hero lore"] is None
    assert any("admin@alpha.test" in w for w in receipt["warnings"])
    persona = _restored(tenant_b.tenant, "Hero lore")
    assert persona.lineage.key == "hero of varn"
    assert sorted(
        Character.objects.for_tenant(tenant_b.tenant).filter(lineage=persona.lineage).values_list("name", flat=True)
    ) == ["Hero", "Hero (alt)"]
    assert Lineage.objects.for_tenant(tenant_b.tenant).filter(key="bookless lineage").exists()
    # Entries keep their channels and unresolved #channel names in the persona book.
    assert entry_rows(persona)[0]["channels"] == ["111", "333"]
    assert entry_rows(persona)[0]["unresolved_channels"] == ["#old"]


def test_restore_of_the_same_backup_again_is_refused_and_writes_nothing(tenant_a, tenant_b):
    _lore(tenant_a)
    data = tenant_backup(actor=admin_actor(tenant_a))
    before = tenant_state(tenant_a.tenant)
    lineages = Lineage.objects.for_tenant(tenant_a.tenant).count()
    with pytest.raises(Conflict) as clash:
        tenant_restore(actor=admin_actor(tenant_a), data=data)
    assert clash.value.rule in ("I-2", "S-2")
    assert tenant_state(tenant_a.tenant) == before
    assert Lineage.objects.for_tenant(tenant_a.tenant).count() == lineages


def test_a_persona_lineage_with_a_book_already_is_a_conflict(tenant_a, tenant_b):
    _lore(tenant_a)
    data = tenant_backup(actor=admin_actor(tenant_a))
    make_book(
        tenant_b,
        owner=None,
        profile=Profile.SERVER,
        scope=Scope.PERSONA,
        lineage=lineage_get_or_create(tenant=tenant_b.tenant, key="Hero of Varn"),
        title="Other title",
    )
    before = tenant_state(tenant_b.tenant)
    with pytest.raises(Conflict) as clash:
        tenant_restore(actor=admin_actor(tenant_b), data=data)
    assert clash.value.rule == "S-2"
    assert tenant_state(tenant_b.tenant) == before


def test_restore_is_all_or_nothing(tenant_a, tenant_b):
    _lore(tenant_a)
    doc = json.loads(tenant_backup(actor=admin_actor(tenant_a)))
    # The last book breaks a limit (S-3: server entries hold 4,000 characters) after others were written.
    doc["books"][-1]["collection"]["profile"] = "server"
    doc["books"][-1]["collection"]["scope"] = "server"
    doc["books"][-1]["collection"]["owner"] = None
    doc["books"][-1]["entries"][0]["content"] = "x" * 4001
    before = tenant_state(tenant_b.tenant)
    lineages = Lineage.objects.for_tenant(tenant_b.tenant).count()
    with pytest.raises(LimitExceeded) as over:
        tenant_restore(actor=admin_actor(tenant_b), data=json.dumps(doc).encode())
    assert over.value.rule == "S-3"
    assert tenant_state(tenant_b.tenant) == before
    assert Lineage.objects.for_tenant(tenant_b.tenant).count() == lineages
    assert Character.objects.for_tenant(tenant_b.tenant).count() == 0


def test_restore_respects_the_server_wide_pool(tenant_a, tenant_b):
    server = make_book(tenant_a, owner=None, profile=Profile.SERVER, title="Rules")
    fill(server, 200)
    data = tenant_backup(actor=admin_actor(tenant_a))
    existing = make_book(tenant_b, owner=None, profile=Profile.SERVER, title="Their rules")
    fill(existing, 51)
    before = tenant_state(tenant_b.tenant)
    with pytest.raises(LimitExceeded) as over:
        tenant_restore(actor=admin_actor(tenant_b), data=data)
    assert over.value.rule == "S-14"
    assert tenant_state(tenant_b.tenant) == before


def test_a_public_book_too_small_to_list_comes_back_unlisted(tenant_a, tenant_b):
    book = make_book(tenant_a, owner="admin", title="Tiny public", visibility="public")
    make_entry(book)
    receipt = tenant_restore(actor=admin_actor(tenant_b), data=tenant_backup(actor=admin_actor(tenant_a)))
    assert _restored(tenant_b.tenant, "Tiny public").visibility == "unlisted"
    assert any("unlisted" in w for w in receipt["warnings"])


def test_who_may_restore_and_what_is_refused(tenant_a, tenant_b, settings):
    _lore(tenant_a)
    data = tenant_backup(actor=admin_actor(tenant_a))
    before = tenant_state(tenant_b.tenant)
    with pytest.raises(PermissionDenied):
        tenant_restore(actor=member_actor(tenant_b), data=data)
    with pytest.raises(PermissionDenied):
        tenant_restore(actor=admin_actor(tenant_b, scopes=frozenset({"read"})), data=data)
    for bad in (b"", b"{ invalid", b'{"entries": {}}', b"\xff\xfe\xfa"):
        with pytest.raises(ValidationFailed):
            tenant_restore(actor=admin_actor(tenant_b), data=bad)
    newer = json.dumps({"format": "loreweave-native", "version": 2, "books": []}).encode()
    with pytest.raises(ValidationFailed) as version:
        tenant_restore(actor=admin_actor(tenant_b), data=newer)
    assert "version 2" in version.value.message
    settings.LOREWEAVE_BACKUP_MAX_BYTES = len(data) - 1
    with pytest.raises(PayloadTooLarge):
        tenant_restore(actor=admin_actor(tenant_b), data=data)
    assert tenant_state(tenant_b.tenant) == before
    settings.LOREWEAVE_BACKUP_MAX_BYTES = len(data)
    assert tenant_restore(actor=admin_actor(tenant_b), data=data)["books_restored"] == 5
