"""Page forms: they parse and bound input; the services decide (and name the rule)."""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from django import forms
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.password_validation import validate_password
from django.utils.translation import gettext_lazy as _

from books import limits
from books.fields import ENTRY_FIELD
from books.models import (
    Book,
    Entry,
    Placement,
    Profile,
    Role,
    Scope,
    SecondaryLogic,
    Visibility,
)
from lore_platform.etags import stamp_version
from retrieval.engine.tokenizers import MODEL_REGISTRY

PREVIEW_MAX = 2000  # W-10 / W-12: a preview message is at most 2,000 characters
MODEL_CHOICES = [("", _("Unknown model (estimate)"))] + [(s.prefix, s.prefix) for s in MODEL_REGISTRY]
PROFILE_CHOICES = [(p.value, p.label) for p in Profile]


class SignInForm(AuthenticationForm):
    username = forms.EmailField(label=_("Email"), widget=forms.EmailInput(attrs={"autofocus": True, "autocomplete": "email"}))


class SignUpForm(forms.Form):
    tenant = forms.CharField(label=_("Workspace name"), max_length=120, required=False,
                             help_text=_("Leave it empty if you were invited to a workspace."))
    email = forms.EmailField(label=_("Email"))
    password = forms.CharField(label=_("Password"), widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))

    def clean_password(self) -> str:
        password: str = self.cleaned_data["password"]
        validate_password(password)
        return password


class PasswordResetAskForm(forms.Form):
    email = forms.EmailField(label=_("Email"), widget=forms.EmailInput(attrs={"autocomplete": "email"}))


class WorkspaceForm(forms.Form):
    tenant = forms.CharField(label=_("Workspace name"), max_length=120)


class InviteForm(forms.Form):
    email = forms.EmailField(label=_("Email"))
    role = forms.ChoiceField(label=_("Role"), choices=[("member", _("Member")), ("admin", _("Admin"))])


class ApiKeyForm(forms.Form):
    name = forms.CharField(label=_("Key name"), max_length=120)
    write = forms.BooleanField(label=_("May write (read is always included)"), required=False)


class CorsOriginsForm(forms.Form):
    origins = forms.CharField(
        label=_("Allowed origins (one a line)"),
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}), required=False,
    )

    def origin_list(self) -> list[str]:
        return [line.strip() for line in self.cleaned_data["origins"].splitlines() if line.strip()]


class BookCreateForm(forms.Form):
    title = forms.CharField(label=_("Title"), max_length=200)
    profile = forms.ChoiceField(label=_("Profile"), choices=PROFILE_CHOICES, initial=Profile.SMART)
    language = forms.CharField(label=_("Language"), max_length=16, initial="en")
    description = forms.CharField(label=_("Description"), widget=forms.Textarea(attrs={"rows": 2}), required=False)


class ImportNewForm(forms.Form):
    file = forms.FileField(label=_("File"))
    profile = forms.ChoiceField(label=_("Profile"), choices=PROFILE_CHOICES, initial=Profile.SMART)
    title = forms.CharField(label=_("Title (optional)"), max_length=200, required=False)
    language = forms.ChoiceField(label=_("Language of the lore"), choices=[("en", "English"), ("es", "Español")])


class ImportIntoForm(forms.Form):
    file = forms.FileField(label=_("File"))
    mode = forms.ChoiceField(
        label=_("Mode"), choices=[("append", _("Append (skip entries that exist)")), ("replace", _("Replace"))]
    )


class VisibilityForm(forms.Form):
    visibility = forms.ChoiceField(
        label=_("Visibility"),
        choices=[(Visibility.PRIVATE, _("Private")), (Visibility.UNLISTED, _("Unlisted (by link)")),
                 (Visibility.PUBLIC, _("Public (listed in the library)"))],
    )


# --- the entry form, per profile (issue 15.4) -------------------------------------------------
# The form only carries text to the entry services (books.services.entry_write), which check every
# field and name its rule, exactly as for the API: numbers and choices are passed on as typed, so a
# bad one gets the service's message, not Django's.

