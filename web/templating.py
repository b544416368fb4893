"""The pages' template backend: Django's, with what it renders made writable as UTF-8 (issue 26, point 5).

A row stored before the text check (``lore_platform.text``) can hold an unpaired surrogate
inside a JSON column; shown on a page it made encoding the whole page fail (a 500 for a book's
entry list because of one entry). Every rendered page and fragment is passed through
``text_clean`` — U+FFFD in place of a lone surrogate, NUL dropped — the same repair the API's
encoder and ``manage.py text_repair`` apply. A clean page is returned as it is (one regex scan).
"""
from __future__ import annotations

from typing import Any

from django.template.backends.django import DjangoTemplates, Template
from django.utils.safestring import mark_safe

from lore_platform.text import text_clean


class RepairingTemplate(Template):
    """A Django backend template whose ``render`` returns text UTF-8 can encode."""

    def render(self, context: Any = None, request: Any = None) -> str:
        rendered = super().render(context, request)
        cleaned = text_clean(rendered)
        # Safe: the template already escaped it; only lone surrogates and NUL were replaced or dropped.
        return rendered if cleaned is rendered else mark_safe(cleaned)


class RepairingTemplates(DjangoTemplates):
    def from_string(self, template_code: str) -> RepairingTemplate:
        return RepairingTemplate(super().from_string(template_code).template, self)

    def get_template(self, template_name: str) -> RepairingTemplate:
        return RepairingTemplate(super().get_template(template_name).template, self)
