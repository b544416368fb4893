"""The context answer (P-7), typed: output serializers that document it field by field.

The answer is built once by :func:`context_body` straight from the turn's
values (the hot path of every turn: no serializer walks 2,000 log rows); the
serializers below are its schema, and a test checks every answer against the
OpenAPI document they produce. Ids are integers everywhere.
"""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from books.models import Placement, Profile, Role
from cast.turns import TurnAnswer, world_index_row

ID_HELP = "A database id (integer)."


class InjectionOut(serializers.Serializer):
    entry = serializers.IntegerField(help_text="The entry injected.")
    book = serializers.IntegerField(help_text="The book it came from.")
    slot = serializers.CharField(help_text="Where it goes: lorebook (classic); system / recent (server); canon, "
                                           "relevant, matched (smart); before_char, after_char, authors_note_top, "
                                           "authors_note_bottom, examples_before/after, depth_N, outlet_<name> (sillytavern: "
                                           "an outlet's entries in order, what {{outlet::name}} reads).")
    role = serializers.ChoiceField(choices=Role.choices)
    content = serializers.CharField(help_text="The text the model sees (decorators removed, macros replaced).")
    tokens = serializers.IntegerField(help_text="Tokens by the model's tokenizer (C-14).")
    label = serializers.CharField(allow_null=True, help_text="In group chats, the character whose book it is (W-8).")  # type: ignore[assignment]  # a declared field named like a DRF Field attribute
    cache_stable = serializers.BooleanField(help_text="Part of the prompt that stays the same turn to turn (W-2).")
    placement = serializers.ChoiceField(choices=Placement.choices, required=False,
                                        help_text="Server profile: around the persona (S-8).")


class WorldIndexLineOut(serializers.Serializer):
    entry = serializers.IntegerField(help_text="An entry the lookup tool can fetch (W-5).")
    line = serializers.CharField(help_text="Its title and one-sentence idea.")


class LogRowOut(serializers.Serializer):
    entry = serializers.IntegerField()
    book = serializers.IntegerField()
    outcome = serializers.CharField(help_text="injected, not_matched, budget, probability, disabled, decorator, "
                                              "canon_over_budget, indexed, filtered (sillytavern: not for this generation "
                                              "type or character), … (C-15).")
    detail = serializers.CharField(allow_blank=True, help_text="Why, in words.")
    key = serializers.CharField(required=False, help_text="The key that matched.")
    message = serializers.IntegerField(required=False, help_text="Which message it matched in.")
    via_entry = serializers.IntegerField(required=False, help_text="Recursion: the entry whose text activated it.")
    warnings = serializers.ListField(child=serializers.CharField(), required=False)


class LogSummaryOut(serializers.Serializer):
    entries = serializers.IntegerField(help_text="Entries the turn considered.")
    not_matched = serializers.IntegerField(help_text="Of them, simply not matched.")
    not_matched_listed = serializers.BooleanField(help_text="False in the compact log: those are counted only.")


class ModelUsedOut(serializers.Serializer):
    id = serializers.CharField(allow_null=True)
    tokenizer = serializers.CharField()
    tokens_estimated = serializers.BooleanField(help_text="No exact tokenizer for this model: counts are estimates.")
    input_window = serializers.IntegerField()


class TokenizerOut(serializers.Serializer):
    name = serializers.CharField()
    estimate = serializers.BooleanField()


