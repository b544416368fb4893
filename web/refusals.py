"""A service's refusal shown to a person: on the form's field, as a message on the next page, or
left to ``refusals_as_pages`` to become a page of its own.

The services decide and name the rule (lore_platform.errors.DomainError); the pages only say it.
One place says how, so every page words a refusal alike, with its rule ID once:

    with refusal_on_form(form) as refused:
        book = book_create(...)
    if not refused:
        return redirect("web-book", book_id=book.pk)
"""
from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest
from django.utils.translation import gettext

from books.warnings import EntryWarning
from lore_platform.errors import DomainError, Phrase, Term

# Missing and forbidden (P-3) are no form or message matter: `refusals_as_pages` makes them pages.
PAGE_STATUSES = (403, 404)


def phrase_said(text: str) -> str:
    """A service's sentence in the page's language: the catalogue's translation of a ``Phrase``'s
    template filled in with its values (``Term`` values, and a refusal inside a refusal — a draft
    entry's limit — translated too), of plain English as it is; the English where the catalogue has
    none or a translation does not fit the values."""
    if not isinstance(text, Phrase):
        return gettext(text)
    translated = gettext(text.template)
    if not text.values:
        return translated
    words = {name: gettext(value) if isinstance(value, Term) else refusal_said(value) if isinstance(value, DomainError)
             else value for name, value in text.values.items()}
    try:
        return translated.format(**words)
    except (KeyError, IndexError, ValueError):
        return str(text)


def receipt_said(receipt: dict[str, Any]) -> dict[str, Any]:
    """An import receipt as the page shows it: its notes and the skipped entries' reasons in the page's
    language (the receipt itself, the API's, stays English). Plain data: it goes into the session."""
    said = dict(receipt)
    said["warnings"] = [phrase_said(note) for note in receipt.get("warnings", [])]
    said["skipped"] = [{**row, "reason": phrase_said(row.get("reason", ""))} for row in receipt.get("skipped", [])]
    return said


def refusal_said(exc: DomainError) -> str:
    """A service's refusal in the page's language (``phrase_said``)."""
    return phrase_said(exc.message)


def warning_text(warning: EntryWarning) -> str:
    """An entry's warning in the page's language, with its rule ID."""
    return f"{phrase_said(warning.message)} ({warning.rule})"


def refusal_text(exc: DomainError) -> str:
    """A service's refusal as a person reads it: its message in the page's language, with the rule
    ID (once)."""
    said = refusal_said(exc)
    return f"{said} ({exc.rule})" if exc.rule and exc.rule not in said else said


def domain_error_show(form: forms.Form, exc: DomainError) -> None:
    """Show a service's refusal on the form, on its field when the form has it, with the rule ID."""
    text = refusal_text(exc)
    # A list item's error (keys[3]) belongs to the list's field.
    name = re.sub(r"\[\d+\]$", "", exc.field or "")
    field = name if name in form.fields else None
    form.add_error(field, text)


@dataclass
class Refused:
    """What the block under a refusal helper was refused with; false while nothing was refused."""

    error: DomainError | None = None

    def __bool__(self) -> bool:
        return self.error is not None

    @property
    def status(self) -> int:
        """The refusal's HTTP status (200 while nothing was refused), for the page that shows it."""
        return self.error.status if self.error is not None else 200


# A page that shows a form again because its input was refused is no success: 422 (issue 26,
# point 7), so scripts, tests and browsers' tools see the refusal, not a 200.
FORM_REFUSED_STATUS = 422


def form_page_status(*bound: forms.Form | None, refused: Refused | None = None) -> int:
    """The status of a page showing its forms again: a service's refusal answers its own status (as
    the API does), a form's own errors 422, and a page with nothing refused 200."""
    if refused:
        return refused.status
    if any(form is not None and form.is_bound and form.errors for form in bound):
        return FORM_REFUSED_STATUS
    return 200


@contextmanager
def refusal_caught(*, reraise: Collection[int] = ()) -> Iterator[Refused]:
    """Catch a service's refusal for the page to show its own way; the statuses in ``reraise`` go
    on to ``refusals_as_pages``."""
    refused = Refused()
    try:
        yield refused
    except DomainError as exc:
        if exc.status in reraise:
            raise
        refused.error = exc


@contextmanager
def refusal_on_form(form: forms.Form, *, reraise: Collection[int] = ()) -> Iterator[Refused]:
    """A refusal of the form's input shows on the form, next to its field, and the form is shown
    again; every status does by default (a book the form named but may not read is its field's)."""
    with refusal_caught(reraise=reraise) as refused:
        yield refused
    if refused.error is not None:
        domain_error_show(form, refused.error)


@contextmanager
def refusal_as_message(request: HttpRequest, *, reraise: Collection[int] = PAGE_STATUSES) -> Iterator[Refused]:
    """A refused action shows as an error message on the page the view redirects to."""
    with refusal_caught(reraise=reraise) as refused:
        yield refused
    if refused.error is not None:
        messages.error(request, refusal_text(refused.error))
