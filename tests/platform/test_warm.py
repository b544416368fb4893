"""What gunicorn's master loads before it forks (config/warm.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_urlconf_is_loaded_before_the_first_request() -> None:
    # A worker's first call would otherwise import every app's views (~0.75 s): the master does it once.
    code = (
        "import sys, django; django.setup();"
        "from config.warm import process_warm; process_warm();"
        "from django.conf.urls.i18n import is_language_prefix_patterns_used as used;"
        "print('jobs.api.views' in sys.modules, used.cache_info().currsize)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "LOREWEAVE_PRELOAD_TOKENIZERS": ""}
    env.pop("DATABASE_URL", None)
    env.pop("CELERY_BROKER_URL", None)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.split() == ["True", "1"]
