"""What the model is asked (A-1, A-2), and the JSON schema of its answer."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

ENTRIES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entries": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "lore": {"type": "string"},
                    "aliases": {"type": "array", "items": {"type": "string"}},
                    "canon": {"type": "boolean"},
                },
                "required": ["title", "lore", "aliases", "canon"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["entries"],
    "additionalProperties": False,
}

_SHAPE = (
    'Answer with JSON only, no prose and no code fence: {"entries": [{"title": "...", "lore": "...", '
    '"aliases": ["..."], "canon": false}]}. A title is a short noun phrase (2-100 characters), never a '
    "sentence. Lore is 20-20,000 characters of self-contained prose about that one topic. Aliases are other "
    "names a person might type for it (proper names, codes; at most 50, each under 120 characters)."
)

JSON_ONLY = "That was not valid JSON. " + _SHAPE


def generate_messages(description: str, language: str, titles: Sequence[str], *, low: int, high: int) -> list[dict[str, str]]:
    system = (
        "You draft world books for role-play: entries about a setting's places, factions, characters, "
        f"objects, history and rules. Write between {low} and {high} entries, one topic each. Mark a few "
        "entries (one to three) canon: the frame of the world that must be true on every turn (where and when, "
        "its defining rules, its tone). " + _SHAPE
    )
    parts = [f"World description:\n{description}"]
    if language:
        parts.append(f"Write the entries in the language {language!r}.")
    if titles:
        parts.append("The book already has these entries; do not repeat them: " + "; ".join(titles[:200]))
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


def generate_feedback(problems: Sequence[str], *, low: int, high: int) -> str:
    listed = "\n".join(f"- {p}" for p in problems[:10])
    return f"That draft cannot be used:\n{listed}\nWrite the whole draft again: {low}-{high} entries. {_SHAPE}"


def split_messages(chunk: str, *, part: int, parts: int) -> list[dict[str, str]]:
    system = (
        "You split a writer's setting notes into world-book entries: one self-contained entry per topic "
        "(a place, faction, character, object, event or rule), keeping the writer's facts and wording; do not "
        "invent anything. " + _SHAPE + " Mark canon only what the notes present as the world's frame."
    )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": f"Notes, part {part} of {parts}:\n\n{chunk}"},
    ]
