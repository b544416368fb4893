"""Inclusion groups (SillyTavern's ``filterByInclusionGroups``), applied to each pass's candidates.

Within a pass, entries sharing a group name compete: sticky members win
outright, members on cooldown or delay drop out, then (with group scoring) the
members matching fewer keys, then a ``groupOverride`` member with the highest
``order`` wins, or a weighted roll picks one. Candidates are removed with
JavaScript's ``splice(indexOf(entry), 1)``, which matters: removing an entry
that is already gone removes the *last* candidate instead (quirk kept).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Collection

from .entries import WorldInfoEntry
from .jscompat import JS_WHITESPACE_CHARS, object_key_order, sort_by_order_descending
from .timed_effects import EffectKind

_GROUP_SEPARATOR = re.compile(",[" + re.escape(JS_WHITESPACE_CHARS) + "]*")
_BLOCKING_EFFECTS: tuple[EffectKind, ...] = ("cooldown", "delay")


def group_names(group: str) -> list[str]:
    """``group.split(/,\\s*/).filter(x => x)``."""
    return [name for name in _GROUP_SEPARATOR.split(group) if name]


def filter_by_inclusion_groups(
    candidates: list[int],
    *,
    entry_of: Callable[[int], WorldInfoEntry],
    activated_groups: Collection[str],
    is_active: Callable[[EffectKind, WorldInfoEntry], bool],
    score: Callable[[int], int],
    use_group_scoring: bool,
    random: Callable[[], float],
) -> None:
    """Remove group losers from ``candidates`` (a pass's entries, as indexes) in place."""
    grouped: dict[str, list[int]] = {}
    for candidate in candidates:
        group_field = entry_of(candidate).group
        if group_field:
            for name in group_names(group_field):
                grouped.setdefault(name, []).append(candidate)
    if not grouped:
        return
    order = object_key_order(grouped)  # groups are visited in JavaScript object-key order

    def remove(candidate: int) -> None:
        if candidate in candidates:
            candidates.remove(candidate)
        elif candidates:
            candidates.pop()  # Quirk: splice(-1, 1) drops the last candidate.

    def remove_all_but(group: list[int], chosen: int | None) -> None:
        for member in group:
            if member != chosen:
                remove(member)

    # Timed effects: sticky members win; cooldown/delay members are removed.
    has_sticky: dict[str, bool] = {}
    for name in order:
        group = grouped[name]
        sticky = [member for member in group if is_active("sticky", entry_of(member))]
        has_sticky[name] = bool(sticky)
        if sticky:
            for member in group:
                if member not in sticky:
                    remove(member)
        for kind in _BLOCKING_EFFECTS:
            for member in [member for member in group if is_active(kind, entry_of(member))]:
                remove(member)

    # Group scoring: members that match fewer keys lose.
    for name in order:
        group = grouped[name]
        if not use_group_scoring and not any(entry_of(member).use_group_scoring for member in group):
            continue
        if has_sticky[name]:
            continue
        scores = [score(member) for member in group]
        best = max(scores)
        index = 0
        while index < len(group):
            own_setting = entry_of(group[index]).use_group_scoring
            scored = own_setting if own_setting is not None else use_group_scoring
            if scored and scores[index] < best:
                remove(group[index])
                del group[index]
                del scores[index]
                continue
            index += 1

    for name in order:
        group = grouped[name]
        if has_sticky[name]:
            continue
        if name in activated_groups:
            # Quirk: only an activated entry with exactly this group string blocks the group.
            remove_all_but(group, None)
            continue
        if len(group) <= 1:
            continue
        overrides = [member for member in group if entry_of(member).group_override]
        if overrides:
            winner = sort_by_order_descending(overrides, lambda member: entry_of(member).order)[0]
            remove_all_but(group, winner)
            continue
        total: float = sum(entry_of(member).group_weight for member in group)
        roll = random() * total
        cumulative: float = 0
        chosen: int | None = None
        for member in group:
            cumulative += entry_of(member).group_weight
            if roll <= cumulative:
                chosen = member
                break
        if chosen is not None:
            remove_all_but(group, chosen)
