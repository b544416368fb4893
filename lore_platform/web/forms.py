"""Page forms: they parse and bound input; the services decide (and name the rule)."""
from __future__ import annotations

from django import forms
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.password_validation import validate_password
from django.utils.translation import gettext_lazy as _

from books.models import Profile, Visibility
from lore_platform.errors import DomainError
from retrieval.engine.tokenizers import MODEL_REGISTRY

PREVIEW_MAX = 2000  # W-10 / W-12: a preview message is at most 2,000 characters
MODEL_CHOICES = [("", _("Unknown model (estimate)"))] + [(s.prefix, s.prefix) for s in MODEL_REGISTRY]
PROFILE_CHOICES = [(p.value, p.label) for p in Profile]


def domain_error_show(form: forms.Form, exc: DomainError) -> None:
    """Show a service's refusal on the form, on its field when the form has it, with the rule ID."""
    text = f"{exc.message} ({exc.rule})" if exc.rule and exc.rule not in exc.message else exc.message
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
