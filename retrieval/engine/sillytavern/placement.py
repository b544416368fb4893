"""Where activated entries go in the prompt (the end of SillyTavern's ``checkWorldInfo``).

Activated entries are sorted by ``order`` descending and *prepended* to their
slot, so each slot reads in ascending ``order`` and equal orders come out in
reverse activation order. ``@depth`` entries are grouped by (depth, role) in
the order groups are first met. Author's Note entries wrap the note only when
it is inserted this generation. Entries with empty content go nowhere.

Outlet entries (1.13+, position 7) are the exception to prepending: they are
*appended* to their named outlet, so an outlet lists the highest ``order``
first and equal orders in activation order. An outlet entry without a name is
activated but listed nowhere.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from .entries import DEFAULT_DEPTH, Position, Role, WorldInfoEntry
from .jscompat import object_key_order, sort_by_order_descending


@dataclass(frozen=True, kw_only=True)
class PlacedEntry:
    uid: int | str | None
    world: str
    content: str


@dataclass(frozen=True, kw_only=True)
class ExampleInjection:
    """An example-messages entry: ``before`` (EM top) or ``after`` (EM bottom)."""

    position: Literal["before", "after"]
    entry: PlacedEntry


@dataclass(frozen=True, kw_only=True)
class DepthInjection:
    """Entries injected ``depth`` messages from the end with one role.

    ``depth`` is the first entry's raw value (``None`` when unset, which is
    then grouped as depth 4 but reported as SillyTavern reports it).
    """

    depth: int | None
    role: int
    entries: tuple[PlacedEntry, ...]

    @property
    def text(self) -> str:
        return "\n".join(entry.content for entry in self.entries)


@dataclass(frozen=True, kw_only=True)
class WorldInfoPrompt:
    before: tuple[PlacedEntry, ...] = ()
    after: tuple[PlacedEntry, ...] = ()
    an_top: tuple[PlacedEntry, ...] = ()
    an_bottom: tuple[PlacedEntry, ...] = ()
    examples: tuple[ExampleInjection, ...] = ()
    depth: tuple[DepthInjection, ...] = ()
    authors_note: str | None = field(default=None)
    """The Author's Note with its WI entries, or None when the note is not inserted this time."""
    outlets: tuple[tuple[str, tuple[PlacedEntry, ...]], ...] = ()
    """Named outlets in the order first filled, each with its entries (``outletEntries``)."""

    def outlet_text(self, name: str) -> str:
        """What ``{{outlet::name}}`` stands for: the outlet's entries joined by newlines ("" if none)."""
        for outlet, entries in self.outlets:
            if outlet == name:
                return "\n".join(entry.content for entry in entries)
        return ""

    @property
    def before_text(self) -> str:
        return "\n".join(entry.content for entry in self.before)

    @property
    def after_text(self) -> str:
        return "\n".join(entry.content for entry in self.after)


_AN_EDGE_NEWLINES = re.compile(r"\A\n|\n\Z")


def place_entries(
    activated: Sequence[tuple[WorldInfoEntry, str]], *, authors_note: str | None
) -> WorldInfoPrompt:
    """Build the prompt slots from (entry, final content) pairs in activation order.

    ``authors_note`` is the note's text when it is inserted this generation.
    """
    before: list[PlacedEntry] = []
    after: list[PlacedEntry] = []
    an_top: list[PlacedEntry] = []
    an_bottom: list[PlacedEntry] = []
    examples: list[ExampleInjection] = []
    depth_groups: list[tuple[int | None, int, list[PlacedEntry]]] = []
    outlets: dict[str, list[PlacedEntry]] = {}

    for entry, content in sort_by_order_descending(list(activated), lambda pair: pair[0].order):
        if not content:
            continue
        placed = PlacedEntry(uid=entry.uid, world=entry.world, content=content)
        position = entry.position
        if position == Position.BEFORE:
            before.insert(0, placed)
        elif position == Position.AFTER:
            after.insert(0, placed)
        elif position == Position.EM_TOP:
            examples.insert(0, ExampleInjection(position="before", entry=placed))
        elif position == Position.EM_BOTTOM:
            examples.insert(0, ExampleInjection(position="after", entry=placed))
        elif position == Position.AN_TOP:
            an_top.insert(0, placed)
        elif position == Position.AN_BOTTOM:
            an_bottom.insert(0, placed)
        elif position == Position.AT_DEPTH:
            depth = entry.depth if entry.depth is not None else DEFAULT_DEPTH
            role = entry.role if entry.role is not None else Role.SYSTEM
            for group_depth, group_role, members in depth_groups:
                # Quirk: a group opened by an entry without depth keeps None and never matches 4.
                if group_depth == depth and group_role == role:
                    members.insert(0, placed)
                    break
            else:
                depth_groups.append((entry.depth, role, [placed]))
        elif position == Position.OUTLET and entry.outlet_name:
            outlets.setdefault(entry.outlet_name, []).append(placed)

    note: str | None = None
    if authors_note is not None:
        top = "\n".join(entry.content for entry in an_top)
        bottom = "\n".join(entry.content for entry in an_bottom)
        note = _AN_EDGE_NEWLINES.sub("", f"{top}\n{authors_note}\n{bottom}")

    return WorldInfoPrompt(
        before=tuple(before),
        after=tuple(after),
        an_top=tuple(an_top),
        an_bottom=tuple(an_bottom),
        examples=tuple(examples),
        depth=tuple(DepthInjection(depth=d, role=r, entries=tuple(m)) for d, r, m in depth_groups),
        authors_note=note,
        outlets=tuple((name, tuple(outlets[name])) for name in object_key_order(outlets)),  # JS key order
    )
