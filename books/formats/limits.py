"""Format-level import limits (I-3) and the profile caps an import checks.

Every refusal names its rule: ``I-3`` for file size, card size, nesting and
the 500-entry import batch; per-profile entry limits come from
``books.limits`` (``W-12`` world books, ``S-3``/``S-14`` server books).

Card size limits are host settings (the server seed: "PNG and CHARX cards use
the host's persona import limits shown in the upload dialog"). A deployment
overrides any field of :class:`FormatLimits` with the Django setting
``LOREWEAVE_IMPORT_LIMITS = {"max_png_bytes": ...}``; :func:`current_limits`
reads it when Django is loaded with settings configured and falls back to
the defaults otherwise (the CLI never loads Django). ``FormatLimits.as_dict()`` is what
the API shows.

Per-profile entry limits (title, lore, aliases, scan depth, entry caps) are
not repeated here: they come from ``books.limits``, the one module the editor
and the DB import service check, so an import plan and the service agree.
"""
from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from books import limits as book_limits
from books.limits import Limit
from lore_platform.errors import LimitExceeded, ValidationFailed

MIB = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class FormatLimits:
    # I-3: JSON uploads (world info, card JSON, lorebooks) are at most 2 MB.
    max_json_bytes: int = book_limits.IMPORT_JSON_BYTES.value
    # Card size limits (host settings): the PNG / CHARX file, and the card JSON
    # decoded from a PNG text chunk or a CHARX ``card.json``.
    max_png_bytes: int = 10 * MIB
    max_charx_bytes: int = 32 * MIB
    max_card_json_bytes: int = 4 * MIB
    # CHARX zips: member count and the total size they claim once unpacked
    # (decompression-bomb guard; only card.json is ever inflated, with a cap).
    max_charx_members: int = 2000
    max_charx_uncompressed_bytes: int = 512 * MIB
    # W-12: one import brings at most 500 entries.
    max_import_batch: int = book_limits.IMPORT_BATCH.value
    # Deeper JSON than this is refused before parsing (real files reach ~10).
    max_json_depth: int = 100

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


DEFAULT_LIMITS = FormatLimits()


def check_batch(count: int, limits: FormatLimits) -> None:
    """I-3 / W-12: one import brings at most ``max_import_batch`` entries — checked
    before a single entry is built, so a 10,000-entry file costs nothing."""
    if count > limits.max_import_batch:
        raise LimitExceeded(
            "the file holds {count:,} entries; one import takes at most {limit:,}",
            values={"count": count, "limit": limits.max_import_batch},
            field="entries",
            rule=book_limits.IMPORT_BATCH.rule,
            details={"limit": limits.max_import_batch, "actual": count, "unit": "entries"},
        )


def limits_with(overrides: Mapping[str, Any] | None) -> FormatLimits:
    """Defaults with ``overrides`` applied; unknown names or bad values are refused."""
    if not overrides:
        return DEFAULT_LIMITS
    known = {f.name for f in fields(FormatLimits)}
    clean: dict[str, int] = {}
    for name, value in overrides.items():
        if name not in known:
            raise ValidationFailed("unknown import limit {name}", values={"name": repr(name)}, field=name, rule="I-3")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValidationFailed(
                "import limit {name} must be a positive integer", values={"name": repr(name)}, field=name, rule="I-3"
            )
        clean[name] = value
    return replace(DEFAULT_LIMITS, **clean)


def current_limits() -> FormatLimits:
    """The host's limits: ``settings.LOREWEAVE_IMPORT_LIMITS`` over the defaults."""
    if "django.conf" not in sys.modules:
        return DEFAULT_LIMITS  # the CLI: Django never loaded, nothing configured
    try:
        from django.conf import settings

        if not settings.configured:
            return DEFAULT_LIMITS
        overrides = getattr(settings, "LOREWEAVE_IMPORT_LIMITS", None)
    except Exception:  # Django missing or settings module broken: the CLI still works.
        return DEFAULT_LIMITS
    return limits_with(overrides)


def entry_cap(profile: str, scope: str) -> Limit | None:
    """The entry-count limit an import into a new/target book of ``profile`` meets."""
    if profile == "smart":
        return book_limits.SMART_ENTRIES_PER_BOOK
    if profile == "server":
        if scope == "persona":
            return book_limits.SERVER_ENTRIES_PER_LINEAGE
        return book_limits.SERVER_ENTRIES_SERVER_WIDE
    if profile in ("classic", "sillytavern"):
        return book_limits.CLASSIC_ENTRIES_PER_BOOK
    return None
