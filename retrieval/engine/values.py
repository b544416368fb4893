"""Engine values: the frozen, keyword-only shapes the retrieval engine works on.

Everything that goes into or comes out of a turn is one of these. They carry no
behaviour beyond small conveniences, import nothing outside the standard
library, and never change after construction, so a compiled book set can be
cached and shared between requests and threads.

Entry and book fields follow SPEC.md §1: one superset that every profile reads
its own way (a classic entry ignores ``channels``, a server entry ignores
decorators, a smart entry reads ``aliases`` and ``canon``).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .sillytavern.entries import WorldInfoEntry

Profile = Literal["classic", "server", "smart", "sillytavern"]
Role = Literal["system", "user", "assistant"]
SecondaryLogic = Literal["and_any", "and_all", "not_any", "not_all"]
Placement = Literal["before_persona", "after_persona"]
Scope = Literal["server", "persona"]
# What the turn generates (SillyTavern's GENERATION_TYPE_TRIGGERS): entries may be limited to some.
GenerationType = Literal["normal", "continue", "impersonate", "swipe", "regenerate", "quiet"]
GENERATION_TYPES: frozenset[str] = frozenset({"normal", "continue", "impersonate", "swipe", "regenerate", "quiet"})

ROLES: frozenset[str] = frozenset({"system", "user", "assistant"})
SECONDARY_LOGICS: frozenset[str] = frozenset({"and_any", "and_all", "not_any", "not_all"})
PLACEMENTS: frozenset[str] = frozenset({"before_persona", "after_persona"})


class Outcome:
    """Request-log outcomes (C-15). Plain strings so they serialise as written."""

    INJECTED = "injected"
    NOT_MATCHED = "not_matched"
    SECONDARY_FAILED = "secondary_failed"
    DISABLED = "disabled"
    COLLECTION_OFF = "collection_off"
    CHANNEL = "channel"
    PROBABILITY = "probability"
    DECORATOR = "decorator"
    OVER_BUDGET = "over_budget"
    SKIPPED_SIZE = "skipped_size"
    RECURSION = "recursion"
    CANON_OVER_BUDGET = "canon_over_budget"
    INDEXED_ONLY = "indexed_only"
    FILTERED = "filtered"  # not for this generation type or this character (sillytavern)


@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    """One chat message. ``role`` is the side that wrote it."""

    role: Literal["user", "assistant", "system"]
    text: str
    name: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Entry:
    """One lore entry, as stored (content still holds its ``@@`` lines).

    ``None`` in an optional field means "not set on the entry": the book
    setting or the profile default applies.
    """

    id: str
    title: str = ""
    content: str = ""
    keys: tuple[str, ...] = ()
    secondary_keys: tuple[str, ...] = ()
    secondary_logic: SecondaryLogic = "and_any"
    constant: bool = False
    canon: bool = False
    enabled: bool = True
    order: int = 100
    priority: int = 10
    # None means 100 (S-6: imported null/missing probability is 100%).
    probability: int | None = None
    scan_depth: int | None = None
    case_sensitive: bool | None = None
    whole_words: bool | None = None
    role: Role = "system"
    placement: Placement = "after_persona"
    aliases: tuple[str, ...] = ()
    channels: tuple[str, ...] = ()
    # K-1: when set, decides key matching instead of keys + secondary logic (classic, server).
    key_expression: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class BookSettings:
    """Scan settings of one book; ``None`` means the profile default."""

    scan_depth: int | None = None
    token_budget: int | None = None
    recursive: bool = False
    active: bool = True
    channels: tuple[str, ...] = ()
    case_sensitive: bool = False
    whole_words: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class Book:
    """A book attached to the conversation, with its entries in list order.

    ``version`` is the platform's counter, bumped on every change; compiled
    matchers are cached on ``(id, version)``. Without a version the whole book
    value is the cache key (it is hashable).
    """

    id: str
    name: str
    entries: tuple[Entry, ...] = ()
    settings: BookSettings = field(default_factory=BookSettings)
    scope: Scope | None = None
    version: int | None = None
    # The sillytavern profile reads SillyTavern's own entry values (every World Info setting
    # an entry carries); other profiles read ``entries``. Left out of equality and hashing.
    world_info: tuple[WorldInfoEntry, ...] = field(default=(), compare=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class Channel:
    """Where a server-profile chat happens; a thread names its parent channel."""

    id: str
    parent: str | None = None

    @property
    def effective(self) -> str:
        """The channel whose rules apply: a thread follows its parent (S-11)."""
        return self.parent or self.id


@dataclass(frozen=True, kw_only=True, slots=True)
class Names:
    """Current names for the ``{{user}}``, ``{{char}}`` and ``{{bot}}`` macros."""

    user: str = "User"
    char: str = "Character"
    bot: str | None = None  # the bot's persona; defaults to ``char``


@dataclass(frozen=True, kw_only=True, slots=True)
class Model:
    """The model a turn is assembled for: model id and/or tokenizer name, and window."""

    id: str | None = None
    tokenizer: str | None = None
    input_window: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TimedState:
    """Per-chat memory of timed decorators, carried from one turn to the next.

    ``kept``: entries whose ``@@keep`` has started (active without a match).
    ``spent``: entries with ``@@dont_activate_after_match`` that already fired.
    The platform stores this value per chat and passes it back next turn.
    """

    kept: frozenset[str] = frozenset()
    spent: frozenset[str] = frozenset()
    # The sillytavern profile's sticky/cooldown/delay timers, in SillyTavern's own JSON shape.
    sillytavern: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON shape; empty parts are left out, so a fresh state is ``{}``."""
        out: dict[str, Any] = {}
        if self.kept:
            out["kept"] = sorted(self.kept)
        if self.spent:
            out["spent"] = sorted(self.spent)
        if self.sillytavern is not None:
            out["sillytavern"] = dict(self.sillytavern)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object] | None) -> TimedState:
        if not data:
            return cls()
        kept = data.get("kept", ())
        spent = data.get("spent", ())
        sillytavern = data.get("sillytavern")
        if not isinstance(kept, (list, tuple)) or not isinstance(spent, (list, tuple)):
            raise ValueError("timed state needs lists under 'kept' and 'spent'")
        if sillytavern is not None and not isinstance(sillytavern, Mapping):
            raise ValueError("timed state keeps SillyTavern's timers as an object under 'sillytavern'")
        return cls(kept=frozenset(str(x) for x in kept), spent=frozenset(str(x) for x in spent),
                   sillytavern=sillytavern)


