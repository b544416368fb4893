from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from books.models import Profile, Role
from cast.api.answers import InjectionOut, LogRowOut, LogSummaryOut, WorldIndexLineOut
from cast.models import (
    Attachment,
    Character,
    Chat,
    Novel,
    RequestLog,
    Story,
)
from cast.selectors import AttachmentSeen
from cast.turns import stored_rows_normalise
from lore_platform.api.inputs import StrictInput

# One choice set per concept, shared with the books API, so the schema names one enum each.
PROFILE_CHOICES = Profile.choices


class CharacterOut(serializers.ModelSerializer):
    lineage = serializers.UUIDField(source="lineage.public_id", read_only=True)

    class Meta:
        model = Character
        fields = ["id", "name", "lineage", "created_at"]


class CharacterIn(serializers.Serializer):
    name = serializers.CharField(max_length=120)
    lineage_key = serializers.CharField(max_length=200, required=False, allow_blank=True,
                                        help_text="The card's stable identity; re-imports with the same key share lore.")


class StoryOut(serializers.ModelSerializer):
    cast_ids: serializers.PrimaryKeyRelatedField[Character] = serializers.PrimaryKeyRelatedField(source="cast", many=True, read_only=True)

    class Meta:
        model: type[Story | Novel] = Story
        fields = ["id", "title", "cast_ids", "created_at"]


class NovelOut(StoryOut):
    class Meta(StoryOut.Meta):
        model = Novel


class StoryIn(serializers.Serializer):
    title = serializers.CharField(max_length=120)
    cast_ids = serializers.ListField(child=serializers.IntegerField(), required=False, default=list)


class ChatIn(serializers.Serializer):
    kind = serializers.ChoiceField(choices=Chat.Kind.values)
    character_id = serializers.IntegerField(required=False, allow_null=True)
    member_ids = serializers.ListField(child=serializers.IntegerField(), required=False, default=list)
    story_id = serializers.IntegerField(required=False, allow_null=True)
    novel_id = serializers.IntegerField(required=False, allow_null=True)
    channel_id = serializers.CharField(required=False, allow_blank=True, default="", max_length=64)
    parent_channel_id = serializers.CharField(required=False, allow_blank=True, default="", max_length=64)
    profile = serializers.ChoiceField(choices=PROFILE_CHOICES, required=False, allow_blank=True, default="")
    model_id = serializers.CharField(required=False, allow_blank=True, default="", max_length=120)


class ChatOut(serializers.ModelSerializer):
    member_ids: serializers.PrimaryKeyRelatedField[Character] = serializers.PrimaryKeyRelatedField(
        source="members", many=True, read_only=True)

    class Meta:
        model = Chat
        fields = [
            "id", "kind", "owner_id", "character_id", "member_ids", "story_id", "novel_id", "channel_id",
            "parent_channel_id", "profile", "model_id", "timed_state", "turns", "created_at",
        ]


class AttachmentIn(serializers.Serializer):
    target = serializers.ChoiceField(choices=["character", "story", "novel", "tenant"])
    target_id = serializers.IntegerField(required=False, allow_null=True)
    book_id = serializers.IntegerField(required=False, allow_null=True)
    link_token = serializers.CharField(required=False, allow_blank=True, max_length=128,
                                       help_text="An unlisted book's link token (W-9).")

    def validate(self, data: dict) -> dict:
        if not data.get("book_id") and not data.get("link_token"):
            raise serializers.ValidationError({"book_id": "Name a book_id or a link_token."})
        return data


class AttachmentOut(serializers.Serializer):
    id = serializers.IntegerField()
    target = serializers.CharField()
    target_id = serializers.IntegerField(allow_null=True)
    book_id = serializers.IntegerField()
    book_title = serializers.CharField(help_text="\"A private book\" when it is another user's private book (P-1).")
    injected = serializers.BooleanField(help_text="False when the book stopped being injected here.")
    reason = serializers.CharField(allow_null=True, help_text="Why the book is not injected, if it is not.")


