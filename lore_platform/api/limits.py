"""Limits stated in the schema, enforced by the service that owns them.

A product limit is checked by its service (``books.limits``), which names the field
and the rule in a 422 or 400 on every path (API, importer, tasks). The serializer
carries the same constant as a validator that only documents it: drf-spectacular
turns it into ``maxLength``/``maxItems``/``maximum``…, and the check itself stays in
one place, so the number in the schema and the number enforced cannot drift apart.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core import validators
from rest_framework import serializers


class _Documented:
    def __call__(self, value: Any) -> None:  # the service checks it, with its rule
        return None


class DocMaxLength(_Documented, validators.MaxLengthValidator):
    pass


class DocMinLength(_Documented, validators.MinLengthValidator):
    pass


class DocMaxValue(_Documented, validators.MaxValueValidator):
    pass


class DocMinValue(_Documented, validators.MinValueValidator):
    pass


def documented(
    field: Any,
    *,
    min_length: int | None = None,
    max_length: int | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
) -> Any:
    """``field`` with limits for the schema (lengths: characters of a string, items of a list)."""
    extra: list[Any] = []
    if min_length:
        extra.append(DocMinLength(min_length))
    if max_length is not None:
        extra.append(DocMaxLength(max_length))
    if minimum is not None:
        extra.append(DocMinValue(minimum))
    if maximum is not None:
        extra.append(DocMaxValue(maximum))
    field.validators = [*field.validators, *extra]
    return field


class CountedListField(serializers.ListField):
    """A list counted before its items are read: ``precheck(len(data))`` raises the owner's limit error.

    DRF validates every item before ``max_length``; 100,000 items took seconds before the 20-item
    limit was even looked at.
    """

    def __init__(self, *, precheck: Callable[[int], None], **kwargs: Any) -> None:
        self.precheck = precheck
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, list):
            self.precheck(len(data))
        return super().to_internal_value(data)
