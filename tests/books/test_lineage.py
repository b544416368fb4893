"""Persona lineage books (S-2): the book belongs to the lineage and survives delete + re-import."""
from __future__ import annotations

import pytest

from books import selectors, services
from books.lineages import lineage_get_or_create
from books.models import Book, Entry, Lineage, Profile, Scope
from cast.models import Character
from cast.services import character_delete, character_import
from lore_platform.errors import Conflict, LimitExceeded, NotFound, ValidationFailed
from tests.books.factories import admin_actor, fill, member_actor

pytestmark = pytest.mark.django_db


def test_book_survives_delete_and_reimport(tenant_a):
    actor = admin_actor(tenant_a)
    ada = character_import(tenant=tenant_a.tenant, name="Ada", lineage_key="Ada Lovelace by @maker")
    book = services.persona_book_get_or_create(actor=actor, lineage=ada.lineage, title="Ada's lore")
    services.entries_create_bulk(actor=actor, book=book, entries=[{"title": "Engine", "content": "Analytical."}])

    character_delete(actor=admin_actor(tenant_a), character=ada)
    assert not Character.objects.for_tenant(tenant_a.tenant).exists()
    assert Book.objects.for_tenant(tenant_a.tenant).filter(pk=book.pk).exists()

    again = character_import(tenant=tenant_a.tenant, name="Ada", lineage_key="  ada lovelace BY @maker ")
    assert again.pk != ada.pk and again.lineage_id == ada.lineage_id
    found = selectors.book_for_lineage(actor=actor, lineage=again.lineage)
    assert found.pk == book.pk
    assert services.persona_book_get_or_create(actor=actor, lineage=again.lineage).pk == book.pk
    assert list(Entry.objects.for_tenant(tenant_a.tenant).filter(book=found).values_list("title", flat=True)) == ["Engine"]


def test_personas_sharing_a_lineage_share_one_book(tenant_a):
    actor = admin_actor(tenant_a)
    one = character_import(tenant=tenant_a.tenant, name="Ada (winter)", lineage_key="ada")
    two = character_import(tenant=tenant_a.tenant, name="Ada (summer)", lineage_key="ada")
    assert one.lineage_id == two.lineage_id
    book = services.persona_book_get_or_create(actor=actor, lineage=one.lineage)
    assert services.persona_book_get_or_create(actor=actor, lineage=two.lineage).pk == book.pk
    with pytest.raises(Conflict) as exc_info:
        services.book_create(actor=actor, title="Second", profile=Profile.SERVER, scope=Scope.PERSONA, lineage=two.lineage)
    assert exc_info.value.rule == "S-2"
    assert Book.objects.for_tenant(tenant_a.tenant).count() == 1


def test_the_250_limit_is_per_lineage_across_reimports(tenant_a):
    actor = admin_actor(tenant_a)
    ada = character_import(tenant=tenant_a.tenant, name="Ada")
    book = services.persona_book_get_or_create(actor=actor, lineage=ada.lineage)
    fill(book, 250)
    character_delete(actor=admin_actor(tenant_a), character=ada)
    again = character_import(tenant=tenant_a.tenant, name="Ada")
    same = services.persona_book_get_or_create(actor=actor, lineage=again.lineage)
    with pytest.raises(LimitExceeded) as exc_info:
        services.entry_create(actor=actor, book=same, title="More", content="lore")
    assert exc_info.value.rule == "S-14"


def test_lineage_rules(tenant_a, tenant_b):
    actor = admin_actor(tenant_a)
    with pytest.raises(ValidationFailed):
        services.book_create(actor=actor, title="No lineage", profile=Profile.SERVER, scope=Scope.PERSONA)
    lineage = lineage_get_or_create(tenant=tenant_a.tenant, key="x")
    with pytest.raises(ValidationFailed):
        services.book_create(actor=actor, title="Wrong", profile=Profile.SERVER, scope=Scope.SERVER, lineage=lineage)
    foreign = lineage_get_or_create(tenant=tenant_b.tenant, key="x")
    with pytest.raises(NotFound):
        services.book_create(actor=actor, title="Foreign", profile=Profile.SERVER, scope=Scope.PERSONA, lineage=foreign)
    with pytest.raises(NotFound):
        services.book_create(
            actor=actor, title="Foreign", profile=Profile.SERVER, scope=Scope.PERSONA, lineage=str(foreign.public_id)
        )
    assert not Book.objects.for_tenant(tenant_a.tenant).exists()
    assert Lineage.objects.for_tenant(tenant_a.tenant).count() == 1


def test_members_cannot_create_persona_books_but_read_them(tenant_a):
    ada = character_import(tenant=tenant_a.tenant, name="Ada")
    from lore_platform.errors import PermissionDenied

    with pytest.raises(PermissionDenied):
        services.persona_book_get_or_create(actor=member_actor(tenant_a), lineage=ada.lineage)
    book = services.persona_book_get_or_create(actor=admin_actor(tenant_a), lineage=ada.lineage)
    assert selectors.book_for_lineage(actor=member_actor(tenant_a), lineage=ada.lineage).pk == book.pk
    rows = tenant_a.member_client.get("/api/v1/books", {"lineage": str(ada.lineage.public_id)}).json()["results"]
    assert [r["id"] for r in rows] == [book.pk]
