"""The browser tests fail on any Content-Security-Policy violation Chromium reports (issue 26); each
test starts with the pages' per-process caches empty."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.web.browser import CSP_VIOLATIONS


@pytest.fixture(autouse=True)
def no_csp_violation(request: pytest.FixtureRequest) -> Iterator[None]:
    if "browser" not in request.fixturenames:
        yield
        return
    CSP_VIOLATIONS.clear()
    yield
    violations = list(CSP_VIOLATIONS)
    CSP_VIOLATIONS.clear()
    assert violations == [], f"Content-Security-Policy violations: {violations}"


@pytest.fixture(autouse=True)
def _page_caches_empty() -> None:
    # Canon sizes are cached per (book id, version): ids repeat from one test's database to the next.
    from web.selectors import _canon_tokens

    _canon_tokens.cache_clear()
