"""Sticky, cooldown and delay (SillyTavern's ``WorldInfoTimedEffects``).

The state lives with the chat (``chat_metadata.timedWorldInfo``); here it is a
frozen value passed into a scan and returned updated. The clock is the chat
length: the number of messages SillyTavern scanned, system messages excluded.
Effects are tied to the entry's fingerprint, so an edited entry no longer picks
up its running effects; those stay on record until they run out.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .entries import WorldInfoEntry
from .jscompat import number_or_int, to_number

EffectKind = Literal["sticky", "cooldown", "delay"]
StoredKind = Literal["sticky", "cooldown"]
_STORED_KINDS: tuple[StoredKind, ...] = ("sticky", "cooldown")


@dataclass(frozen=True, kw_only=True)
class TimedEffect:
    hash: str
    start: float
    end: float
    protected: bool = False

    def to_json(self, *, with_hash: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {"start": self.start, "end": self.end, "protected": self.protected}
        if with_hash:
            data = {"hash": self.hash, **data}
        return data


@dataclass(frozen=True, kw_only=True)
class TimedEffectsState:
    """``timedWorldInfo``: effects keyed ``"<world>.<uid>"``, in insertion order."""

    sticky: tuple[tuple[str, TimedEffect], ...] = ()
    cooldown: tuple[tuple[str, TimedEffect], ...] = ()

    def to_json(self, *, with_hash: bool = True) -> dict[str, dict[str, dict[str, Any]]]:
        return {
            "sticky": {key: effect.to_json(with_hash=with_hash) for key, effect in self.sticky},
            "cooldown": {key: effect.to_json(with_hash=with_hash) for key, effect in self.cooldown},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> TimedEffectsState:
        def read(kind: str) -> tuple[tuple[str, TimedEffect], ...]:
            effects = (data or {}).get(kind)
            if not isinstance(effects, Mapping):
                return ()
            return tuple(
                (
                    str(key),
                    TimedEffect(
                        hash=str(value.get("hash", "")),
                        start=number_or_int(to_number(value.get("start"))),
                        end=number_or_int(to_number(value.get("end"))),
                        protected=bool(value.get("protected")),
                    ),
                )
                for key, value in effects.items()
                if isinstance(value, Mapping)  # SillyTavern drops malformed records
            )

        return cls(sticky=read("sticky"), cooldown=read("cooldown"))


class TimedEffectsRun:
    """The timed-effect bookkeeping of one scan: which entries are sticky, cooling down or delayed."""

    def __init__(
        self,
        *,
        chat_length: int,
        entries: Sequence[WorldInfoEntry],
        state: TimedEffectsState,
        dry_run: bool,
        by_fingerprint: Mapping[str, WorldInfoEntry] | None = None,
        delayed: Sequence[WorldInfoEntry] | None = None,
    ) -> None:
        """``entries`` in scan order; ``by_fingerprint`` (first entry per fingerprint) and
        ``delayed`` (entries with a delay) may be passed precomputed."""
        self.chat_length = chat_length
        self.dry_run = dry_run
        self._delayed = [entry for entry in entries if entry.delay] if delayed is None else delayed
        self._store: dict[str, dict[str, TimedEffect]] = {
            "sticky": dict(state.sticky),
            "cooldown": dict(state.cooldown),
        }
        if by_fingerprint is None:
            first: dict[str, WorldInfoEntry] = {}
            for entry in entries:
                first.setdefault(entry.fingerprint, entry)
            by_fingerprint = first
        self._by_fingerprint = by_fingerprint
        self._active: dict[str, set[str]] = {"sticky": set(), "cooldown": set(), "delay": set()}

    def check(self) -> None:
        """``checkTimedEffects``: expire, drop and apply the stored effects; compute delays.

        A dry run leaves sticky and cooldown alone but still applies ``delay`` (1.13+).
        """
        if not self.dry_run:
            self._check_kind("sticky")
            self._check_kind("cooldown")
        for entry in self._delayed:
            if self.chat_length < entry.delay:
                self._active["delay"].add(entry.fingerprint)

    def _check_kind(self, kind: StoredKind) -> None:
        store = self._store[kind]
        for key, effect in list(store.items()):
            entry = self._by_fingerprint.get(effect.hash)
            if self.chat_length <= effect.start and not effect.protected:
                del store[key]  # the chat did not advance: regenerate, swipe or edit
                continue
            if entry is None:  # edited or gone: the record waits out its end
                if self.chat_length >= effect.end:
                    del store[key]
                continue
            if not getattr(entry, kind):
                del store[key]
                continue
            if self.chat_length >= effect.end:
                del store[key]
                if kind == "sticky" and entry.cooldown:
                    # Quirk: the cooldown that follows a sticky period starts now, protected.
                    self._store["cooldown"][entry.key] = self._effect(entry, "cooldown", protected=True)
                    self._active["cooldown"].add(entry.fingerprint)
                continue
            self._active[kind].add(entry.fingerprint)

    def _effect(self, entry: WorldInfoEntry, kind: StoredKind, *, protected: bool) -> TimedEffect:
        duration = entry.sticky if kind == "sticky" else entry.cooldown
        return TimedEffect(
            hash=entry.fingerprint,
            start=self.chat_length,
            end=number_or_int(self.chat_length + duration),
            protected=protected,
        )

    def is_active(self, kind: EffectKind, entry: WorldInfoEntry) -> bool:
        return entry.fingerprint in self._active[kind]

    def active_fingerprints(self, kind: EffectKind) -> frozenset[str]:
        return frozenset(self._active[kind])

    def record(self, activated: Iterable[WorldInfoEntry]) -> None:
        """``setTimedEffects``: start sticky/cooldown for activated entries that have none running."""
        if self.dry_run:
            return
        for entry in activated:
            for kind in _STORED_KINDS:
                if not getattr(entry, kind):
                    continue
                store = self._store[kind]
                if entry.key not in store:
                    store[entry.key] = self._effect(entry, kind, protected=False)

    def state(self) -> TimedEffectsState:
        return TimedEffectsState(
            sticky=tuple(self._store["sticky"].items()), cooldown=tuple(self._store["cooldown"].items())
        )
