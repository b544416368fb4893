"""Fixtures for sharing tests: shared books, display languages and the toy language package."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sharing.translation import package_install_from_path
from tests.shared_data import require_shared


@pytest.fixture(autouse=True)
def display_settings(settings: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """English and Spanish display languages; no language package unless a test installs one."""
    settings.LOREWEAVE_DISPLAY_LANGUAGES = ["en", "es"]
    settings.LOREWEAVE_TRANSLATION_PACKAGES_DIR = str(tmp_path_factory.mktemp("no-packages"))
    return settings


@pytest.fixture(scope="session")
def toy_packages_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A packages folder holding the real toy en→es Argos package (installed once per run)."""
    archive = require_shared("recipes", "translate-en_es-toy.argosmodel")
    folder = tmp_path_factory.mktemp("packages")
    package_install_from_path(archive, folder)
    return folder


@pytest.fixture
def toy_package(display_settings: Any, toy_packages_dir: Path) -> Path:
    display_settings.LOREWEAVE_TRANSLATION_PACKAGES_DIR = str(toy_packages_dir)
    return toy_packages_dir


@pytest.fixture(scope="session")
def xling() -> dict[str, Any]:
    """The 20 English/Spanish entries (40 sentences) the toy package translates exactly."""
    return json.loads(require_shared("recipes", "xling-eval.json").read_text(encoding="utf-8"))