class BookUsedOut(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    label = serializers.CharField(allow_null=True)  # type: ignore[assignment]  # a declared field named like a DRF Field attribute
    via = serializers.CharField(help_text="character, story, novel, tenant, server, persona, request or preview.")


class BookLeftOutOut(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField(help_text="\"A private book\" when it is another user's private book (P-1).")
    reason = serializers.CharField(help_text="Why the turn did not use it, in words.")


def _arg(description: str) -> dict[str, Any]:
    # One argument's JSON Schema (type, lengths, enum), as the model receives it.
    return {"type": "object", "additionalProperties": True, "description": description}


def _tool_schema(name: str, description: str, arguments: dict[str, str], required: list[str]) -> dict[str, Any]:
    """A tool in the OpenAI function-calling format, its arguments named one by one.

    Ready for OpenAI's strict mode: ``strict: true``, every property required (an optional one is nullable)
    and ``additionalProperties: false``; lengths are in the descriptions and checked when the call runs.
    """
    return {
        "type": "object",
        "description": description,
        "required": ["type", "function"],
        "properties": {
            "type": {"type": "string", "enum": ["function"]},
            "function": {
                "type": "object",
                "required": ["name", "description", "strict", "parameters"],
                "properties": {
                    "name": {"type": "string", "enum": [name]},
                    "description": {"type": "string", "description": "What the tool is for, written for the model."},
                    "strict": {"type": "boolean", "enum": [True],
                               "description": "OpenAI strict function calling: the definition follows its rules."},
                    "parameters": {
                        "type": "object",
                        "description": "JSON Schema of the arguments.",
                        "required": ["type", "properties", "required", "additionalProperties"],
                        "properties": {
                            "type": {"type": "string", "enum": ["object"]},
                            "properties": {
                                "type": "object",
                                "properties": {arg: _arg(text) for arg, text in arguments.items()},
                            },
                            "required": {"type": "array", "items": {"type": "string"},
                                         "description": f"Every property: {', '.join(required)}."},
                            "additionalProperties": {"type": "boolean", "enum": [False]},
                        },
                    },
                },
            },
        },
    }


BOOK_ARG = ("Only when several living books are attached: which one (an enum of their ids; the description says "
            "what each book is for).")
LOOKUP_TOOL = _tool_schema(
    "lore_lookup", "W-5: read the full text of a world-index topic; run it with GET /api/v1/chats/{id}/lore/{entry}.",
    {"entry": "integer: the entry id from the world index."}, ["entry"],
)
LORE_CREATE_TOOL = _tool_schema(
    "lore_create", "L-2: the model adds a new when-relevant entry (never canon) to a living book; run it with POST "
    "/api/v1/chats/{id}/tool-calls.",
    {"book": BOOK_ARG, "title": "string, 2–100 characters (W-12).",
     "lore": "string, 20–4,000 characters (W-12, L-3).",
     "aliases": "array of at most 50 strings of ≤120 characters (W-12), or null (type [\"array\", \"null\"]): "
                "a model may also leave it out."},
    ["title", "lore", "aliases (and book, with several living books)"],
)
LORE_APPEND_TOOL = _tool_schema(
    "lore_append", "L-2: the model adds text at the end of an entry of a living book (never a rewrite or a delete); "
    "run it with POST /api/v1/chats/{id}/tool-calls.",
    {"book": BOOK_ARG, "entry": "integer: the entry to grow.",
     "text": "string, at most 2,000 characters; the grown entry at most 20,000 (L-3)."},
    ["entry", "text (and book, with several living books)"],
)


@extend_schema_field({"oneOf": [LOOKUP_TOOL, LORE_CREATE_TOOL, LORE_APPEND_TOOL],
                      "description": "A tool in the OpenAI function-calling format: the lookup tool (W-5), or the "
                                     "living world's lore_create / lore_append (L-1..L-3)."})
class ToolField(serializers.DictField):
    pass


@extend_schema_field({"type": "object", "additionalProperties": True,
                      "description": "Engine state the chat carries to its next turn; a stateless caller hands "
                                     "it back as timed_state."})
class TimedStateField(serializers.DictField):
    pass


class LivingWorldOut(serializers.Serializer):
    tools_offered = serializers.BooleanField(help_text="Whether `tools` carry lore_create / lore_append this turn.")
    books = serializers.ListField(child=serializers.IntegerField(),
                                  help_text="The chat owner's living books this turn reaches (L-1).")
    code = serializers.ChoiceField(choices=["living_world_profile", "model_without_tools"], allow_null=True,
                                   help_text="Why no tools: `living_world_profile`, the chat's profile does not read "
                                             "the living world (only `smart` does; the same text is in `warnings`, "
                                             "and a tool call there is refused with 409); `model_without_tools`, "
                                             "the call said `model.tools: false`. Null when the tools are offered.")
    rule = serializers.CharField(allow_null=True, help_text="L-1 when the tools are off.")
    off_reason = serializers.CharField(allow_null=True, help_text="Why there are no tools, in words.")


class RenderedMessageOut(serializers.Serializer):
    role = serializers.CharField()
    content = serializers.CharField(allow_blank=True)
    slot = serializers.CharField(help_text="The template slot it fills.")
    entry = serializers.IntegerField(required=False, help_text="The lore entry it carries.")
    label = serializers.CharField(required=False)  # type: ignore[assignment]  # a declared field named like a DRF Field attribute


class ContextOut(serializers.Serializer):
    profile = serializers.ChoiceField(choices=Profile.choices)
    turn = serializers.IntegerField(help_text="The turn number probability rolls are stable within.")
    model = ModelUsedOut()
    tokenizer = TokenizerOut()
    injections = InjectionOut(many=True, help_text="In prompt order.")
    world_index = WorldIndexLineOut(many=True)
    tools = serializers.ListField(child=ToolField(), help_text="Tools for tool-capable models: the lookup tool (W-5); "
                                  "lore_create and lore_append in the owner's smart-profile chats of a living book "
                                  "(L-1, L-2; elsewhere `living_world` says why not). Each is ready for OpenAI's "
                                  "strict function calling (`strict: true`).")
    request_log = LogRowOut(many=True, help_text="One row per entry considered (C-15); compact leaves out "
                                                 "entries simply not matched.")
    request_log_summary = LogSummaryOut()
    warnings = serializers.ListField(child=serializers.CharField())
    timed_state = TimedStateField()
    books = BookUsedOut(many=True)
    books_left_out = BookLeftOutOut(many=True)
    living_world = LivingWorldOut(required=False, help_text="In a chat that reaches a living book of its owner: "
                                  "whether its tools are offered, and if not, why (L-1, L-2).")
    messages = RenderedMessageOut(many=True, required=False, help_text="The rendered prompt, when asked.")
    request_log_id = serializers.IntegerField(required=False, help_text="The stored request log (chat turns).")


def context_body(answer: TurnAnswer) -> dict[str, Any]:
    """The answer's JSON body, in the shape :class:`ContextOut` documents."""
    selection = answer.selection
    summary = answer.request_log_summary
    body: dict[str, Any] = {
        "profile": answer.profile,
        "turn": answer.turn,
        "model": {
            "id": answer.model.id,
            "tokenizer": answer.model.tokenizer,
            "tokens_estimated": answer.model.tokens_estimated,
            "input_window": answer.model.input_window,
        },
        "tokenizer": {"name": selection.tokenizer, "estimate": selection.tokens_estimated},
        "injections": answer.injection_rows(),
        "world_index": [world_index_row(line) for line in selection.world_index],
        "tools": list(answer.tools),
        "request_log": answer.log_rows(),
        "request_log_summary": {
            "entries": summary.entries,
            "not_matched": summary.not_matched,
            "not_matched_listed": summary.not_matched_listed,
        },
        "warnings": list(selection.warnings),  # and the living world's, below
        "timed_state": answer.timed_state,
        "books": [
            {"id": g.book.pk, "title": g.book.title, "label": g.label, "via": g.via} for g in answer.gathering.books
        ],
        "books_left_out": [
            {"id": left.book_id, "title": left.title, "reason": left.reason} for left in answer.gathering.left_out
        ],
    }
    if answer.living_world is not None:
        body["living_world"] = answer.living_world.as_dict()
        if answer.living_world.warning:
            body["warnings"].append(answer.living_world.warning)
    if answer.rendered is not None:
        body["messages"] = list(answer.rendered)
    if answer.request_log_id is not None:
        body["request_log_id"] = answer.request_log_id
    return body