def attachment_out(attachment: Attachment, seen: AttachmentSeen) -> dict:
    """One attachment as the caller sees it: another user's private book is "A private book" (P-1)."""
    target_id = attachment.character_id or attachment.story_id or attachment.novel_id
    return {
        "id": attachment.pk,
        "target": attachment.target_kind,
        "target_id": target_id,
        "book_id": attachment.book_id,
        "book_title": seen.book_title,
        "injected": seen.injected,
        "reason": seen.reason,
    }


class MessageIn(serializers.Serializer):
    role = serializers.ChoiceField(choices=Role.choices)
    text = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=100_000)
    name = serializers.CharField(required=False, allow_blank=True, default="", max_length=120)


@extend_schema_field(MessageIn(many=True))
class MessagesField(serializers.Field):
    """Chat messages, validated without a nested serializer per message (the hot path of every turn)."""

    MAX_MESSAGES = 1000
    MAX_TEXT = 100_000
    ROLES = frozenset(Role.values)

    def to_internal_value(self, data: object) -> list[dict[str, str]]:
        if not isinstance(data, list):
            raise serializers.ValidationError("Send a list of messages.")
        if len(data) > self.MAX_MESSAGES:
            raise serializers.ValidationError(f"At most {self.MAX_MESSAGES} messages.")
        messages = []
        for index, item in enumerate(data):
            if not isinstance(item, dict):
                raise serializers.ValidationError({str(index): ["A message is an object with role and text."]})
            role, text, name = item.get("role"), item.get("text"), item.get("name", "")
            if not isinstance(role, str) or role not in self.ROLES:  # {} / [] are unhashable
                raise serializers.ValidationError({str(index): {"role": ["role is user, assistant or system."]}})
            if not isinstance(text, str) or len(text) > self.MAX_TEXT:
                raise serializers.ValidationError(
                    {str(index): {"text": [f"text is a string of at most {self.MAX_TEXT} characters."]}}
                )
            if name is None:
                name = ""
            if not isinstance(name, str) or len(name) > 120:
                raise serializers.ValidationError({str(index): {"name": ["name is a string of at most 120 characters."]}})
            messages.append({"role": role, "text": text, "name": name})
        return messages

    def to_representation(self, value: object) -> object:
        return value


class NamesIn(serializers.Serializer):
    user = serializers.CharField(required=False, default="User", max_length=120)
    char = serializers.CharField(required=False, default="Character", max_length=120)
    bot = serializers.CharField(required=False, allow_null=True, default=None, max_length=120)


class ModelIn(serializers.Serializer):
    id = serializers.CharField(required=False, allow_blank=True, allow_null=True, default=None, max_length=120)
    tokenizer = serializers.CharField(required=False, allow_null=True, default=None, max_length=60)
    input_window = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=256,
                                            max_value=10_000_000)
    tools = serializers.BooleanField(required=False, default=False,
                                     help_text="The model can call tools: world-index topics come with a lookup tool.")


class ChannelIn(serializers.Serializer):
    id = serializers.CharField(max_length=64)
    parent = serializers.CharField(required=False, allow_null=True, default=None, max_length=64)  # type: ignore[assignment]  # a declared field named like a DRF Field attribute


class ActiveCharacterIn(serializers.Serializer):
    name = serializers.CharField(max_length=200, trim_whitespace=False,
                                 help_text="The character's name, compared with the entries' character filters "
                                           "(SillyTavern lists a character's file name there).")
    tags = serializers.ListField(child=serializers.CharField(max_length=200), required=False, default=list,
                                 max_length=200, help_text="The character's tags, compared with the filters' tags.")


_MATCH_TEXT: dict[str, Any] = {"required": False, "default": "", "allow_blank": True, "trim_whitespace": False, "max_length": 100_000}


