"""Where the team's shared data (conformance cases, corpus, recipes) lives.

Shared data is read in place, never copied into the repository. In CI it sits
beside the checkout as ``../shared``; elsewhere ``LOREWEAVE_SHARED`` may point
at it, and tests that need it skip with a clear message when it is absent.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_dir() -> Path | None:
    configured = os.environ.get("LOREWEAVE_SHARED")
    candidate = Path(configured) if configured else REPO_ROOT.parent / "shared"
    return candidate if candidate.is_dir() else None


def require_shared(*parts: str) -> Path:
    """Return ``shared/<parts>``; skip the test (fail under CI) when it is missing."""
    root = shared_dir()
    path = root.joinpath(*parts) if root else None
    if path is None or not path.exists():
        message = (
            f"shared data {'/'.join(parts)!r} not found: set LOREWEAVE_SHARED or place "
            "the team's shared/ folder beside the checkout"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path
