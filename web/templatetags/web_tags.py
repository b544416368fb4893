from typing import Any

from django import template

from web.refusals import refusal_text, warning_text

register = template.Library()


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    return mapping.get(key) if mapping else None


@register.filter
def refusal(error: Any) -> str:
    """A service's refusal in the page's language, with its rule ID once (web.refusals)."""
    return refusal_text(error)


@register.filter
def warning(entry_warning: Any) -> str:
    """An entry's warning in the page's language, with its rule ID (web.refusals)."""
    return warning_text(entry_warning)
