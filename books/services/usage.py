"""Usage statistics of entries (W-11): not lore, so no version bump."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from books.models import Book, Entry
from lore_platform.tenancy.models import Tenant


def entries_record_usage(
    *,
    tenant: Tenant,
    entry_ids: Iterable[int] = (),
    counts: Mapping[int, int] | None = None,
    used_at: datetime | None = None,
) -> int:
    """Count uses in chats (W-11): one for each of ``entry_ids`` (repeats count once), or
    ``counts[entry id]`` each (the usage sweep adds up many turns). Returns the entries changed.

    Usage statistics are not lore: they do not bump the book version, so caches
    keyed on it survive every turn.
    """
    uses = dict.fromkeys(entry_ids, 1)
    for entry_id, count in (counts or {}).items():
        uses[entry_id] = uses.get(entry_id, 0) + count
    by_count: dict[int, list[int]] = {}
    for entry_id, count in uses.items():
        if count > 0:
            by_count.setdefault(count, []).append(entry_id)
    when = used_at or timezone.now()
    if len(by_count) > 1:
        # Several statements touch these rows: lock them in id order first, so two
        # concurrent sweeps queue instead of deadlocking.
        with transaction.atomic():
            list(Entry.objects.for_tenant(tenant).filter(pk__in=sorted(uses)).order_by("pk")
                 .select_for_update().values_list("pk", flat=True))
            return _usage_apply(tenant, by_count, when)
    return _usage_apply(tenant, by_count, when)


def _usage_apply(tenant: Tenant, by_count: dict[int, list[int]], when: datetime) -> int:
    changed = 0
    # One UPDATE per distinct count (a handful), not one per entry.
    for count, ids in sorted(by_count.items()):
        changed += (
            Entry.objects.for_tenant(tenant)
            .filter(pk__in=sorted(ids))
            .update(usage_count=F("usage_count") + count, last_used_at=when)
        )
    return changed


def entries_flag_regex_overruns(*, book: Book, overruns: Mapping[int, Mapping[str, str]]) -> int:
    """Flag regex keys that overran a turn's time budget on their entries (``{entry id: {key: reason}}``).

    Writes only entries not flagged for that key already, so a key that overruns on every turn
    costs one read per turn, not one write. Not lore: no version bump. Returns the entries changed.
    """
    changed = 0
    rows = Entry.objects.for_tenant(book.tenant).filter(book=book, pk__in=sorted(overruns)).only("pk", "regex_overruns")
    for entry in rows:
        merged = {**entry.regex_overruns, **{k: v for k, v in overruns[entry.pk].items() if k not in entry.regex_overruns}}
        if merged != entry.regex_overruns:
            changed += Entry.objects.for_tenant(book.tenant).filter(pk=entry.pk).update(regex_overruns=merged)
    return changed
