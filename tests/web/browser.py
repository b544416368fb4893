"""Playwright on Debian's Chromium (installed by scripts/setup.sh; never `playwright install`),
axe-core from its npm package (var/node, also setup.sh), screenshots kept for CI."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
AXE = REPO / "var" / "node" / "node_modules" / "axe-core" / "axe.min.js"
SCREENSHOTS = Path(os.environ.get("SCREENSHOTS_DIR", REPO / "var" / "screenshots"))
BLOCKING = ("serious", "critical")


def axe_violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        # Evaluated by the test driver, not added as a <script>: the pages' Content-Security-Policy
        # refuses inline script, and the tool is no part of the page.
        page.evaluate("source => { (0, eval)(source); }", AXE.read_text(encoding="utf-8"))
    found = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map(n => n.target.join(' '))}))"
    )
    return [v for v in found if v["impact"] in BLOCKING]


def shot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


# Every Content-Security-Policy violation Chromium reports in a watched context's console (issue 26):
# tests/web/conftest.py fails the browser test that saw one.
CSP_VIOLATIONS: list[str] = []


def csp_watch(context: Any) -> Any:
    """Record the context's Content-Security-Policy violations (console and security-policy events)."""

    def seen(message: Any) -> None:
        if "Content Security Policy" in message.text:
            CSP_VIOLATIONS.append(f"{message.type}: {message.text}")

    context.on("console", seen)
    # Violations the console may not say (a blocked style attribute in a swapped fragment) as events.
    context.add_init_script(
        "document.addEventListener('securitypolicyviolation', e => console.error("
        "'Content Security Policy violation: ' + e.violatedDirective + ' ' + (e.blockedURI || 'inline') +"
        " ' on ' + e.documentURI));"
    )
    return context


class CspWatchedBrowser:
    """A Playwright browser whose every new context is watched for CSP violations."""

    def __init__(self, browser: Any) -> None:
        self._browser = browser

    def new_context(self, *args: Any, **kwargs: Any) -> Any:
        return csp_watch(self._browser.new_context(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._browser, name)