_TRI_STATE = [("", _("The book's setting")), ("true", _("Yes")), ("false", _("No"))]
# The models' choice labels are English only; the pages say them in the reader's language.
_LOGIC_CHOICES = [(SecondaryLogic.AND_ANY, _("Any secondary key (OR)")),
                  (SecondaryLogic.AND_ALL, _("All secondary keys (AND)")),
                  (SecondaryLogic.NOT_ANY, _("No secondary key (NOR)")),
                  (SecondaryLogic.NOT_ALL, _("Not all secondary keys (NAND)"))]
_ROLE_CHOICES = [(Role.SYSTEM, _("System")), (Role.USER, _("User")), (Role.ASSISTANT, _("Assistant"))]
_PLACEMENT_CHOICES = [(Placement.BEFORE_PERSONA, _("Before persona")), (Placement.AFTER_PERSONA, _("After persona"))]

# Which entry fields each profile's form shows (names from books.fields), in form order.
_PROFILE_FIELDS: dict[str, tuple[str, ...]] = {
    Profile.SMART: ("title", "content", "keys", "canon", "enabled"),
    Profile.CLASSIC: ("title", "content", "keys", "secondary_keys", "secondary_logic", "selective",
                      "key_expression", "constant", "enabled", "order", "priority", "probability", "scan_depth",
                      "case_sensitive", "whole_words", "role"),
    Profile.SERVER: ("title", "content", "keys", "secondary_keys", "secondary_logic", "selective",
                     "key_expression", "constant", "enabled", "order", "probability", "scan_depth", "placement"),
}
# SillyTavern books keep SillyTavern's own key logic (K-1 is for classic and server books).
_PROFILE_FIELDS[Profile.SILLYTAVERN] = tuple(n for n in _PROFILE_FIELDS[Profile.CLASSIC] if n != "key_expression")
_REGEX_KEY = re.compile(r"^/.*/[a-z]*$")


def _lines(text: str) -> list[str]:
    """One item per line; a line that is not a /regex/ may also hold several, comma separated."""
    items: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if _REGEX_KEY.match(line):
            items.append(line)
        else:
            items += [part.strip() for part in line.split(",") if part.strip()]
    return items


def _whole_number(text: str) -> Any:
    """Blank → None (the default applies); digits → int; anything else goes on as typed (the service refuses it)."""
    text = text.strip()
    if not text:
        return None
    return int(text) if re.fullmatch(r"-?\d{1,12}", text) else text


def entry_form_fields(book: Book, *, is_admin: bool) -> tuple[str, ...]:
    """The entry fields the form shows for ``book``: its profile's, and channels to tenant admins on
    persona books (S-11: per-entry channels exist only there; S-1: only admins edit them)."""
    names = _PROFILE_FIELDS.get(book.profile, _PROFILE_FIELDS[Profile.CLASSIC])
    if book.profile == Profile.SERVER and book.scope == Scope.PERSONA and is_admin:
        names = (*names, "channels")
    return names


