from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from books.models import Profile, Role
from lore_platform.cast.api.answers import InjectionOut, LogRowOut, WorldIndexLineOut
from lore_platform.cast.models import (
    Attachment,
    Character,
    Chat,
    Novel,
    RequestLog,
    Story,
)
from lore_platform.cast.turns import stored_rows_normalise

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
    cast_ids = serializers.PrimaryKeyRelatedField(source="cast", many=True, read_only=True)

    class Meta:
        model = Story
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
    member_ids = serializers.PrimaryKeyRelatedField(source="members", many=True, read_only=True)

    class Meta:
        model = Chat
        fields = [
            "id", "kind", "character_id", "member_ids", "story_id", "novel_id", "channel_id",
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
    book_title = serializers.CharField()
    injected = serializers.BooleanField(help_text="False when the book stopped being injected here.")
    reason = serializers.CharField(allow_null=True, help_text="Why the book is not injected, if it is not.")


def attachment_out(attachment: Attachment, injected: bool, reason: str | None) -> dict:
    target_id = attachment.character_id or attachment.story_id or attachment.novel_id
    return {
        "id": attachment.pk,
        "target": attachment.target_kind,
        "target_id": target_id,
        "book_id": attachment.book_id,
        "book_title": attachment.book.title,
        "injected": injected,
        "reason": reason,
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
    parent = serializers.CharField(required=False, allow_null=True, default=None, max_length=64)


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
    log = _StoredLog(read_only=True, help_text="The compact request log the turn answered (C-15).")

    class Meta:
        model = RequestLog
        fields = ["id", "turn", "profile", "model_id", "injections", "world_index", "log", "created_at"]


class LoreOut(serializers.Serializer):
    entry = serializers.IntegerField()
    book = serializers.IntegerField()
    title = serializers.CharField()
    content = serializers.CharField()
