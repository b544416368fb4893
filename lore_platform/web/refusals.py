"""A service's refusal shown to a person. The services decide and name the rule
(lore_platform.errors.DomainError); the pages only say it, all alike, with its rule ID once."""
from __future__ import annotations

import re

from django import forms

from lore_platform.errors import DomainError


def refusal_text(exc: DomainError) -> str:
    """A service's refusal as a person reads it: its message, with the rule ID (once)."""
    return f"{exc.message} ({exc.rule})" if exc.rule and exc.rule not in exc.message else exc.message


def domain_error_show(form: forms.Form, exc: DomainError) -> None:
    """Show a service's refusal on the form, on its field when the form has it, with the rule ID."""
    text = refusal_text(exc)
    # A list item's error (keys[3]) belongs to the list's field.
    name = re.sub(r"\[\d+\]$", "", exc.field or "")
    field = name if name in form.fields else None
    form.add_error(field, text)
