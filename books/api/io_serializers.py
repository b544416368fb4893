"""Input and output shapes of the import/export API. Inputs only parse; outputs only show.

Limits (file sizes, entry caps, the 500-entry batch) are not checked here:
``books.imports`` / ``books.formats`` check them and name the rule.
"""

from __future__ import annotations

from rest_framework import serializers

from books.api.serializers import BookOut
from books.formats import EXPORT_FORMATS
from books.imports import IMPORT_MODES
from books.models import Profile, Scope


class ImportNewIn(serializers.Serializer):
    file = serializers.FileField(
        allow_empty_file=True,
        help_text="SillyTavern world info, Character Book / card JSON (V1–V3), PNG card (chara/ccv3), CHARX, "
        "NovelAI .lorebook/.story, Agnai, RisuAI, KoboldAI or a one-book Loreweave native file. "
        "The format is detected from the content.",
    )
    profile = serializers.ChoiceField(
        choices=Profile.choices, required=False, help_text="Profile of the new book; defaults to the tenant's."
    )
    title = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="The book's name; default: the name in the file, then the file name (I-2). A name in use is refused.",
    )
    scope = serializers.ChoiceField(
        choices=Scope.choices,
        required=False,
        help_text="personal (default; server lorebooks: server), server or persona — the last two admins only (S-1).",
    )
    lineage = serializers.UUIDField(required=False, help_text="Persona books: the lineage's public id (S-2).")


class ImportIntoIn(serializers.Serializer):
    file = serializers.FileField(allow_empty_file=True, help_text="Any importable file (see the new-book import).")
    mode = serializers.ChoiceField(
        choices=IMPORT_MODES,
        required=False,
        default="append",
        help_text="append (default): entries already in the book — same title and content after normalisation "
        "(NFKC, case, whitespace) — are skipped. replace: this book's entries are replaced.",
    )


class ExportParams(serializers.Serializer):
    format = serializers.ChoiceField(
        choices=EXPORT_FORMATS,
        required=False,
        default="sillytavern",
        help_text="sillytavern (world-info JSON), card-v2 (Character Card V2 JSON), card-v2-png, "
        "native (Loreweave, with collection state).",
    )


class RestoreIn(serializers.Serializer):
    file = serializers.FileField(allow_empty_file=True, help_text="A backup written by GET /api/v1/backup.")


class SkippedOut(serializers.Serializer):
    index = serializers.IntegerField(help_text="The entry's place in the file (0-based).")
    entry = serializers.CharField(help_text="Its title, first key or #index.")
    reason = serializers.CharField()


class UnsupportedOut(serializers.Serializer):
    index = serializers.IntegerField()
    entry = serializers.CharField()
    settings = serializers.ListField(child=serializers.CharField())
    regex_keys = serializers.ListField(
        child=serializers.CharField(), help_text="The entry's regex-shaped keys, as written (kept as inert text)."
    )


class EntryRefOut(serializers.Serializer):
    index = serializers.IntegerField(help_text="The entry's place in the file (0-based).")
    entry = serializers.CharField(help_text="Its title, first key or #index.")


class UnsupportedSettingOut(serializers.Serializer):
    setting = serializers.CharField()
    count = serializers.IntegerField()
    entries = EntryRefOut(many=True, help_text="The entries that had it.")


class RegexKeysOut(serializers.Serializer):
    index = serializers.IntegerField()
    entry = serializers.CharField()
    keys = serializers.ListField(child=serializers.CharField())


class ChangeOut(serializers.Serializer):
    index = serializers.IntegerField()
    entry = serializers.CharField()
    changes = serializers.ListField(child=serializers.CharField())


class ReceiptBookOut(serializers.Serializer):
    name = serializers.CharField(help_text="The book's name as planned.")
    entries_in_file = serializers.IntegerField()
    id = serializers.IntegerField(required=False)
    title = serializers.CharField(required=False)
    profile = serializers.CharField(required=False)
    scope = serializers.CharField(required=False)
    version = serializers.IntegerField(required=False)