class EntryForm(forms.Form):
    """An entry of ``book``, to add or to edit; ``fields_for_service`` is what the services receive."""

    def __init__(self, *args: Any, book: Book, is_admin: bool = False, entry: Entry | None = None,
                 **kwargs: Any) -> None:
        if entry is not None and "initial" not in kwargs:
            kwargs["initial"] = _entry_initial(entry)
        super().__init__(*args, **kwargs)
        self.book = book
        smart = book.profile == Profile.SMART
        server = book.profile == Profile.SERVER
        labels: dict[str, Any] = {
            "title": _("Display name") if not smart else _("Title"),
            "content": _("Lore"),
            "keys": _("Aliases (one per line)") if smart else (
                _("Keywords (comma separated)") if server else _("Keys (one per line or comma separated)")),
            "secondary_keys": _("Secondary keys"),
            "secondary_logic": _("Secondary keys logic"),
            "selective": _("Use secondary keys"),
            "key_expression": _("Key expression (optional; replaces keys and secondary logic)"),
            "canon": _("Canon (always sent as established truth)"),
            "constant": _("Constant (always on, no key needed)"),
            "enabled": _("Enabled"),
            "order": _("Insertion order"),
            "priority": _("Priority"),
            "probability": _("Probability (%)"),
            "scan_depth": _("Messages to search") if server else _("Scan depth"),
            "case_sensitive": _("Case sensitive"),
            "whole_words": _("Whole words"),
            "role": _("Role"),
            "placement": _("Placement"),
            "channels": _("Channels (one channel id per line; empty = all)"),
        }
        for name in entry_form_fields(book, is_admin=is_admin):
            if name == "enabled" and entry is None:
                continue  # a new entry is enabled; the bulk actions and its own form turn it off
            spec = ENTRY_FIELD["constant" if name == "canon" else name]
            field: forms.Field
            if name == "content":
                field = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}), required=False, strip=False)
            elif name in ("keys", "secondary_keys", "channels"):
                field = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
            elif name == "key_expression":
                # Kept as typed: a refusal's position counts in this very text (K-1).
                field = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False, strip=False,
                                        help_text=_('For example (dragon AND egg) OR hatchling, NOT statue. NOT binds '
                                                    'tightest, then AND, then OR, then the comma; operators in capitals; '
                                                    '"quoted phrases"; /regex/i keys.'))
            elif spec.type is bool and spec.nullable:
                field = forms.ChoiceField(choices=_TRI_STATE, required=False)
            elif spec.type is bool:
                field = forms.BooleanField(required=False)
            elif name == "secondary_logic":
                field = forms.ChoiceField(choices=_LOGIC_CHOICES, required=False)
            elif name == "role":
                field = forms.ChoiceField(choices=_ROLE_CHOICES, required=False)
            elif name == "placement":
                field = forms.ChoiceField(choices=_PLACEMENT_CHOICES, required=False)
            else:  # title and the numbers: text, checked by the services
                field = forms.CharField(required=False, strip=name != "title")
            field.label = labels[name]
            if entry is None and name not in self.initial and spec.default not in (None, "", ()):
                self.initial[name] = spec.default
            self.fields[name] = field
        if entry is not None:
            # The version the form was loaded with: a save from a stale tab is refused (412), not a lost update.
            self.fields["version"] = forms.CharField(widget=forms.HiddenInput, required=False)
            self.initial.setdefault("version", stamp_version(entry.updated_at))

    def expected_version(self) -> str | None:
        """The version the form was loaded with (None: a form posted without one writes unconditionally)."""
        return self.cleaned_data.get("version") or None

    def fields_for_service(self) -> dict[str, Any]:
        data = self.cleaned_data
        out: dict[str, Any] = {}
        for name in self.fields:
            if name == "version":
                continue
            value = data.get(name)
            if name in ("keys", "secondary_keys", "channels"):
                out[name] = _lines(value or "")
            elif name in ("order", "priority"):
                number = _whole_number(value or "")
                if number is not None:
                    out[name] = number
            elif name in ("probability", "scan_depth"):
                out[name] = _whole_number(value or "")
            elif name in ("case_sensitive", "whole_words"):
                out[name] = {"true": True, "false": False}.get(value or "")
            elif name in ("secondary_logic", "role", "placement"):
                if value:
                    out[name] = value
            else:
                out[name] = value if value is not None else ""
        return out


def _entry_initial(entry: Entry) -> dict[str, Any]:
    def tri(value: bool | None) -> str:
        return "" if value is None else "true" if value else "false"

    return {
        "title": entry.title, "content": entry.content, "keys": "\n".join(entry.keys),
        "secondary_keys": "\n".join(entry.secondary_keys), "secondary_logic": entry.secondary_logic,
        "selective": entry.selective, "canon": entry.constant, "constant": entry.constant, "enabled": entry.enabled,
        "order": entry.order, "priority": entry.priority,
        "probability": "" if entry.probability is None else entry.probability,
        "scan_depth": "" if entry.scan_depth is None else entry.scan_depth,
        "case_sensitive": tri(entry.case_sensitive), "whole_words": tri(entry.whole_words), "role": entry.role,
        "placement": entry.placement, "channels": "\n".join(entry.channels),
        "key_expression": entry.key_expression,
    }


