"""Profile mapping (I-5), the import receipt (I-4) and the import plan (I-2, I-3).

``map_for_profile(book, profile)`` decides, without a database, what an
import of ``book`` into a book of ``profile`` would write and reports it:

* skipped entries, each with its reason: unusable (empty content, a RisuAI
  folder marker, lore shorter than the profile's minimum) and duplicates —
  of an earlier entry of the same file, or of an entry already in the target
  book (append mode; see :func:`entry_fingerprint` for what "already exists"
  means);
* every setting in use that the profile has no equivalent for, named per
  entry and counted (groups, recursion flags, sticky, cooldown, delay,
  triggers, regex keys, world-info positions 2–7, decorators the profile
  does not know, NovelAI context settings …). Nothing is deleted: those
  settings stay in ``extra`` and travel on export;
* what the mapping changed (a title made up or shortened, a position mapped
  to before-persona).

Per profile (I-5): ``server`` places world-info positions 2–7 before the
persona and keeps regex-shaped keys as literal, inert text; ``smart`` reads
keys as aliases (and needs a 2–100 character title: an empty one is taken
from the first alias or the lore); ``classic`` keeps keys as triggers and its
``@@`` decorators (all decorators stay in the content as written, in every
profile); ``sillytavern`` supports every SillyTavern setting.

Limits (I-3): every mapped entry must pass ``books.limits.entry_fields_check``
for the profile — the service's own check — so an entry that cannot be stored
without losing lore (content over the profile maximum, too many or too long
aliases, a scan depth out of range …) refuses the whole import, listing every
offending entry; lore below the profile minimum is skipped as unusable, and so,
in ``server``, is content over its 4,000 characters (S-3: the rest imports).
:func:`plan_book` adds the entry caps (W-12 per world book, S-14 per persona
and for the server-wide pool). All checks run before anything is written.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from books import limits as book_limits
from books.fields import DEFAULT_ORDER, DEFAULT_PRIORITY
from books.formats.detect import read_book
from books.formats.limits import FormatLimits, current_limits, entry_cap
from books.formats.model import (
    EXTRA_ST,
    PROFILES,
    SCOPES,
    BookSettings,
    ImportedBook,
    ImportedEntry,
    book_text_check,
)
from books.formats.sillytavern import POSITION_NAMES, ST_UI_ONLY
from lore_platform.errors import DomainError, LimitExceeded, Phrase, Term, ValidationFailed

# SPEC §1: book title ≤ 120, description ≤ 2,000 (W-12).
MAX_BOOK_TITLE = 120
MAX_BOOK_DESCRIPTION = 2000
MAX_VIOLATIONS_SHOWN = 20

CLASSIC_DECORATORS = frozenset(
    {
        "probability",
        "scan_depth",
        "order",
        "priority",
        "role",
        "activate_only_after",
        "activate_only_every",
        "keep",
        "dont_activate_after_match",
        "is_greeting",
    }
)
SILLYTAVERN_DECORATORS = frozenset({"activate", "dont_activate"})
# K-1: the profiles whose turns evaluate an entry's key expression; elsewhere it waits in this
# ``extra`` namespace.
KEY_EXPRESSION_PROFILES = frozenset({"classic", "server"})
EXTRA_KEY_EXPRESSION = "key_expression"
_DECORATOR = re.compile(r"@@@?([A-Za-z_][\w-]*)")
# SillyTavern's regex-key shape: /body/flags with no unescaped slash in the body.
_REGEX_KEY = re.compile(r"^/((?:\\.|[^/\\])+)/([gimsuy]*)$", re.S)
# AI Dungeon EWIJSON script keys carry an attribute suffix like ``#[t=5l=5]``.
_EWIJSON_KEY = re.compile(r"#\[[^\]]*\]\s*$")
_SPACES = re.compile(r"\s+")

NOVELAI_CONTEXT_DEFAULTS: dict[str, Any] = {
    "prefix": "",
    "suffix": "\n",
    "reservedTokens": 0,
    "trimDirection": "trimBottom",
    "insertionType": "newline",
    "maximumTrimType": "sentence",
    "insertionPosition": -1,
}
NOVELAI_ENTRY_DEFAULTS: dict[str, Any] = {
    "searchRange": 1000,
    "keyRelative": False,
    "nonStoryActivatable": False,
    "loreBiasGroups": [],
    "advancedConditions": [],
}
# Profiles where an entry over the content maximum is skipped, not a refusal of the file (S-3).
SKIPS_OVERLONG = frozenset({"server"})
GROUP_TUNING = frozenset({"groupOverride", "groupWeight", "useGroupScoring"})
# Book settings each profile cannot use (classic and sillytavern use them all).
BOOK_UNSUPPORTED = {
    "server": ("token_budget", "recursive"),
    "smart": ("scan_depth", "token_budget", "recursive"),
}


# --- pure helpers the DB service also uses ----------------------------------------------


def normalise_text(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed and trimmed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def entry_fingerprint(title: str, content: str) -> str:
    """The duplicate rule for append imports (I-2, I-4).

    An imported entry *already exists* in a book when an entry there has the
    same title and the same content after :func:`normalise_text` (Unicode
    NFKC, case folding, runs of whitespace collapsed, ends trimmed). Keys and
    activation settings do not matter: importing the same lore with other
    keys is still a duplicate, and two entries that share a title but say
    different things are not. The DB service computes this for the target
    book's entries and passes the set as ``existing``.
    """
    digest = hashlib.sha256()
    digest.update(normalise_text(title).encode("utf-8"))
    digest.update(b"\x1f")
    digest.update(normalise_text(content).encode("utf-8"))
    return digest.hexdigest()


def decorators(content: str) -> list[str]:
    """Names of the ``@@`` decorator lines at the start of ``content``."""
    names: list[str] = []
    for line in content.lstrip("\r\n").splitlines():
        stripped = line.strip()
        if not stripped.startswith("@@"):
            break
        match = _DECORATOR.match(stripped)
        if match:
            names.append(match.group(1))
    return names


def regex_keys(keys: Iterable[str]) -> list[str]:
    return [key for key in keys if _REGEX_KEY.match(key.strip())]


def unusable_reason(entry: ImportedEntry) -> str | None:
    if not entry.content.strip():
        return Phrase("empty content")
    if entry.extra_ns("risu").get("mode") == "folder":
        return Phrase("RisuAI folder marker, not lore")
    return None


def entry_label(entry: ImportedEntry, index: int) -> str:
    if entry.title.strip():
        return entry.title.strip()
    if entry.keys:
        return entry.keys[0].strip()
    return f"#{index}"


# --- unsupported settings ------------------------------------------------------------


def _key_expression_placed(entry: ImportedEntry, profile: str) -> ImportedEntry:
    """K-1 across profiles: only classic and server books hold a key expression in the field.

    Elsewhere it is parked in ``extra`` (nothing is deleted; exports carry it) and the entry's keys
    apply; a keyword book importing such a file takes it back into the field.
    """
    if profile in KEY_EXPRESSION_PROFILES:
        parked = entry.extra_ns(EXTRA_KEY_EXPRESSION).get("expression")
        if entry.key_expression.strip() or not isinstance(parked, str):
            return entry
        extra = {ns: value for ns, value in entry.extra.items() if ns != EXTRA_KEY_EXPRESSION}
        return replace(entry, key_expression=parked, extra=extra)
    if not entry.key_expression.strip():
        return entry
    return replace(
        entry, key_expression="", extra={**entry.extra, EXTRA_KEY_EXPRESSION: {"expression": entry.key_expression}}
    )


def unsupported_settings(entry: ImportedEntry, profile: str) -> list[str]:
    """Settings in use on ``entry`` that ``profile`` has no equivalent for."""
    out: list[str] = []
    st = entry.extra_ns(EXTRA_ST)
    for name, value in st.items():
        if name in ST_UI_ONLY or name in ("useProbability", "probability", "depth"):
            # UI-only; probability folds into ``probability``; depth belongs to position 4.
            continue
        if name == "position":
            known = isinstance(value, int) and not isinstance(value, bool) and value in POSITION_NAMES
            if profile != "sillytavern" or not known:
                out.append(f"position:{POSITION_NAMES[value] if known else 'unknown'}")
            continue
        if profile == "sillytavern" or value in (False, 0, "", [], None):
            continue  # an explicit "off" changes nothing
        if name in GROUP_TUNING and not st.get("group"):
            continue  # weight/override/scoring without a group do nothing
        out.append(name)
    if profile == "smart":
        checks = {
            "secondary_keys": bool(entry.secondary_keys),
            "probability": entry.probability is not None,
            "scan_depth": entry.scan_depth is not None,
            "case_sensitive": entry.case_sensitive is not None,
            "whole_words": entry.whole_words is not None,
            "role": entry.role != "system",
            "priority": entry.priority != DEFAULT_PRIORITY,
            "order": entry.order != DEFAULT_ORDER,
        }
        out.extend(name for name, used in checks.items() if used)
    elif profile == "server":
        checks = {
            "priority": entry.priority != DEFAULT_PRIORITY,
            "role": entry.role != "system",
            "case_sensitive": bool(entry.case_sensitive),
        }
        out.extend(name for name, used in checks.items() if used)
    parked = isinstance(entry.extra_ns(EXTRA_KEY_EXPRESSION).get("expression"), str)
    if (entry.key_expression.strip() or parked) and profile not in KEY_EXPRESSION_PROFILES:
        out.append("key_expression")  # K-1: kept (and exported), but this profile reads the keys
    all_keys = entry.keys + entry.secondary_keys
    if profile != "sillytavern" and regex_keys(all_keys):
        out.append("regex_keys")
    if any(_EWIJSON_KEY.search(key) for key in all_keys):
        out.append("ewijson_keys")
    names = decorators(entry.content)
    if names:
        if profile == "classic":
            out.extend(f"decorator:@@{n}" for n in names if n not in CLASSIC_DECORATORS)
        elif profile == "sillytavern":
            out.extend(f"decorator:@@{n}" for n in names if n not in SILLYTAVERN_DECORATORS)
        else:
            out.append("decorators")
    out.extend(_foreign_settings(entry))
    return list(dict.fromkeys(out))


def _foreign_settings(entry: ImportedEntry) -> list[str]:
    out: list[str] = []
    nai = entry.extra_ns("novelai")
    for name, default in NOVELAI_ENTRY_DEFAULTS.items():
        if name in nai and nai[name] != default:
            groups = nai[name]
            if name == "loreBiasGroups" and isinstance(groups, list) and not any(
                isinstance(g, dict) and g.get("phrases") for g in groups
            ):
                continue
            out.append(f"novelai:{name}")
    config = nai.get("contextConfig")
    if isinstance(config, Mapping):
        for name, default in NOVELAI_CONTEXT_DEFAULTS.items():
            if name in config and config[name] != default:
                out.append(f"novelai:contextConfig.{name}")
    if nai.get("category"):
        out.append("novelai:category")
    risu = entry.extra_ns("risu")
    if risu.get("useRegex"):
        out.append("risu:useRegex")
    if risu.get("mode") in ("multiple", "child"):
        out.append(f"risu:mode={risu['mode']}")
    return out


# --- the mapping -----------------------------------------------------------------------


def _shorten(text: str, limit: int) -> str:
    text = _SPACES.sub(" ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,;:.-") + "…"


def _title_for(entry: ImportedEntry, profile: str) -> tuple[str, str | None]:
    """(title, change note) for ``profile``'s title limits (``books.limits``)."""
    bounds = book_limits.limits_for(profile).entry_title
    title = entry.title
    if bounds.min and len(title.strip()) < bounds.min:
        candidates = [k.strip() for k in entry.keys if len(k.strip()) >= bounds.min]
        lines = [line for line in entry.content.splitlines() if line.strip() and not line.lstrip().startswith("@@")]
        made = candidates[0] if candidates else (lines[0] if lines else entry.content)
        if bounds.max is not None:
            made = _shorten(made, bounds.max)
        return made, f"title {'empty' if not title.strip() else repr(title)} → {made!r} (a title is required)"
    if bounds.max is not None and len(title) > bounds.max:
        return _shorten(title, bounds.max), f"title shortened to {bounds.max} characters ({bounds.rule})"
    return title, None