class MatchTextsIn(serializers.Serializer):
    """Texts SillyTavern entries may also scan (their ``match*`` flags), besides the messages."""

    persona_description = serializers.CharField(**_MATCH_TEXT)
    character_description = serializers.CharField(**_MATCH_TEXT)
    character_personality = serializers.CharField(**_MATCH_TEXT)
    character_depth_prompt = serializers.CharField(**_MATCH_TEXT)
    scenario = serializers.CharField(**_MATCH_TEXT)
    creator_notes = serializers.CharField(**_MATCH_TEXT)


GENERATION_TYPES = ["normal", "continue", "impersonate", "swipe", "regenerate", "quiet"]


class ContextIn(serializers.Serializer):
    messages = MessagesField()
    names = NamesIn(required=False)
    model = ModelIn(required=False)
    profile = serializers.ChoiceField(choices=PROFILE_CHOICES, required=False, allow_blank=True, default="")
    channel = ChannelIn(required=False, allow_null=True, default=None)
    template = serializers.ListField(child=serializers.CharField(max_length=40), required=False, allow_null=True,
                                    default=None, max_length=40,
                                    help_text="Ordered slot names; the profile's default when omitted.")
    parts = serializers.DictField(child=serializers.CharField(allow_blank=True, trim_whitespace=False),
                                  required=False, default=dict,
                                  help_text="Texts the app owns, by slot: system, character, persona, …")
    render = serializers.BooleanField(required=False, default=False,
                                      help_text="Also return the full rendered message list.")
    log = serializers.ChoiceField(choices=["compact", "full"], required=False, default="compact",
                                  help_text="compact: the request log leaves out entries that were not matched and "
                                            "counts them; full: one row per entry (C-15).")
    generation_type = serializers.ChoiceField(
        choices=GENERATION_TYPES, required=False, default="normal",
        help_text="What is generated. SillyTavern entries with triggers activate only for those types; "
                  "for swipe the last message (the one being swiped) is not scanned.")
    character = ActiveCharacterIn(required=False, allow_null=True, default=None,
                                  help_text="The active character for entries' character filters; by default the "
                                            "chat's (or character_id's) character, by name, without tags.")
    match_texts = MatchTextsIn(required=False, allow_null=True, default=None,
                               help_text="Card and persona texts that SillyTavern entries with match flags also scan.")


def _plain_text(field: Any, value: object) -> bool:
    """A value the CharField keeps exactly as sent: a non-blank string, nothing to trim, within max_length."""
    return (isinstance(value, str) and 0 < len(value) <= (field.max_length or len(value))
            and value == value.strip())


_CONTEXT_DEFAULTS = {"profile": "", "channel": None, "template": None, "render": False, "log": "compact",
                     "generation_type": "normal", "character": None, "match_texts": None}


def context_in_fast(data: object) -> dict[str, Any] | None:
    """``ContextIn``'s validated data for the body partner apps send every turn (messages, and
    optionally a model id, names and the log detail), without building the serializer's fields
    (they are deep-copied per instance: ~0.4 ms a turn). Anything else, valid or not, is None:
    the serializer then answers, with its own errors. A test checks both give the same values.
    """
    if not isinstance(data, dict) or "messages" not in data or not data.keys() <= {"messages", "model", "names", "log"}:
        return None
    declared = ContextIn._declared_fields
    model, names, log = data.get("model"), data.get("names"), data.get("log", "compact")
    if log not in getattr(declared["log"], "choices", ()):
        return None
    values: dict[str, Any] = {}
    if "model" in data:
        id_field = ModelIn._declared_fields["id"]
        if not isinstance(model, dict) or model.keys() != {"id"} or not _plain_text(id_field, model["id"]):
            return None
        values["model"] = {"id": model["id"], "tokenizer": None, "input_window": None, "tools": False}
    if "names" in data:
        fields = NamesIn._declared_fields
        if not isinstance(names, dict) or not names.keys() <= {"user", "char"} or not all(
            _plain_text(fields[k], v) for k, v in names.items()
        ):
            return None
        values["names"] = {"user": "User", "char": "Character", "bot": None, **names}
    try:
        values["messages"] = MessagesField().to_internal_value(data["messages"])
    except serializers.ValidationError:
        return None
    return {"messages": values.pop("messages"), **values, **_CONTEXT_DEFAULTS, "parts": {}, "log": log}