class PreviewForm(forms.Form):
    message = forms.CharField(
        label=_("Sample message"),
        widget=forms.Textarea(attrs={"rows": 3, "maxlength": PREVIEW_MAX}),
        max_length=PREVIEW_MAX,
        error_messages={"max_length": _("A preview message is at most 2,000 characters (W-10).")},
    )
    profile = forms.ChoiceField(label=_("Profile"), choices=[("", _("The book's own")), *PROFILE_CHOICES], required=False)
    model = forms.ChoiceField(label=_("Model"), choices=MODEL_CHOICES, required=False)


class CharacterForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=120)


# --- stories, novels, attaching (issue 15.6) and AI updates (L-4) ----------------------------


class StoryForm(forms.Form):
    """A story or a novel: a title and a cast of the tenant's characters."""

    title = forms.CharField(label=_("Title"))  # its length is the service's rule (cast.chats)
    cast_ids = forms.MultipleChoiceField(label=_("Cast"), required=False, widget=forms.CheckboxSelectMultiple)

    def __init__(self, *args: object, characters: list[tuple[int, str]], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["cast_ids"].choices = [(str(pk), name) for pk, name in characters]  # type: ignore[attr-defined]


class AttachForm(forms.Form):
    """One of my books, or an unlisted book by its link (W-9); the service decides what is readable."""

    book_id = forms.TypedChoiceField(label=_("Book"), coerce=int, required=False, empty_value=None)
    link_token = forms.CharField(label=_("Or the link of an unlisted book"), required=False, max_length=300)

    def __init__(self, *args: object, books: list[tuple[int, str]], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["book_id"].choices = [("", _("Choose a book"))] + [(pk, t) for pk, t in books]  # type: ignore[attr-defined]

    def clean_link_token(self) -> str:
        # A pasted link (…/link/<token>) or the bare token.
        value: str = self.cleaned_data["link_token"].strip()
        return value.rstrip("/").rsplit("/link/", 1)[-1] if "/link/" in value else value


class LoreWriteEditForm(forms.Form):
    """The owner's edits to a held AI update: a new entry's title, lore and aliases, or an append's text."""

    title = forms.CharField(label=_("Title"), required=False)
    lore = forms.CharField(label=_("Lore"), widget=forms.Textarea(attrs={"rows": 3}), required=False, strip=False)
    aliases = forms.CharField(label=_("Aliases (comma separated)"), required=False)
    text = forms.CharField(label=_("Added text"), widget=forms.Textarea(attrs={"rows": 3}), required=False,
                           strip=False)

    def __init__(self, *args: object, kind: str, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        for name in (("text",) if kind == "create" else ("title", "lore", "aliases")):
            del self.fields[name]
# --- AI jobs (issue 16, point 5): the limits are the jobs services' (W-12, A-3), not these forms' ---


class _TargetBookForm(forms.Form):
    book = forms.TypedChoiceField(label=_("Target book (optional)"), coerce=int, empty_value=None, required=False)

    def __init__(self, *args: object, books: object = (), **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["book"].choices = [("", _("None: choose when accepting"))] + [  # type: ignore[attr-defined]
            (book.pk, book.title) for book in books  # type: ignore[attr-defined]
        ]


class GenerateForm(_TargetBookForm):
    description = forms.CharField(
        label=_("Describe your world"), required=False, strip=False,
        widget=forms.Textarea(attrs={"rows": 8, "maxlength": limits.GENERATE_PROMPT.value}),
        help_text=_("Up to 4,000 characters (W-12). The draft has 4–16 entries, a few marked canon (A-1)."),
    )
    language = forms.CharField(label=_("Language of the entries (optional, e.g. es)"), required=False)
    field_order = ("description", "language", "book")


class SplitForm(_TargetBookForm):
    text = forms.CharField(
        label=_("Your notes"), required=False, strip=False,
        widget=forms.Textarea(attrs={"rows": 14, "maxlength": limits.SPLIT_TEXT_INPUT.value}),
        help_text=_("Up to 40,000 characters (W-12). Headings, “Name: text” lines, lists and blank-line "
                    "sections each become an entry (A-2)."),
    )
    field_order = ("text", "book")


class ModelSettingsForm(forms.Form):
    """The operator's endpoints to choose from; a URL of the workspace's own only where the operator permits it (A-3)."""

    endpoint = forms.ChoiceField(label=_("Model server"), required=False, choices=())
    base_url = forms.CharField(label=_("Or a model server of this workspace's own: base URL"), required=False,
                               widget=forms.TextInput(attrs={"placeholder": "https://llm.example.com/v1"}))
    model = forms.CharField(label=_("Model (blank: the operator's)"), required=False)
    api_key = forms.CharField(label=_("API key (blank: keep the current one)"), required=False,
                              widget=forms.PasswordInput(attrs={"autocomplete": "off"}))
    clear_key = forms.BooleanField(label=_("Remove this workspace's key"), required=False)

    def __init__(self, *args: Any, endpoints: Sequence[str] = (), tenant_endpoints: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choice = self.fields["endpoint"]
        assert isinstance(choice, forms.ChoiceField)
        choice.choices = [("", _("The operator's default")), *((name, name) for name in endpoints)]
        if not tenant_endpoints:
            del self.fields["base_url"]


# --- book settings (issue 28) ------------------------------------------------------------------
# Scan settings each profile reads (C-2..C-4 for the keyword profiles; a world book reads only its budget).
BOOK_SCAN_FIELDS: dict[str, tuple[str, ...]] = {
    Profile.CLASSIC: ("scan_depth", "token_budget", "recursive", "case_sensitive", "whole_words"),
    Profile.SILLYTAVERN: ("scan_depth", "token_budget", "recursive", "case_sensitive", "whole_words"),
    Profile.SERVER: ("scan_depth", "token_budget", "recursive", "case_sensitive", "whole_words"),
    Profile.SMART: ("token_budget",),
}


def book_living_allowed(book: Book) -> bool:
    """L-1: the living world is for private world books owned by a user."""
    return book.profile == Profile.SMART and book.owner_id is not None and book.visibility == Visibility.PRIVATE


class BookSettingsForm(forms.Form):
    """A book's own settings; the book service checks every value and names its rule."""

    title = forms.CharField(label=_("Title"), max_length=200)
    description = forms.CharField(label=_("Description"), widget=forms.Textarea(attrs={"rows": 3}), required=False)
    tags = forms.CharField(
        label=_("Tags (separated by commas)"), required=False,
        widget=forms.TextInput(attrs={"list": "tag-suggestions", "autocomplete": "off", "data-tags": "1"}),
    )
    language = forms.CharField(label=_("Language"), max_length=16, required=False,
                               help_text=_("The language the lore is written in, e.g. en, es, zh."))
    scan_depth = forms.CharField(label=_("Scan depth (messages; empty = the profile's default)"), required=False)
    token_budget = forms.CharField(label=_("Token budget (empty = the profile's default)"), required=False)
    recursive = forms.BooleanField(label=_("Recursive scanning"), required=False)
    case_sensitive = forms.BooleanField(label=_("Case-sensitive keys"), required=False)
    whole_words = forms.BooleanField(label=_("Match whole words"), required=False)
    living_world = forms.BooleanField(label=_("Living world (the model may add lore from your own chats)"),
                                      required=False)

    def __init__(self, *args: Any, book: Book, **kwargs: Any) -> None:
        kwargs.setdefault("initial", {
            "title": book.title, "description": book.description, "tags": ", ".join(book.tags or []),
            "language": book.language, "scan_depth": "" if book.scan_depth is None else book.scan_depth,
            "token_budget": "" if book.token_budget is None else book.token_budget,
            "recursive": book.recursive, "case_sensitive": book.case_sensitive, "whole_words": book.whole_words,
            "living_world": book.living_world,
        })
        super().__init__(*args, **kwargs)
        scan = BOOK_SCAN_FIELDS.get(book.profile, ())
        for name in ("scan_depth", "token_budget", "recursive", "case_sensitive", "whole_words"):
            if name not in scan:
                del self.fields[name]
        if not book_living_allowed(book):
            del self.fields["living_world"]

    def fields_for_service(self) -> dict[str, Any]:
        data = self.cleaned_data
        out: dict[str, Any] = {name: data[name] for name in self.fields}
        out["tags"] = [t.strip() for t in (data.get("tags") or "").split(",") if t.strip()]
        for name in ("scan_depth", "token_budget"):
            if name in out:
                out[name] = _whole_number(out[name]) if str(out[name]).strip() else None
        return out
