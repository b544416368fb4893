"""Prompt templates: where each profile's injections sit in the final prompt (C-12, S-8).

A template is an ordered list of slot names. The partner app fills the slots
it owns (``system``, ``character``, ``persona``, ``scenario``, ``memories``,
``documents`` …) and the chat ``history``; the engine's injections fill the
lore slots. Moving the ``lorebook`` slot moves all classic lore at once: no
entry has a position of its own.

Profiles place lore this way:

- classic: every injection in the ``lorebook`` slot, one message each, with its role (C-12).
- server: always-on entries join the ``system`` part, before or after the
  persona text by their placement; activated entries go right above the
  ``SERVER.recent_turns`` most recent dialogue turns, before retrieved ``documents`` (S-8).
- smart: ``canon`` and the cache-stable whole book (``relevant``) early, so
  providers can cache the prompt prefix; per-turn ``matched`` lore and the
  ``world_index`` late, next to the history.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .rules import SERVER
from .values import Injection, Message, Selection

DEFAULT_TEMPLATES: dict[str, tuple[str, ...]] = {
    "classic": ("system", "character", "persona", "scenario", "lorebook", "memories", "history"),
    # SillyTavern's own places: around the character definitions, the Author's Note, example messages,
    # and @depth entries inside the history.
    "sillytavern": ("system", "before_char", "character", "after_char", "persona", "scenario", "examples_before",
                    "examples_after", "memories", "authors_note_top", "authors_note", "authors_note_bottom",
                    "history"),
    "server": ("system", "character", "persona", "memories", "history"),
    "smart": ("system", "canon", "relevant", "character", "persona", "scenario", "memories", "history", "matched",
              "world_index"),
}

# Lore slots each profile fills; a template for that profile must name them.
LORE_SLOTS: dict[str, tuple[str, ...]] = {
    "classic": ("lorebook",),
    "sillytavern": ("before_char", "after_char"),
    "server": ("system", "history"),
    "smart": ("canon", "relevant", "matched", "world_index"),
}


class TemplateError(ValueError):
    """A template that cannot hold this profile's lore."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptMessage:
    role: str
    content: str
    slot: str
    entry: str | None = None
    label: str | None = None


def template_validate(profile: str, slots: Sequence[str]) -> tuple[str, ...]:
    names = tuple(slots)
    if len(set(names)) != len(names):
        raise TemplateError("a slot appears twice in the template")
    missing = [slot for slot in LORE_SLOTS.get(profile, ()) if slot not in names]
    if missing:
        raise TemplateError(f"the {profile} profile needs the slot(s) {', '.join(missing)}")
    return names


def _lore_message(injection: Injection, slot: str) -> PromptMessage:
    content = injection.content if not injection.label else f"[{injection.label}] {injection.content}"
    return PromptMessage(role=injection.role, content=content, slot=slot, entry=injection.entry, label=injection.label)


def _history_messages(history: Sequence[Message], recent: Sequence[Injection], documents: str | None) -> list[PromptMessage]:
    messages = [PromptMessage(role=m.role, content=m.text, slot="history") for m in history]
    if not recent and not documents:
        return messages
    # Lore sits above the most recent turns, then retrieved documents (S-8).
    cut = max(0, len(messages) - SERVER.recent_turns)
    inserted = [_lore_message(injection, "recent") for injection in recent]
    if documents:
        inserted.append(PromptMessage(role="system", content=documents, slot="documents"))
    return messages[:cut] + inserted + messages[cut:]


def _at_depth(messages: list[PromptMessage], by_slot: Mapping[str, list[Injection]]) -> list[PromptMessage]:
    """SillyTavern @depth entries: depth N sits right above the last N history messages."""
    out = list(messages)
    depths = sorted(
        (int(slot.removeprefix("depth_")), slot)
        for slot in by_slot
        if slot.startswith("depth_") and slot.removeprefix("depth_").isdigit()
    )
    # Shallowest first: each deeper insert lands above the earlier ones, so indexes never shift.
    for depth, slot in depths:
        index = max(0, len(messages) - depth)
        out[index:index] = [_lore_message(i, slot) for i in by_slot[slot]]
    return out


_OUTLET_SLOT = "outlet_"
_OUTLET_MACRO = re.compile(r"\{\{outlet::(.+?)\}\}", re.IGNORECASE)


def _outlets_filled(parts: dict[str, str], by_slot: Mapping[str, list[Injection]]) -> dict[str, str]:
    """SillyTavern's ``{{outlet::name}}`` in the app's texts: the outlet's entries joined by newlines, or ""."""
    texts = {slot.removeprefix(_OUTLET_SLOT): "\n".join(i.content for i in injections)
             for slot, injections in by_slot.items() if slot.startswith(_OUTLET_SLOT)}
    return {slot: _OUTLET_MACRO.sub(lambda m: texts.get(m.group(1).strip(), ""), text) if "{{" in text else text
            for slot, text in parts.items()}


def prompt_render(
    *,
    profile: str,
    selection: Selection,
    history: Sequence[Message],
    parts: Mapping[str, str] | None = None,
    template: Sequence[str] | None = None,
) -> list[PromptMessage]:
    """The full message list for ``template`` (the profile's default when None)."""
    slots = template_validate(profile, template or DEFAULT_TEMPLATES.get(profile, DEFAULT_TEMPLATES["classic"]))
    parts = dict(parts or {})
    by_slot: dict[str, list[Injection]] = {}
    for injection in selection.injections:
        by_slot.setdefault(injection.slot, []).append(injection)
    if profile == "sillytavern":
        parts = _outlets_filled(parts, by_slot)

    rendered: list[PromptMessage] = []
    for slot in slots:
        if profile == "server" and slot in {"system", "persona"}:
            # Always-on lore joins the system part, around the persona text by placement (S-8).
            system_lore = by_slot.get("system", [])
            around_persona = slot == "persona" or "persona" not in slots
            if slot == "system" and parts.get("system"):
                rendered.append(PromptMessage(role="system", content=parts["system"], slot="system"))
            if around_persona:
                rendered.extend(_lore_message(i, "system") for i in system_lore if i.placement == "before_persona")
                if parts.get("persona"):
                    rendered.append(PromptMessage(role="system", content=parts["persona"], slot="persona"))
                rendered.extend(_lore_message(i, "system") for i in system_lore if i.placement != "before_persona")
            continue
        if slot == "history":
            recent = by_slot.get("recent", []) if profile == "server" else []
            documents = parts.get("documents") if profile == "server" and "documents" not in slots else None
            messages = _history_messages(history, recent, documents)
            if profile == "sillytavern":
                messages = _at_depth(messages, by_slot)
            rendered.extend(messages)
            continue
        if slot == "world_index":
            if selection.world_index:
                lines = "\n".join(f"- {line.line}" for line in selection.world_index)
                rendered.append(PromptMessage(role="system", content=f"World index (topics you may ask about):\n{lines}",
                                              slot="world_index"))
            continue
        if parts.get(slot):
            rendered.append(PromptMessage(role="system", content=parts[slot], slot=slot))
        rendered.extend(_lore_message(i, slot) for i in by_slot.get(slot, ()))
    return rendered
