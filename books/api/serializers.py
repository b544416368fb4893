"""Input and output shapes of the editor API. Inputs only parse; outputs only show.

Lengths, counts and ranges are *not* checked here: ``books.limits`` checks them
in the services, so every path refuses the same way and names the rule.
"""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from books import limits
from books.access import book_can_edit
from books.fields import entry_field_help
from books.models import Book, Entry, Placement, Profile, Role, Scope, SecondaryLogic
from books.services.cleaning import INT32
from lore_platform.api.errors import ErrorBodyOut, ErrorOut  # noqa: F401 - the one error schema, re-exported
from lore_platform.api.limits import CountedListField, documented
from retrieval.engine.rules import SMART

# --- books ----------------------------------------------------------------------


def _title(field: serializers.CharField) -> serializers.CharField:
    return documented(field, min_length=limits.BOOK_TITLE.min, max_length=limits.BOOK_TITLE.max)


def _tags_count_check(count: int) -> None:
    tags = limits.BOOK_TAGS
    limits.count_check(count, limits.Limit(value=tags.max_items or 0, rule=tags.rule, unit="items"), field="tags",
                       what="Tags")


def _range(field: serializers.IntegerField, limit: limits.RangeLimit) -> serializers.IntegerField:
    return documented(field, minimum=limit.low, maximum=limit.high)


class BookFieldsIn(serializers.Serializer):
    """Book fields every write may send (all optional on update)."""

    title = _title(serializers.CharField(required=False, allow_blank=True, help_text="1–120 characters (W-12)."))
    description = documented(
        serializers.CharField(
            required=False, allow_blank=True, trim_whitespace=False, help_text="At most 2,000 characters (W-12)."
        ),
        max_length=limits.BOOK_DESCRIPTION.max,
    )
    tags = documented(
        CountedListField(
            child=documented(serializers.CharField(allow_blank=True), max_length=limits.BOOK_TAGS.max_item_length),
            required=False,
            help_text="At most 20, each ≤50 characters.",
            precheck=_tags_count_check,
        ),
        max_length=limits.BOOK_TAGS.max_items,
    )
    language = documented(serializers.CharField(required=False, allow_blank=True), max_length=limits.BOOK_LANGUAGE.max)
    scan_depth = _range(
        serializers.IntegerField(required=False, allow_null=True, help_text="0–100 messages (C-2)."),
        limits.BOOK_SCAN_DEPTH,
    )
    token_budget = _range(
        serializers.IntegerField(required=False, allow_null=True, help_text="100–32,000 tokens (C-3)."),
        limits.BOOK_TOKEN_BUDGET,
    )
    recursive = serializers.BooleanField(required=False, help_text="Recursive scanning (C-4).")
    case_sensitive = serializers.BooleanField(required=False)
    whole_words = serializers.BooleanField(required=False)
    living_world = serializers.BooleanField(required=False, help_text="World books only; private and owned (L-1).")
    living_world_review = serializers.BooleanField(
        required=False, help_text="Hold the model's writes for the owner's approval instead of applying them (L-4)."
    )
    channels = serializers.ListField(
        child=documented(serializers.CharField(), max_length=limits.CHANNEL_ID_LENGTH.value),
        required=False,
        help_text="Server-wide collections: channel ids where its entries may appear; empty = all (S-11).",
    )
    extra = serializers.DictField(required=False, help_text="Imported fields with no model of their own.")


class BookCreateIn(BookFieldsIn):
    title = _title(serializers.CharField(allow_blank=True, help_text="1–120 characters (W-12)."))
    profile = serializers.ChoiceField(
        choices=Profile.choices, required=False, help_text="Defaults to the tenant's profile."
    )
    scope = serializers.ChoiceField(
        choices=Scope.choices,
        required=False,
        help_text="personal (yours), server (server-wide collection) or persona (a lineage's book). "
        "Server and persona books belong to the tenant; only admins create them (S-1).",
    )
    lineage = serializers.UUIDField(required=False, help_text="Persona books: the lineage's public id (S-2).")


class BookUpdateIn(BookFieldsIn):
    pass


class BookActiveIn(serializers.Serializer):
    active = serializers.BooleanField(help_text="Off removes every entry from prompts; their own flags stay (S-12).")


