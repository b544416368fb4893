"""The sharing app's settings, read in one place.

``config/settings.py`` owns the environment; until it defines these
names, the defaults here apply:

- ``LOREWEAVE_DISPLAY_LANGUAGES``: languages every non-private book is
  translated into for display (P-4). Default ``["en", "es"]``.
- ``LOREWEAVE_TRANSLATION_PACKAGES_DIR``: where ``translation_install``
  unpacks Argos ``.argosmodel`` packages. Default
  ``DATA_DIR / "translation-packages"``.
"""
from __future__ import annotations

from pathlib import Path

from django.conf import settings

DEFAULT_DISPLAY_LANGUAGES = ("en", "es")


def language_base(code: str | None) -> str:
    """``"en-US"`` → ``"en"``: packages and display languages use primary subtags."""
    return (code or "").strip().replace("_", "-").split("-", 1)[0].lower()


def display_languages() -> list[str]:
    configured = getattr(settings, "LOREWEAVE_DISPLAY_LANGUAGES", DEFAULT_DISPLAY_LANGUAGES)
    if isinstance(configured, str):
        configured = configured.split(",")
    seen: list[str] = []
    for code in configured:
        base = language_base(code)
        if base and base not in seen:
            seen.append(base)
    return seen


def packages_dir() -> Path:
    configured = getattr(settings, "LOREWEAVE_TRANSLATION_PACKAGES_DIR", None)
    if configured:
        return Path(configured)
    return Path(settings.DATA_DIR) / "translation-packages"
