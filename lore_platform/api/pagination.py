"""Pages of results: ``{count, next, previous, results}``, with ``page`` and ``page_size``.

A ``page_size`` that is not a whole number of at least 1 is a 400 naming it (DRF
would quietly answer the default size); one above ``max_page_size`` (the schema's
maximum) gets the largest page there is.
"""
from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.pagination import PageNumberPagination

MAX_PAGE_SIZE = 500


class Pagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE

    def get_page_size(self, request: Any) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return int(self.page_size or MAX_PAGE_SIZE)
        try:
            size = int(raw)
        except ValueError:
            size = 0
        if size < 1:
            raise serializers.ValidationError(
                {self.page_size_query_param: [f"A whole number from 1 to {self.max_page_size}."]}
            )
        return min(size, self.max_page_size)  # more than a page: the largest page there is

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"]["minimum"] = 1
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update(minimum=1, maximum=self.max_page_size)
        return parameters


class PageParams(serializers.Serializer):
    """``page`` and ``page_size``, for views that page by hand (``parameters=[PageParams]``)."""

    page = serializers.IntegerField(required=False, min_value=1, help_text="Page number (from 1).")
    page_size = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_PAGE_SIZE, help_text=f"Results per page (1–{MAX_PAGE_SIZE})."
    )


def page_of(item: type[serializers.Serializer], name: str) -> type[serializers.Serializer]:
    """The typed page of ``item`` results, named ``name`` in the schema."""
    return type(
        name,
        (serializers.Serializer,),
        {
            "count": serializers.IntegerField(help_text="Results on every page."),
            "next": serializers.URLField(allow_null=True, help_text="The next page, or null."),
            "previous": serializers.URLField(allow_null=True, help_text="The previous page, or null."),
            "results": item(many=True),
            "__module__": __name__,
        },
    )
