"""Tenant scoping by construction (lore_platform/tenancy/scoping.py).

A query over tenant data that did not say whose rows it reads is refused when it reaches the database,
whatever shape it takes; a relation from a scoped row is scoped by that row; a cross-tenant read is an
explicit ``unscoped()`` that lives only where reading across tenants is the point.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.apps import apps

from books.models import Book, Entry
from lore_platform.api.base import TenantGenericAPIView, TenantViewSet
from lore_platform.tenancy.models import ApiKey, Membership
from lore_platform.tenancy.scoping import TenantScopedManager, UnscopedQuery
from tests.books.factories import make_book, make_entry

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ["config", "web", "backup", "cast", "jobs", "sharing", "retrieval", "books", "lore_platform"]
# Where reading across tenants is the point (authentication, public library, the usage and jobs sweeps).
UNSCOPED_ALLOWED = {
    "lore_platform/tenancy/selectors.py",
    "cast/usage.py",
    "sharing/selectors.py",
    "jobs/selectors.py",
}


def test_tenant_models_use_the_scoped_manager() -> None:
    names = {m.__name__ for m in apps.get_models() if isinstance(m._default_manager, TenantScopedManager)}
    assert {"ApiKey", "Membership", "Book", "Entry", "Lineage", "Character", "Chat", "RequestLog", "Job"} <= names


def test_an_unscoped_query_is_refused_whatever_its_shape(tenant_a, tenant_b) -> None:
    make_book(tenant_a, title="Ours")
    theirs = make_book(tenant_b, title="Theirs")
    attempts = {
        "list": lambda: list(Book.objects.filter(title="Theirs")),
        "all": lambda: list(Book.objects.all()),
        "get": lambda: Book.objects.get(pk=theirs.pk),
        "first": lambda: Book.objects.order_by("pk").first(),
        "count": lambda: Book.objects.count(),
        "exists": lambda: Book.objects.filter(pk=theirs.pk).exists(),
        "values": lambda: list(Book.objects.values_list("title", flat=True)),
        "iterator": lambda: list(Book.objects.filter(pk=theirs.pk).iterator()),
        "update": lambda: Book.objects.filter(pk=theirs.pk).update(title="Taken"),
        "delete": lambda: Book.objects.filter(pk=theirs.pk).delete(),
        "subquery": lambda: list(Entry.objects.for_tenant(tenant_a.tenant).filter(book__in=Book.objects.all())),
        "get_or_create": lambda: Book.objects.get_or_create(pk=theirs.pk),
    }
    refused = []
    for shape, attempt in attempts.items():
        with pytest.raises(UnscopedQuery):
            attempt()
        refused.append(shape)
    assert refused == list(attempts)
    assert Book.objects.unscoped().get(pk=theirs.pk).title == "Theirs"  # nothing was changed on the way


def test_a_scoped_query_reads_its_tenant_only(tenant_a, tenant_b) -> None:
    ours = make_book(tenant_a, title="Ours")
    make_book(tenant_b, title="Theirs")
    scoped = Book.objects.for_tenant(tenant_a.tenant)
    assert {b.title for b in scoped.filter(title__in=["Ours", "Theirs"])} == {"Ours"}
    assert scoped.filter(pk=ours.pk).exclude(title="x").order_by("pk").values_list("title", flat=True)[0] == "Ours"
    assert Book.objects.for_tenant(tenant_a.tenant).filter(pk=ours.pk).update(title="Renamed") == 1


def test_a_relation_is_scoped_by_the_row_it_hangs_from(tenant_a) -> None:
    book = make_book(tenant_a, title="Ours")
    make_entry(book, title="Salt")
    assert [e.title for e in book.entries.all()] == ["Salt"]
    assert tenant_a.tenant.books.filter(pk=book.pk).count() == 1
    assert list(Book.objects.for_tenant(tenant_a.tenant).filter(pk=book.pk).prefetch_related("entries"))[0]
    # A user is no scope: they may belong to several tenants, so reading their memberships says so.
    with pytest.raises(UnscopedQuery):
        list(tenant_a.admin.memberships.all())
    assert tenant_a.admin.memberships.unscoped().filter(tenant=tenant_a.tenant).count() == 1
    assert Membership.objects.for_tenant(tenant_a.tenant).filter(user=tenant_a.admin).exists()


def test_the_base_views_cannot_be_opened_around_the_scope() -> None:
    for base in (TenantViewSet, TenantGenericAPIView):
        with pytest.raises(TypeError, match="get_queryset"):
            type("Leaky", (base,), {"get_queryset": lambda self: ApiKey.objects.unscoped()})
    type("Narrowed", (TenantViewSet,), {"scoped_queryset": lambda self, actor: Book.objects.for_tenant(actor.tenant)})


def test_unscoped_lives_only_where_a_cross_tenant_read_is_the_point() -> None:
    # grep-visible: an explicit cross-tenant read in any other module is a review finding.
    pattern = re.compile(r"\.unscoped\(\)")
    offences = []
    for folder in SOURCE_DIRS:
        for path in (REPO / folder).rglob("*.py"):
            rel = path.relative_to(REPO).as_posix()
            if "migrations" in path.parts or "/management/" in rel or rel in UNSCOPED_ALLOWED:
                continue
            if rel == "lore_platform/tenancy/scoping.py":
                continue
            offences += [f"{rel}:{n}" for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert offences == []
