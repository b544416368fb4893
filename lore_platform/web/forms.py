"""Page forms: they parse and bound input; the services decide (and name the rule)."""
from __future__ import annotations

from django import forms
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.password_validation import validate_password
from django.utils.translation import gettext_lazy as _

from books import limits
from books.models import Profile, Visibility
from lore_platform.errors import DomainError
from retrieval.engine.tokenizers import MODEL_REGISTRY

PREVIEW_MAX = 2000  # W-10 / W-12: a preview message is at most 2,000 characters
MODEL_CHOICES = [("", _("Unknown model (estimate)"))] + [(s.prefix, s.prefix) for s in MODEL_REGISTRY]
PROFILE_CHOICES = [(p.value, p.label) for p in Profile]


def refusal_text(exc: DomainError) -> str:
    """A service's refusal as a person reads it: its message, with the rule ID."""
    return f"{exc.message} ({exc.rule})" if exc.rule and exc.rule not in exc.message else exc.message


def domain_error_show(form: forms.Form, exc: DomainError) -> None:
    """Show a service's refusal on the form, on its field when the form has it, with the rule ID."""
    text = refusal_text(exc)
    field = exc.field if exc.field in form.fields else None
    form.add_error(field, text)


class SignInForm(AuthenticationForm):
    username = forms.EmailField(label=_("Email"), widget=forms.EmailInput(attrs={"autofocus": True, "autocomplete": "email"}))


class SignUpForm(forms.Form):
    tenant = forms.CharField(label=_("Workspace name"), max_length=120)
    email = forms.EmailField(label=_("Email"))
    password = forms.CharField(label=_("Password"), widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))

    def clean_password(self) -> str:
        password: str = self.cleaned_data["password"]
        validate_password(password)
        return password


class ApiKeyForm(forms.Form):
    name = forms.CharField(label=_("Key name"), max_length=120)
    write = forms.BooleanField(label=_("May write (read is always included)"), required=False)


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


class EntryForm(forms.Form):
    title = forms.CharField(label=_("Title"), required=False, max_length=20000)
    content = forms.CharField(label=_("Lore"), widget=forms.Textarea(attrs={"rows": 4}), required=False)
    keys = forms.CharField(label=_("Keys / aliases (comma separated)"), required=False)
    canon = forms.BooleanField(label=_("Canon / constant"), required=False)


class PreviewForm(forms.Form):
    message = forms.CharField(
        label=_("Sample message"),
        widget=forms.Textarea(attrs={"rows": 3, "maxlength": PREVIEW_MAX}),
        max_length=PREVIEW_MAX,
        error_messages={"max_length": _("A preview message is at most 2,000 characters (W-10).")},
    )
    profile = forms.ChoiceField(label=_("Profile"), choices=[("", _("The book's own"))] + PROFILE_CHOICES, required=False)
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
    base_url = forms.CharField(label=_("Base URL (blank: the operator's)"), required=False,
                               widget=forms.TextInput(attrs={"placeholder": "http://127.0.0.1:8080/v1"}))
    model = forms.CharField(label=_("Model (blank: the operator's)"), required=False)
    api_key = forms.CharField(label=_("API key (blank: keep the current one)"), required=False,
                              widget=forms.PasswordInput(attrs={"autocomplete": "off"}))
    clear_key = forms.BooleanField(label=_("Remove this workspace's key"), required=False)
