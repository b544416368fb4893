from typing import Any

from django import template

from lore_platform.web.refusals import refusal_text

register = template.Library()


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    return mapping.get(key) if mapping else None


@register.filter
def refusal(error: Any) -> str:
    """A service's refusal in the page's language, with its rule ID once (web.refusals)."""
    return refusal_text(error)
