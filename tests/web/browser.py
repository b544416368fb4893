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
        page.add_script_tag(path=str(AXE))
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