def context_in(data: object) -> dict[str, Any]:
    """The context call's validated body: the usual one read directly, anything else by ``ContextIn``
    (which raises the API's 400 with the field and rule)."""
    values = context_in_fast(data)
    if values is None:
        serializer = ContextIn(data=data)
        serializer.is_valid(raise_exception=True)
        values = serializer.validated_data
    return values


class StatelessContextIn(ContextIn):
    book_ids = serializers.ListField(child=serializers.IntegerField(), required=False, default=list, max_length=50)
    character_id = serializers.IntegerField(required=False, allow_null=True, default=None)
    story_id = serializers.IntegerField(required=False, allow_null=True, default=None)
    novel_id = serializers.IntegerField(required=False, allow_null=True, default=None)


class PreviewIn(serializers.Serializer):
    log = serializers.ChoiceField(choices=["compact", "full"], required=False, default="full")
    message = serializers.CharField(max_length=2000, trim_whitespace=False,
                                    error_messages={"max_length": "A preview message is at most 2,000 characters (W-10)."})
    model = ModelIn(required=False)
    profile = serializers.ChoiceField(choices=PROFILE_CHOICES, required=False, allow_blank=True, default="")
    channel = ChannelIn(required=False, allow_null=True, default=None)


class _StoredRows(serializers.JSONField):
    """Rows of a stored request log, with integer ids (older logs stored them as text)."""

    def to_representation(self, value: Any) -> Any:
        return stored_rows_normalise(value or [])


@extend_schema_field(InjectionOut(many=True))
class _StoredInjections(_StoredRows):
    pass


@extend_schema_field(WorldIndexLineOut(many=True))
class _StoredWorldIndex(_StoredRows):
    pass


@extend_schema_field(LogRowOut(many=True))
class _StoredLog(_StoredRows):
    pass


class RequestLogOut(serializers.ModelSerializer):
    injections = _StoredInjections(read_only=True)
    world_index = _StoredWorldIndex(read_only=True)
    log = _StoredLog(read_only=True, help_text="The request log as the turn answered it (C-15).")
    log_detail = serializers.ChoiceField(choices=["compact", "full"], read_only=True,
                                         help_text="full: every entry listed; compact: not-matched ones counted.")
    request_log_summary = serializers.SerializerMethodField(
        help_text="As in the live answer; null for logs stored before counts were kept."
    )

    class Meta:
        model = RequestLog
        fields = ["id", "turn", "profile", "model_id", "injections", "world_index", "log", "log_detail",
                  "request_log_summary", "created_at"]

    @extend_schema_field(LogSummaryOut(allow_null=True))
    def get_request_log_summary(self, row: RequestLog) -> dict[str, Any] | None:
        if row.entries_considered is None or row.not_matched is None:
            return None
        return {"entries": row.entries_considered, "not_matched": row.not_matched,
                "not_matched_listed": row.log_detail == "full"}


class LoreOut(serializers.Serializer):
    entry = serializers.IntegerField()
    book = serializers.IntegerField()
    title = serializers.CharField()
    content = serializers.CharField()


class PersonaOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class PersonaBookOut(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    entries = serializers.IntegerField(source="entry_count", help_text="Entries in the book (S-14: at most 250).")


class PersonaGroupOut(serializers.Serializer):
    """Personas sharing a lineage share one book, so the list groups them (S-2)."""

    lineage = serializers.UUIDField(source="lineage.public_id")
    lineage_key = serializers.CharField(source="lineage.key")
    personas = PersonaOut(many=True)
    book = PersonaBookOut(allow_null=True)


class PersonaImportIn(serializers.Serializer):
    file = serializers.FileField(help_text="A character card: PNG (chara/ccv3), CHARX or JSON.")
    lineage_key = serializers.CharField(max_length=200, required=False, allow_blank=True,
                                        help_text="Default: the card's name and creator.")
    mode = serializers.ChoiceField(choices=["append", "replace"], default="append",
                                   help_text="Into a lineage book that exists already (I-2).")


class PersonaImportOut(serializers.Serializer):
    character = CharacterOut()
    character_created = serializers.BooleanField(help_text="False: a persona of this name was in the lineage.")
    book = PersonaBookOut(allow_null=True, help_text="The lineage's book; null when the card had none (I-1).")
    receipt = serializers.DictField(help_text="The import receipt (I-4), as POST /books/{id}/import answers it.")


# --- the living world (L-1..L-4) -------------------------------------------------------


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "object", "additionalProperties": True}]})
class ToolArgumentsField(serializers.JSONField):
    """A JSON text (OpenAI's own form) or the object it encodes; never null."""


class ToolFunctionIn(serializers.Serializer):
    name = serializers.CharField(max_length=64, help_text="lore_create or lore_append.")
    arguments = ToolArgumentsField(help_text="The arguments as the model wrote them: a JSON text (OpenAI) or "
                                                "an object.")


class ToolCallBodyIn(serializers.Serializer):
    id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="",
                               help_text="The model's tool_call_id, echoed in the tool message.")
    type = serializers.ChoiceField(choices=["function"], required=False, default="function")
    function = ToolFunctionIn()


class ToolCallIn(StrictInput):
    reply_id = serializers.CharField(max_length=120, help_text="The partner app's id of the reply that made the "
                                                                "call; regenerating it reverts its writes.")
    model = serializers.CharField(max_length=120, required=False, allow_blank=True, default="",
                                  help_text="The model that made the call (listed in AI updates).")
    tool_call = ToolCallBodyIn(help_text="One entry of the assistant message's tool_calls (OpenAI format).")
    profile = serializers.ChoiceField(choices=PROFILE_CHOICES, required=False, allow_blank=True, default="",
                                      help_text="The profile the turn that offered the tool ran under, when the "
                                                "context call named one; by default the chat's (else the tenant's "
                                                "default). Only `smart` takes tool calls (L-1).")


class ToolMessageOut(serializers.Serializer):
    role = serializers.CharField(help_text="Always tool.")
    tool_call_id = serializers.CharField(allow_blank=True)
    content = serializers.CharField(help_text="JSON text of `result`, for the model to read.")


class ToolErrorOut(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    field = serializers.CharField(required=False)
    rule = serializers.CharField(required=False)
    details = serializers.DictField(required=False)


class ToolResultOut(serializers.Serializer):
    ok = serializers.BooleanField()
    status = serializers.ChoiceField(choices=["applied", "held"], required=False)
    write = serializers.IntegerField(required=False, help_text="The AI update (GET /books/{id}/ai-updates).")
    book = serializers.IntegerField(required=False)
    entry = serializers.IntegerField(required=False, allow_null=True, help_text="Null while a new entry is held.")
    title = serializers.CharField(required=False)
    message = serializers.CharField(required=False)
    error = ToolErrorOut(required=False, help_text="A refusal (budget, size, not allowed): the model reads it.")


class ToolCallOut(serializers.Serializer):
    ok = serializers.BooleanField(help_text="False: refused; the refusal is in result.error, still HTTP 200.")
    result = ToolResultOut()
    message = ToolMessageOut(help_text="Append to the conversation as the tool's answer.")


class RevertedWriteOut(serializers.Serializer):
    id = serializers.IntegerField()
    book = serializers.IntegerField()
    entry = serializers.IntegerField(allow_null=True)
    kind = serializers.CharField()
    state = serializers.CharField(help_text="undone (was applied) or rejected (was held).")


class ReplyRevertOut(serializers.Serializer):
    reply_id = serializers.CharField()
    reverted = RevertedWriteOut(many=True)
