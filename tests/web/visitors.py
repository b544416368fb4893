"""A signed-in browser visitor for the page scenarios (test_browser.Visitor: axe + screenshots)."""
from __future__ import annotations

import re
from typing import Any

from tests.web.support import PASSWORD, with_password
from tests.web.test_browser import Visitor


def signed_in_visitor(browser: Any, live_server: Any, user: Any, locale: str, name: str) -> Visitor:
    """``user`` signed in through the sign-in page, in a browser of ``locale``."""
    with_password(user)
    visitor = Visitor(browser, live_server.url, locale, name)
    page = visitor.go("/login")
    page.locator('input[name="username"]').fill(user.email)
    page.locator('input[name="password"]').fill(PASSWORD)
    page.locator('input[name="password"]').press("Enter")
    page.wait_for_url(re.compile(r"/books$"))
    return visitor