def _entry_violations(entry: ImportedEntry, profile: str) -> list[DomainError]:
    """What ``books.limits.entry_fields_check`` (the service's own check) refuses."""
    fields = {
        "title": entry.title,
        "content": entry.content,
        "keys": list(entry.keys),
        "probability": entry.probability,
        "scan_depth": entry.scan_depth,
        "channels": list(entry.channels),
        "unresolved_channels": list(entry.unresolved_channels),
    }
    found: list[DomainError] = []
    for name, value in fields.items():
        try:
            book_limits.entry_fields_check(profile, {name: value})
        except DomainError as exc:
            found.append(exc)
    return found


def map_for_profile(
    book: ImportedBook,
    profile: str,
    *,
    existing: Iterable[str] = (),
) -> tuple[tuple[ImportedEntry, ...], dict[str, Any]]:
    """Map ``book`` for a book of ``profile``: (entries to write, receipt).

    ``existing`` holds the :func:`entry_fingerprint` of the entries already in
    the target book (append mode). Entries keep their order and are
    renumbered ``position`` 0…n-1. Raises ``LimitExceeded`` (nothing to
    write) when an entry breaks a per-entry limit of the profile.
    """
    if profile not in PROFILES:
        raise ValidationFailed(
            "unknown profile {profile}; expected one of {profiles}",
            values={"profile": repr(profile), "profiles": ", ".join(PROFILES)},
            field="profile",
            rule="I-5",
        )
    min_content = book_limits.limits_for(profile).entry_content
    seen: dict[str, int] = {}
    existing_set = frozenset(existing)
    mapped: list[ImportedEntry] = []
    skipped: list[dict[str, Any]] = []
    unsupported: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    by_setting: dict[str, list[dict[str, Any]]] = {}
    regex_named: list[dict[str, Any]] = []
    expressions: list[dict[str, Any]] = []
    changes: list[dict[str, Any]] = []
    violations: list[dict[str, Any]] = []

    for index, entry in enumerate(book.entries):
        label = entry_label(entry, index)
        reason = unusable_reason(entry)
        if reason is None and len(entry.content.strip()) < min_content.min:
            reason = Phrase("lore shorter than {minimum} characters ({rule})",
                            values={"minimum": min_content.min, "rule": min_content.rule})
        if reason is None and profile in SKIPS_OVERLONG and min_content.max is not None:
            if len(entry.content) > min_content.max:
                # S-3: an entry the converter cannot use; the rest of the file still imports.
                reason = Phrase("content is {length:,} characters; a {profile} entry holds at most {maximum:,} ({rule})",
                                values={"length": len(entry.content), "profile": profile, "maximum": min_content.max,
                                        "rule": min_content.rule})
        fingerprint = entry_fingerprint(entry.title, entry.content)
        # The book stores the title the profile gives an entry (made up when empty,
        # shortened when too long), so an earlier import matches under that title too.
        if reason is None and (
            fingerprint in existing_set
            or (existing_set and entry_fingerprint(_title_for(entry, profile)[0], entry.content) in existing_set)
        ):
            reason = Phrase("already in the book (same title and content)")
        if reason is None and fingerprint in seen:
            reason = Phrase("duplicate of entry #{number} in this file", values={"number": seen[fingerprint]})
        if reason is not None:
            skipped.append({"index": index, "entry": label, "reason": reason})
            continue
        seen[fingerprint] = index

        notes: list[str] = []
        title, note = _title_for(entry, profile)
        if note:
            notes.append(note)
        position = entry.extra_ns(EXTRA_ST).get("position")
        if profile == "server" and isinstance(position, int) and not isinstance(position, bool):
            notes.append(f"world-info position {position} ({POSITION_NAMES.get(position, 'unknown')}) → before persona")
        settings = unsupported_settings(entry, profile)
        if settings:
            inert = regex_keys(entry.keys + entry.secondary_keys) if "regex_keys" in settings else []
            unsupported.append({"index": index, "entry": label, "settings": settings, "regex_keys": inert})
            counts.update(settings)
            for name in settings:
                by_setting.setdefault(name, []).append({"index": index, "entry": label})
            if inert:
                regex_named.append({"index": index, "entry": label, "keys": inert})
        if notes:
            changes.append({"index": index, "entry": label, "changes": notes})
        entry = _key_expression_placed(entry, profile)
        parked = entry.extra_ns(EXTRA_KEY_EXPRESSION).get("expression")
        if entry.key_expression.strip() or isinstance(parked, str):
            expressions.append({"index": index, "entry": label, "key_expression": entry.key_expression or parked,
                                "used": profile in KEY_EXPRESSION_PROFILES})
        result = replace(entry, title=title, position=len(mapped))
        for error in _entry_violations(result, profile):
            violations.append({"index": index, "entry": label, "error": error})
        mapped.append(result)

    if violations:
        first = violations[0]["error"]
        listed = [
            {"index": v["index"], "entry": v["entry"], **v["error"].as_dict()} for v in violations[:MAX_VIOLATIONS_SHOWN]
        ]
        refusal = LimitExceeded if any(isinstance(v["error"], LimitExceeded) for v in violations) else ValidationFailed
        count = len(violations)
        raise refusal(
            f"entry {violations[0]['entry']!r}: {first.message} ({count} problem{'s' if count != 1 else ''} in all;"
            " nothing was imported)",
            field="entries",
            rule=first.rule,
            details={"violations": listed, "count": count, "all_or_nothing": "I-3"},
        )

    book_unsupported = [
        name for name in BOOK_UNSUPPORTED.get(profile, ()) if getattr(book.settings, name) not in (None, False)
    ]
    receipt: dict[str, Any] = {
        "format": book.source_format,
        "profile": profile,
        "book": {"name": book.name, "entries_in_file": len(book.entries)},
        "card_without_book": book.card_without_book,
        "added": len(mapped),
        "skipped": skipped,
        "skipped_count": len(skipped),
        "unsupported": unsupported,
        "unsupported_counts": dict(sorted(counts.items())),
        # I-4: each unsupported setting with the entries that had it, and regex keys by their text.
        "unsupported_settings": [
            {"setting": name, "count": len(items), "entries": items} for name, items in sorted(by_setting.items())
        ],
        "regex_keys": regex_named,
        # K-1: entries that carry a key expression; ``used`` false where the profile reads keys instead.
        "key_expressions": expressions,
        "book_unsupported": book_unsupported,
        "changes": changes,
        "keys_as": "aliases" if profile == "smart" else "triggers",
        "warnings": list(book.notes),
    }
    return tuple(mapped), receipt