@dataclass(frozen=True, kw_only=True, slots=True)
class ActiveCharacter:
    """The character the turn speaks as, for entries limited to (or away from) characters.

    ``name`` stands for SillyTavern's avatar file name (what ``characterFilter.names``
    lists); ``tags`` are compared with ``characterFilter.tags``.
    """

    name: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class MatchTexts:
    """Texts besides the chat that entries may ask to scan (SillyTavern's ``match*`` flags)."""

    persona_description: str = ""
    character_description: str = ""
    character_personality: str = ""
    character_depth_prompt: str = ""
    scenario: str = ""
    creator_notes: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnRequest:
    """Everything one turn needs, apart from the tokenizer port.

    ``seed`` is the chat's identity for probability rolls (a chat id or a
    case seed); ``turn`` defaults to the number of chat messages, so a roll is
    stable within a turn (regenerating a reply rolls the same) and changes
    from one turn to the next.
    """

    profile: Profile
    books: tuple[Book, ...]
    chat: tuple[Message, ...]
    names: Names = field(default_factory=Names)
    model: Model = field(default_factory=Model)
    channel: Channel | None = None
    seed: str = ""
    turn: int | None = None
    state: TimedState = field(default_factory=TimedState)
    # A preview (W-10): the same selection, but SillyTavern's timers are not advanced.
    dry_run: bool = False
    # The call's ``log: full`` (C-15): list every entry, those simply not matched too. False lets a
    # profile count those in ``Selection.not_matched_unlisted`` instead of listing them (every
    # profile does: a turn's work follows the entries it touched, not the size of the books).
    log_full: bool = True
    # What is generated: entries with ``triggers`` activate only for those types (sillytavern).
    generation_type: GenerationType = "normal"
    # The active character, for ``characterFilter`` (None: no character, as in a books-only call).
    character: ActiveCharacter | None = None
    # Texts the extra match sources scan (character card, persona).
    match_texts: MatchTexts = field(default_factory=MatchTexts)

    @property
    def turn_number(self) -> int:
        return len(self.chat) if self.turn is None else self.turn


@dataclass(frozen=True, kw_only=True, slots=True)
class Injection:
    """One piece of lore placed in the prompt, in prompt order."""

    entry: str
    book: str
    slot: str
    role: Role
    content: str
    tokens: int
    label: str | None = None
    cache_stable: bool = False
    placement: Placement | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class WorldIndexLine:
    entry: str
    line: str


@dataclass(frozen=True, kw_only=True, slots=True)
class LogRecord:
    """Why one entry did or did not reach the prompt this turn (C-15).

    ``key`` and ``message`` name what triggered it: the key as written and the
    chat index (0 = oldest) of the message it was found in; ``via_entry`` is
    the entry whose content held the key when recursion activated it;
    ``warnings`` are problems with the entry itself (e.g. unknown decorators).
    """

    entry: str
    book: str
    outcome: str
    detail: str = ""
    key: str | None = None
    message: int | None = None
    via_entry: str | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Selection:
    """The result of one turn."""

    injections: tuple[Injection, ...]
    request_log: tuple[LogRecord, ...]
    state: TimedState = field(default_factory=TimedState)
    world_index: tuple[WorldIndexLine, ...] = ()
    warnings: tuple[str, ...] = ()
    tokenizer: str = ""
    tokens_estimated: bool = False
    # Entries simply not matched that ``request_log`` leaves out (a compact log): counted only.
    not_matched_unlisted: int = 0