class BookListParams(serializers.Serializer):
    profile = serializers.ChoiceField(choices=Profile.choices, required=False)
    scope = serializers.ChoiceField(choices=Scope.choices, required=False)
    lineage = serializers.UUIDField(required=False, help_text="The persona book of this lineage (S-2).")
    q = serializers.CharField(required=False, help_text="Search titles and descriptions.")


class BookOut(serializers.ModelSerializer):
    owner = serializers.IntegerField(source="owner_id", allow_null=True, read_only=True)
    tenant_owned = serializers.BooleanField(source="is_tenant_owned", read_only=True)
    lineage = serializers.UUIDField(source="lineage.public_id", allow_null=True, read_only=True)
    entry_count = serializers.IntegerField(read_only=True, default=None, allow_null=True)
    can_edit = serializers.SerializerMethodField()

    class Meta:
        model = Book
        fields = [
            "id",
            "title",
            "description",
            "tags",
            "language",
            "visibility",
            "profile",
            "scope",
            "owner",
            "tenant_owned",
            "lineage",
            "active",
            "channels",
            "scan_depth",
            "token_budget",
            "recursive",
            "case_sensitive",
            "whole_words",
            "living_world",
            "living_world_review",
            "version",
            "extra",
            "entry_count",
            "can_edit",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.BooleanField)
    def get_can_edit(self, book: Book) -> bool:
        actor = self.context.get("actor")
        return bool(actor and book_can_edit(actor, book))


class CanonLineOut(serializers.Serializer):
    entry_id = serializers.IntegerField()
    title = serializers.CharField()
    tokens = serializers.IntegerField()
    fits = serializers.BooleanField(help_text="False = canon over budget: not injected (W-1).")


class CanonMeterOut(serializers.Serializer):
    model_id = serializers.CharField()
    tokenizer = serializers.CharField(help_text="The tokenizer counting for this model (C-14).")
    tokens_are_estimate = serializers.BooleanField(help_text="No bundled tokenizer: a deliberately high estimate.")
    input_window = serializers.IntegerField()
    budget = serializers.IntegerField(
        help_text=f"{SMART.canon_share_percent}% of the input window, at most {SMART.canon_cap_tokens:,} tokens (W-1)."
    )
    tokens = serializers.IntegerField(help_text="Tokens the book's enabled canon takes every turn.")
    injected_tokens = serializers.IntegerField(help_text="Tokens W-1 packing injects from this book's canon.")
    over_budget = serializers.BooleanField(help_text="tokens > budget.")
    heavy_at = serializers.IntegerField(
        help_text=f"Canon is heavy from this many tokens: {SMART.canon_heavy_percent}% of the budget, rounded up (W-1)."
    )
    heavy = serializers.BooleanField(help_text="tokens ≥ heavy_at (canon over budget is heavy too).")
    message = serializers.CharField(help_text='"Core canon: N tokens per turn".')
    warning = serializers.CharField(
        allow_null=True,
        help_text="Set when canon is over budget, or heavy (then it says how much of the budget canon takes).",
    )
    entries = CanonLineOut(many=True)


class CanonMeterParams(serializers.Serializer):
    model = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="Model id: picks the tokenizer and input window."
    )
    input_window = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="The model's input window in tokens; overrides the registry, needed for unknown models.",
    )
    tokenizer = serializers.CharField(
        required=False, help_text="A tokenizer name (o200k_base, llama3, ceil-chars-4 …); overrides the model's."
    )


# --- entries ---------------------------------------------------------------------


