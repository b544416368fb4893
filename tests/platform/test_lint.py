"""The product, the bench and the tests pass ruff's checks (rule set and its reasons: pyproject [tool.ruff])."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

REPO = Path(__file__).resolve().parents[2]
LINTED = ["config", "web", "backup", "cast", "jobs", "sharing", "retrieval", "books", "lore_platform", "bench",
          "tests", "manage.py"]


@pytest.mark.skipif(connection.vendor == "postgresql",
                    reason="static check: runs once, in the SQLite pass")
def test_ruff_finds_nothing():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *LINTED],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-1000:]