class KeyExpressionReceiptOut(serializers.Serializer):
    index = serializers.IntegerField()
    entry = serializers.CharField()
    key_expression = serializers.CharField()
    used = serializers.BooleanField(help_text="False where the profile reads the keys instead (smart, sillytavern; K-1).")


class ReceiptOut(serializers.Serializer):
    """The import receipt (I-4)."""

    format = serializers.CharField(help_text="The detected source format.")
    profile = serializers.CharField()
    mode = serializers.CharField(help_text="new, append or replace.")
    book = ReceiptBookOut()
    added = serializers.IntegerField(help_text="Entries written.")
    entry_ids = serializers.ListField(child=serializers.IntegerField())
    replaced = serializers.IntegerField(help_text="Entries removed by replace.")
    skipped = SkippedOut(many=True)
    skipped_count = serializers.IntegerField()
    unsupported = UnsupportedOut(
        many=True, help_text="Settings the profile has no equivalent for, per entry (kept in extra)."
    )
    unsupported_counts = serializers.DictField(child=serializers.IntegerField())
    unsupported_settings = UnsupportedSettingOut(
        many=True, help_text="Each unsupported setting with the entries that had it (I-4)."
    )
    regex_keys = RegexKeysOut(many=True, help_text="Regex keys the profile keeps as inert text, by entry (I-4, I-5).")
    key_expressions = KeyExpressionReceiptOut(
        many=True, required=False, help_text="Entries that carry a key expression (K-1), by entry."
    )
    book_unsupported = serializers.ListField(child=serializers.CharField())
    changes = ChangeOut(many=True)
    keys_as = serializers.CharField(help_text="triggers, or aliases in world books (I-5).")
    card_without_book = serializers.BooleanField()
    changes_nothing = serializers.BooleanField(help_text="A card without a lorebook: nothing was written (I-1).")
    warnings = serializers.ListField(child=serializers.CharField())
    restored = serializers.ListField(
        child=serializers.CharField(),
        help_text="Collection settings a native file gave back to the new book (active, channels, tags …; I-6).",
    )


class ImportOut(serializers.Serializer):
    book = BookOut(allow_null=True)
    receipt = ReceiptOut()


class RestoredBookOut(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    profile = serializers.CharField()
    scope = serializers.CharField()
    entries = serializers.IntegerField()


class RestoreReceiptOut(serializers.Serializer):
    format = serializers.CharField()
    books = RestoredBookOut(many=True)
    books_restored = serializers.IntegerField()
    entries_restored = serializers.IntegerField()
    lineages = serializers.IntegerField()
    characters_created = serializers.IntegerField()
    warnings = serializers.ListField(child=serializers.CharField())


class FormatLimitsOut(serializers.Serializer):
    max_json_bytes = serializers.IntegerField(help_text="JSON files (I-3: 2 MB).")
    max_png_bytes = serializers.IntegerField(help_text="PNG cards (host setting).")
    max_charx_bytes = serializers.IntegerField(help_text="CHARX files (host setting).")
    max_card_json_bytes = serializers.IntegerField(help_text="Card JSON inside a PNG chunk or a CHARX.")
    max_charx_members = serializers.IntegerField()
    max_charx_uncompressed_bytes = serializers.IntegerField()
    max_import_batch = serializers.IntegerField(help_text="Entries one import brings (W-12: 500).")
    max_json_depth = serializers.IntegerField()


class ImportLimitsOut(serializers.Serializer):
    limits = FormatLimitsOut()
    max_upload_bytes = serializers.IntegerField(help_text="Largest import request accepted (413 above).")
    max_backup_bytes = serializers.IntegerField(help_text="Largest backup a restore reads.")
    entry_caps = serializers.DictField(child=serializers.IntegerField(), help_text="Entries per book / pool.")
    export_formats = serializers.ListField(child=serializers.CharField())
