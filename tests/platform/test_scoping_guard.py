"""Every queryset over tenant data starts from the tenant-scoped manager.

A forgotten owner filter is a cross-tenant leak, so the code base is read for
``<TenantModel>.objects.<anything but for_tenant/unscoped/create>``, and
``unscoped()`` may appear only where a cross-tenant read is the point.
"""
from __future__ import annotations

import re
from pathlib import Path

from django.apps import apps

from lore_platform.tenancy.scoping import TenantScopedManager

REPO = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ["config", "web", "backup", "cast", "jobs", "sharing", "retrieval", "books", "lore_platform"]
# Where reading across tenants is the point (authentication, public library, the usage sweep).
UNSCOPED_ALLOWED = {
    "lore_platform/tenancy/selectors.py",
    "cast/usage.py",
    "sharing/selectors.py",
}
ALLOWED_METHODS = {"for_tenant", "unscoped", "create"}


def _scoped_model_names() -> set[str]:
    return {
        model.__name__
        for model in apps.get_models()
        if isinstance(model._default_manager, TenantScopedManager)
    }


def _sources() -> list[Path]:
    files: list[Path] = []
    for folder in SOURCE_DIRS:
        files.extend(p for p in (REPO / folder).rglob("*.py") if "migrations" not in p.parts)
    return files


def test_tenant_models_use_the_scoped_manager():
    names = _scoped_model_names()
    assert {"ApiKey", "Membership", "Book", "Entry", "Lineage", "Character"} <= names


def test_no_unscoped_query_on_tenant_models():
    names = _scoped_model_names()
    pattern = re.compile(r"\b(" + "|".join(sorted(names)) + r")\.objects\.(\w+)")
    offences = []
    for path in _sources():
        rel = path.relative_to(REPO).as_posix()
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            for match in pattern.finditer(line):
                method = match.group(2)
                if method not in ALLOWED_METHODS:
                    offences.append(f"{rel}:{lineno}: {match.group(0)}")
                elif method == "unscoped" and rel not in UNSCOPED_ALLOWED and "/management/" not in rel:
                    offences.append(f"{rel}:{lineno}: unscoped() outside the allowed modules")
    assert not offences, "\n".join(offences)
