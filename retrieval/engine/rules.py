"""The rule table: every number a context profile's rules set, in one place per profile.

The engine (``smart``, ``classic``, ``keyword``, ``server``, ``templates``),
the platform's limits (``books.limits``), the editor warnings
(``books.warnings``) and the canon meter all read these values; none of them
writes a rule number of its own, and messages that mention a number format it
from here. One frozen instance per profile: :data:`SMART`, :data:`CLASSIC`,
:data:`SERVER`, :data:`SILLYTAVERN`. Each field names the rule it comes from (SPEC.md, and the
seeds where they say more).

Imports nothing outside the standard library, like the rest of the engine.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CLASSIC", "SERVER", "SILLYTAVERN", "SMART", "ClassicRules", "ServerRules", "SillyTavernRules", "SmartRules"]


@dataclass(frozen=True, kw_only=True, slots=True)
class SmartRules:
    """World books (SPEC §4, ``seeds/world-books.txt``)."""

    canon_share_percent: int  # W-1: the canon budget is this share of the model's input window …
    canon_cap_tokens: int  # W-1: … and never more than this many tokens
    # W-1 (seed): the meter warns when canon "se vuelve pesado", before it is over budget.
    canon_heavy_percent: int
    lore_cap_tokens: int  # W-5: lore per turn in a big book is at most this (and what canon left)
    max_full_entries: int  # W-5: close matches injected whole
    trim_tokens: int  # W-5: each entry injected whole is trimmed to this; longer ones are flagged (W-11)
    index_topics: int  # W-5: world-index topics
    index_linked: int  # W-5: world-index topics linked from the injected entries
    max_named: int  # W-3: literal (named) matches
    max_named_from_replies: int  # W-3: of them, from the character's replies
    replies_searched: int  # W-3: the character's last replies searched for names
    meaning_window: int  # W-4: the last messages embedded for matching by meaning
    default_input_window: int  # W-1: the window assumed when the request names none
    index_idea_chars: int  # W-5: the one-sentence idea of a world-index line is cut to this

    def canon_heavy_at(self, budget: int) -> int:
        """Canon tokens from which canon counts as heavy under ``budget`` (rounded up)."""
        return -(-budget * self.canon_heavy_percent // 100)


@dataclass(frozen=True, kw_only=True, slots=True)
class ClassicRules:
    """Keyword lorebooks (SPEC §2)."""

    default_scan_depth: int  # C-2: messages scanned when neither entry nor book sets a depth
    default_token_budget: int  # C-3: token budget when no attached book sets one
    recursion_passes: int  # C-4: rescans of activated content after the chat scan


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerRules:
    """Community / Discord-bot lorebooks (SPEC §3)."""

    default_scan_depth: int  # S-5: messages to search when neither entry nor book sets it
    character_budget: int  # S-9: one budget of characters shared by every group
    entry_content_chars: int  # S-3: characters of content an entry holds
    entries_per_lineage: int  # S-14: entries per persona (lineage)
    entries_server_wide: int  # S-14: entries all server-wide books share
    recent_turns: int  # S-8: activated lore sits right above this many most recent dialogue turns


SMART = SmartRules(
    canon_share_percent=10,
    canon_cap_tokens=4_000,
    # Heavy from three quarters of the budget: canon is paid every turn, and what it leaves is all the
    # when-relevant lore gets (W-2, W-5). Past this share under a quarter of the budget is left: at the
    # cap, room for about one entry trimmed to ``trim_tokens``. The seed's case (3,730 tokens of a
    # capped budget, 93%, with no warning) is well inside it, and a small canon never nags.
    canon_heavy_percent=75,
    lore_cap_tokens=2_000,
    max_full_entries=5,
    trim_tokens=800,
    index_topics=12,
    index_linked=6,
    max_named=8,
    max_named_from_replies=4,
    replies_searched=2,
    meaning_window=6,
    default_input_window=8_192,
    index_idea_chars=160,
)

CLASSIC = ClassicRules(
    default_scan_depth=4,
    default_token_budget=1_000,
    recursion_passes=3,
)

SERVER = ServerRules(
    default_scan_depth=4,
    character_budget=8_000,
    entry_content_chars=4_000,
    entries_per_lineage=250,
    entries_server_wide=250,
    recent_turns=4,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class SillyTavernRules:
    """SillyTavern 1.12.6's shipped World Info defaults (its default/settings.json), where a book says nothing."""

    default_scan_depth: int  # world_info_depth
    default_budget_percent: int  # world_info_budget: a share of the context


SILLYTAVERN = SillyTavernRules(default_scan_depth=2, default_budget_percent=25)