# --- the import plan -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ImportPlan:
    """What an import will write, checked against every limit (nothing written yet).

    ``changes_nothing`` is true for a card without an embedded book (I-1): the
    service must not create or touch any book then. ``title``/``description``
    are the book's, already cut to W-12 (title 120, description 2,000);
    ``settings`` its scan settings with out-of-range values (C-2, C-3) reset
    to the profile default. ``entries`` already pass
    ``books.limits.entry_fields_check`` for the profile.
    """

    book: ImportedBook
    entries: tuple[ImportedEntry, ...]
    receipt: dict[str, Any]
    title: str
    description: str
    settings: BookSettings
    changes_nothing: bool


def plan_book(
    book: ImportedBook,
    *,
    profile: str,
    name: str | None = None,
    scope: str = "personal",
    existing: Iterable[str] = (),
    existing_count: int = 0,
) -> ImportPlan:
    """Map and check ``book`` for an import (I-2 … I-5).

    ``existing_count`` is what already counts against the profile's entry cap:
    the target book's entries (append), its pool without this book (replace:
    0 for a persona book, the other server-wide books' entries for a
    server-wide one), or the server-wide pool (a new server-wide book, S-14).
    ``existing`` are the fingerprints of the target book (append only).
    """
    if scope not in SCOPES:
        raise ValidationFailed("unknown scope {scope}", values={"scope": repr(scope)}, field="scope", rule="S-2")
    entries, receipt = map_for_profile(book, profile, existing=existing)
    cap = entry_cap(profile, scope)
    if cap is not None and existing_count + len(entries) > cap.value:
        if profile == "smart":
            holder = Term("a smart book")
        elif profile in ("classic", "sillytavern"):
            holder = Term("a classic or SillyTavern book")
        elif scope == "persona":
            holder = Term("a server persona")
        else:
            holder = Term("a server server-wide pool")
        raise LimitExceeded(
            "importing {adding:,} entries would make {total:,}; {holder} holds at most {limit:,} ({rule}) "
            "— nothing was imported",
            values={"adding": len(entries), "total": existing_count + len(entries), "holder": holder,
                    "limit": cap.value, "rule": cap.rule},
            field="entries",
            rule=cap.rule,
            details={
                "limit": cap.value,
                "actual": existing_count + len(entries),
                "existing": existing_count,
                "adding": len(entries),
                "unit": "entries",
                "all_or_nothing": "I-3",
            },
        )
    title = (name or "").strip() or book.name
    description = book.description
    warnings = receipt["warnings"]
    if len(title) > MAX_BOOK_TITLE:
        title = _shorten(title, MAX_BOOK_TITLE)
        warnings.append(Phrase("book name shortened to {limit} characters (W-12)", values={"limit": MAX_BOOK_TITLE}))
    if len(description) > MAX_BOOK_DESCRIPTION:
        description = description[: MAX_BOOK_DESCRIPTION - 1].rstrip() + "…"
        warnings.append(Phrase("book description shortened to {limit:,} characters (W-12)",
                               values={"limit": MAX_BOOK_DESCRIPTION}))
    settings = book.settings
    for name, limit in (("scan_depth", book_limits.BOOK_SCAN_DEPTH), ("token_budget", book_limits.BOOK_TOKEN_BUDGET)):
        value = getattr(settings, name)
        if value is not None and not limit.low <= value <= limit.high:
            # A scan setting is not lore: fall back to the profile default rather than refuse.
            settings = replace(settings, **{name: None})
            warnings.append(Phrase(
                "book {name} {value:,} is outside {low:,}–{high:,} ({rule}); the default is used",
                values={"name": name, "value": value, "low": limit.low, "high": limit.high, "rule": limit.rule}))
    if book.collection is not None:
        book_limits.book_fields_check({"tags": list(book.collection.tags), "language": book.collection.language})
    receipt["book"]["name"] = title
    return ImportPlan(
        book=book,
        entries=entries,
        receipt=receipt,
        title=title,
        description=description,
        settings=settings,
        changes_nothing=book.card_without_book,
    )


def plan_import(
    data: bytes,
    *,
    profile: str,
    filename: str | None = None,
    name: str | None = None,
    scope: str = "personal",
    existing: Iterable[str] = (),
    existing_count: int = 0,
    limits: FormatLimits | None = None,
) -> ImportPlan:
    """Read ``data`` (any supported format, detected by content) and plan its import."""
    book = read_book(data, filename=filename, limits=limits or current_limits())
    book_text_check(book)  # refused by name, as the import itself refuses it (I-1)
    return plan_book(
        book, profile=profile, name=name, scope=scope, existing=existing, existing_count=existing_count
    )
