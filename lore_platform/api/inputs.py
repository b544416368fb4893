"""Input serializers that refuse fields they do not know (issue 27 point 5, one operation at a time).

DRF ignores unknown fields; a partner that misspells one then silently loses it, and a schema that
allows any extra property lets generated clients (and schemathesis) send values the parser refuses
for their own sake (an integer past 64 bits). A ``StrictInput`` answers 400 naming the first unknown
field, and its request schema says ``additionalProperties: false`` (``lore_platform.api.schema``).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

# Component names of the strict request bodies, as drf-spectacular names them (COMPONENT_SPLIT_REQUEST).
STRICT_REQUEST_COMPONENTS: set[str] = set()


class StrictInput(serializers.Serializer):
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The request component only: a serializer also used for answers keeps its response schema open.
        STRICT_REQUEST_COMPONENTS.add(f"{cls.__name__.removesuffix('Serializer')}Request")

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(str(key) for key in data if key not in self.fields)
            if unknown:
                known = ", ".join(sorted(self.fields))
                raise serializers.ValidationError(
                    {unknown[0]: [f"Unknown field: this body takes {known}."]}, code="unknown_field"
                )
        return super().to_internal_value(data)


def validated(serializer_class: Any, data: Any) -> dict[str, Any]:
    """``data`` read through an input serializer: its validated values, or a 400 naming the field."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)