class EntryIn(serializers.Serializer):
    """Entry fields a create or an update may send; help texts (with defaults) come from ``books.fields``.

    No field has an input default: the same shape changes an entry, where a
    missing field means "leave it". A new entry gets ``books.fields``'s defaults
    from the model.
    """

    # The widest limit of any profile; a narrower one (world books: W-12) answers 422 naming it.
    title = documented(
        serializers.CharField(required=False, allow_blank=True, help_text=entry_field_help("title")),
        max_length=max(limits.CLASSIC_ENTRY_TITLE.max or 0, limits.SERVER_ENTRY_TITLE.max or 0),
    )
    content = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, help_text=entry_field_help("content")
    )
    keys = serializers.ListField(
        child=serializers.CharField(allow_blank=True), required=False, help_text=entry_field_help("keys")
    )
    secondary_keys = serializers.ListField(
        child=serializers.CharField(allow_blank=True), required=False, help_text=entry_field_help("secondary_keys")
    )
    secondary_logic = serializers.ChoiceField(
        choices=SecondaryLogic.choices, required=False, help_text=entry_field_help("secondary_logic")
    )
    selective = serializers.BooleanField(required=False, help_text=entry_field_help("selective"))
    # Checked by the service (422 with the error's position, K-1), not here.
    key_expression = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, help_text=entry_field_help("key_expression")
    )
    constant = serializers.BooleanField(required=False, help_text=entry_field_help("constant"))
    canon = serializers.BooleanField(required=False, help_text="Alias of `constant`.")
    enabled = serializers.BooleanField(required=False, help_text=entry_field_help("enabled"))
    order = documented(
        serializers.IntegerField(required=False, help_text=entry_field_help("order")), minimum=INT32[0], maximum=INT32[1]
    )
    priority = documented(
        serializers.IntegerField(required=False, help_text=entry_field_help("priority")),
        minimum=INT32[0],
        maximum=INT32[1],
    )
    probability = _range(
        serializers.IntegerField(required=False, allow_null=True, help_text=entry_field_help("probability")),
        limits.PROBABILITY,
    )
    scan_depth = _range(
        serializers.IntegerField(required=False, allow_null=True, help_text=entry_field_help("scan_depth")),
        limits.CLASSIC_SCAN_DEPTH,
    )
    case_sensitive = serializers.BooleanField(
        required=False, allow_null=True, help_text=entry_field_help("case_sensitive")
    )
    whole_words = serializers.BooleanField(required=False, allow_null=True, help_text=entry_field_help("whole_words"))
    role = serializers.ChoiceField(choices=Role.choices, required=False, help_text=entry_field_help("role"))
    placement = serializers.ChoiceField(
        choices=Placement.choices, required=False, help_text=entry_field_help("placement")
    )
    channels = serializers.ListField(
        child=documented(serializers.CharField(), max_length=limits.CHANNEL_ID_LENGTH.value),
        required=False,
        help_text=entry_field_help("channels"),
    )
    extra = serializers.DictField(required=False, help_text=entry_field_help("extra"))


class EntryListParams(serializers.Serializer):
    enabled = serializers.BooleanField(
        required=False, allow_null=True, default=None, help_text="true = enabled only; false = disabled only (W-6)."
    )
    canon = serializers.BooleanField(
        required=False, allow_null=True, default=None, help_text="true = canon only; false = when relevant only."
    )
    never_used = serializers.BooleanField(
        required=False, allow_null=True, default=None, help_text="true = entries no chat has used (W-11)."
    )
    q = serializers.CharField(required=False, help_text="Text search in title, content and keys.")
    sort = serializers.ChoiceField(
        choices=[
            ("position", "List order"),
            ("title", "Display name, A–Z (C-9)"),
            ("most_used", "Most used"),
            ("recently_edited", "Recently edited"),
        ],
        required=False,
        default="position",
    )
    model = serializers.CharField(required=False, help_text="Model id whose tokenizer sizes the warnings.")
    tokenizer = serializers.CharField(required=False, help_text="A tokenizer name; overrides the model's.")


