"""Schemathesis (pinned in pyproject.toml) over every operation of a live server on the embedded default.

The checks and their reasons are in ``tests/contract/schemathesis.toml``. The run is bounded
(``max-examples``, a fixed seed) to stay within a few minutes on CI.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.contract.live import LiveServer

pytestmark = pytest.mark.contract

HERE = Path(__file__).resolve().parent
ST = Path(sys.executable).parent / "schemathesis"


def _post(live: LiveServer, path: str, body: dict) -> dict:
    request = urllib.request.Request(
        f"{live.url}{path}",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Api-Key {live.api_key}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_schemathesis_finds_no_failure(live: LiveServer, tmp_path: Path) -> None:
    spare_book = _post(live, "/api/v1/books", {"title": "Spare book for the delete test"})
    spare_key = _post(live, "/api/v1/api-keys", {"name": "spare", "scopes": ["read"]})
    env = dict(
        os.environ,
        ST_API_KEY=live.api_key,
        ST_BOOK_ID=str(live.book_id),
        ST_SPARE_BOOK_ID=str(spare_book["id"]),
        ST_SPARE_KEY_ID=str(spare_key["id"]),
        NO_COLOR="1",
    )
    result = subprocess.run(
        [str(ST), "--config-file", str(HERE / "schemathesis.toml"), "run", f"{live.url}/api/schema/",
         "--phases", "examples,coverage,fuzzing", "--no-shrink", "--report", "junit",
         "--report-dir", str(tmp_path)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    output = result.stdout + result.stderr
    log = live.log.read_text(errors="replace")
    crashes = [chunk[:4000] for chunk in log.split("unhandled exception")[1:]]
    assert result.returncode == 0, output[-12000:] + "\n--- server log ---\n" + "\n".join(crashes)[-8000:]
    selected = re.search(r"Selected: (\d+)/(\d+)", output)
    assert selected and selected.group(1) == selected.group(2), output[-3000:]  # every operation ran
    assert not crashes