class EntryMoveIn(serializers.Serializer):
    position = serializers.IntegerField(required=False, min_value=0, help_text="0 = top; past the end = bottom.")
    to = serializers.ChoiceField(choices=[("top", "Top"), ("bottom", "Bottom")], required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("position" in attrs) == ("to" in attrs):
            raise serializers.ValidationError({"position": "Give either a position or `to` (top/bottom)."})
        return attrs


class EntriesReorderIn(serializers.Serializer):
    entry_ids = documented(
        serializers.ListField(
            child=serializers.IntegerField(),
            min_length=1,
            help_text="These entries take the slots they occupy now, in this order; others stay put. No id twice.",
        ),
        max_length=limits.REORDER_IDS.value,
    )


class EntriesBulkIn(serializers.Serializer):
    action = serializers.ChoiceField(choices=[("enable", "Enable"), ("disable", "Disable"), ("delete", "Delete")])
    entry_ids = documented(
        serializers.ListField(
            child=serializers.IntegerField(), min_length=1, help_text="At most 500 (W-12); all or nothing."
        ),
        max_length=limits.BULK_ACTION.value,
    )


@extend_schema_field(EntryIn(many=True))
class _EntryObjects(serializers.ListField):
    """Parsed as plain objects: the service checks each one and names ``entries[i].<field>``."""

    child = serializers.DictField()


class EntriesBulkCreateIn(serializers.Serializer):
    entries = _EntryObjects(help_text="At most 500 per batch; all or nothing (I-3).")


class DecoratorOut(serializers.Serializer):
    name = serializers.CharField()
    argument = serializers.CharField(allow_null=True)
    known = serializers.BooleanField()
    line = serializers.IntegerField()


class EntryWarningOut(serializers.Serializer):
    code = serializers.ChoiceField(
        choices=[
            "long_entry",
            "multi_topic",
            "never_surfaced",
            "unresolved_channel",
            "unknown_decorator",
            "decorator_ignored",
        ]
    )
    message = serializers.CharField()
    rule = serializers.CharField()


class EntryOut(serializers.ModelSerializer):
    book = serializers.IntegerField(source="book_id", read_only=True)
    canon = serializers.BooleanField(read_only=True)
    has_unresolved_channel = serializers.BooleanField(read_only=True)
    live = serializers.SerializerMethodField(help_text="Enabled and in an active collection (S-12, W-6).")
    warnings = serializers.SerializerMethodField()
    decorators = serializers.SerializerMethodField()

    class Meta:
        model = Entry
        fields = [
            "id",
            "book",
            "title",
            "content",
            "keys",
            "secondary_keys",
            "secondary_logic",
            "selective",
            "key_expression",
            "constant",
            "canon",
            "enabled",
            "live",
            "order",
            "priority",
            "probability",
            "scan_depth",
            "case_sensitive",
            "whole_words",
            "role",
            "placement",
            "channels",
            "unresolved_channels",
            "has_unresolved_channel",
            "position",
            "usage_count",
            "last_used_at",
            "indexing_state",
            "content_hash",
            "extra",
            "warnings",
            "decorators",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def _notes(self, entry: Entry) -> Any:
        return (self.context.get("notes") or {}).get(entry.pk)

    @extend_schema_field(serializers.BooleanField)
    def get_live(self, entry: Entry) -> bool:
        book = self.context.get("book") or entry.book
        return bool(book.active and entry.enabled)

    @extend_schema_field(EntryWarningOut(many=True))
    def get_warnings(self, entry: Entry) -> list[dict[str, Any]]:
        notes = self._notes(entry)
        return list(EntryWarningOut(notes.warnings, many=True).data) if notes else []

    @extend_schema_field(DecoratorOut(many=True))
    def get_decorators(self, entry: Entry) -> list[dict[str, Any]]:
        notes = self._notes(entry)
        return list(DecoratorOut(notes.decorators, many=True).data) if notes else []


class BulkResultOut(serializers.Serializer):
    action = serializers.CharField()
    matched = serializers.IntegerField(help_text="Entries named.")
    changed = serializers.IntegerField(help_text="Entries whose state changed (or that were deleted).")
    version = serializers.IntegerField(help_text="The book's version afterwards.")


class ReorderOut(serializers.Serializer):
    entry_ids = serializers.ListField(child=serializers.IntegerField(), help_text="The book's full list order.")
    version = serializers.IntegerField()


class EntriesCreatedOut(serializers.Serializer):
    entries = EntryOut(many=True)
    version = serializers.IntegerField()


class TrashedBookOut(serializers.ModelSerializer):
    """A book in the trash: restorable until ``purge_at``."""

    owner = serializers.IntegerField(source="owner_id", allow_null=True, read_only=True)
    purge_at = serializers.SerializerMethodField()

    class Meta:
        model = Book
        fields = ["id", "title", "description", "profile", "visibility", "language", "owner", "trashed_at",
                  "purge_at"]
        read_only_fields = fields

    @extend_schema_field(serializers.DateTimeField)
    def get_purge_at(self, book: Book) -> Any:
        from books.services import trash_purge_at

        when = trash_purge_at(book)
        return serializers.DateTimeField().to_representation(when) if when else None
