"""Server time of the pages (issue 15, point 8): ``python -m bench.pages_bench``.

A fresh SQLite database in a temporary folder (the embedded default): a signed-in owner's
editor of a 2,000-entry world book in use (first page: 50 rows; entries of several lengths, some
long or multi-topic, most never used, so the rows carry warnings; 12 canon entries for the canon
meter), the library's first page (40 public books, 20 cards) and a public book's page. Each page
is rendered ``--rounds`` times through Django's full request stack in process (middleware, view,
template; no network); prints p50/p95 in ms, the HTML size and the SQL queries per page.
Target: p50 ≤ 150 ms.

``--browser``: the editor in Debian's Chromium (Playwright, as the browser tests), served by a
threaded WSGI server in this process: first contentful paint and DOMContentLoaded of the editor,
the time from a click on "move to the top" to the reloaded list, and an htmx refresh of the list
(what the indexing poll does), each over ``--browser-rounds``.

``--compare DIR``: the same bench (this file, same data) run alternately against the checkout in
DIR (e.g. ``/work/main``) and this one, ``--pairs`` times each, then the medians of both and their
ratio: the machine is shared and noisy, so before/after come from the same run, interleaved.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _percentiles(times: list[float]) -> dict[str, float]:
    times = sorted(times)
    return {"p50_ms": round(statistics.median(times), 1),
            "p95_ms": round(times[max(0, int(len(times) * 0.95) - 1)], 1)}


def _lore(i: int) -> str:
    """Entries of a real world book: mostly a paragraph, some long (W-11 long_entry), some multi-topic."""
    base = f"Place {i} trades salt and iron with its neighbours every spring. "
    if i % 40 == 7:
        return base * 80  # ~1,100 tokens: longer than an injected entry is trimmed to
    if i % 25 == 3:
        return f"# Place {i}\n{base * 3}\n\n# Its river\n{base * 3}"
    return base * (2 + i % 6)


def _seed(entries: int) -> dict[str, Any]:
    from books.models import Book, Entry, IndexingState, Visibility, content_hash
    from lore_platform.tenancy.services import tenant_create
    from sharing.models import BookShare

    created = tenant_create(name="Bench", admin_email="bench@bench.test", profile="smart")
    tenant, owner = created.tenant, created.admin
    big = Book.objects.create(tenant=tenant, owner=owner, profile="smart", title="Big world", language="en")
    rows = []
    for i in range(entries):
        title, content = f"Place {i}", _lore(i)
        rows.append(Entry(tenant=tenant, book=big, title=title, content=content, position=i, constant=i < 12,
                          usage_count=(i % 7) if i % 3 == 0 else 0, indexing_state=IndexingState.INDEXED,
                          keys=[f"place {i}", f"p{i}"], content_hash=content_hash(title, content, [])))
    Entry.objects.for_tenant(tenant).bulk_create(rows, batch_size=500)
    for n in range(40):
        book = Book.objects.create(tenant=tenant, owner=owner, profile="smart", title=f"Public {n}",
                                   description="A shared world.", tags=["bench", f"t{n % 5}"],
                                   visibility=Visibility.PUBLIC, language="en")
        Entry.objects.for_tenant(tenant).bulk_create(
            [Entry(tenant=tenant, book=book, title=f"E{j}", content="Lore of a shared world, long enough.",
                   position=j, constant=j == 0) for j in range(12)]
        )
        BookShare.objects.create(tenant=tenant, book=book)
    public = Book.objects.for_tenant(tenant).filter(visibility=Visibility.PUBLIC).order_by("id").first()
    assert public is not None
    return {"owner": owner, "big": big, "public": public}


def _server_times(client: Any, pages: dict[str, str], rounds: int) -> list[dict[str, Any]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    out = []
    for name, path in pages.items():
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            client.get(path)
            times.append((time.perf_counter() - start) * 1000)
        with CaptureQueriesContext(connection) as queries:
            body = client.get(path).content
        out.append({"page": name, "path": path, "rounds": rounds, **_percentiles(times),
                    "html_kb": round(len(body) / 1024, 1), "queries": len(queries), "target_p50_ms": 150})
    return out


def _browser_times(client: Any, path: str, rounds: int) -> dict[str, Any]:
    """The editor in Chromium: paint, a reorder click, an htmx refresh of the list."""
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadedWSGIServer(("127.0.0.1", 0), Quiet)
    server.set_app(WSGIHandler())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's loop runs in this thread; the ORM in the server's
    from playwright.sync_api import sync_playwright

    paint: list[float] = []
    loaded: list[float] = []
    move: list[float] = []
    refresh: list[float] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": base}])
        page = context.new_page()
        page.goto(base + path)  # warm: the server's first render, the browser's cache of css/js
        for _ in range(rounds):
            page.goto(base + path, wait_until="load")
            timing = page.evaluate(
                "() => { const n = performance.getEntriesByType('navigation')[0];"
                " const p = performance.getEntriesByName('first-contentful-paint')[0];"
                " return {fcp: p ? p.startTime : null, dcl: n.domContentLoadedEventEnd}; }")
            paint.append(timing["fcp"] if timing["fcp"] is not None else float("nan"))
            loaded.append(timing["dcl"])
            start = time.perf_counter()
            with page.expect_navigation(wait_until="load"):
                page.locator("tr[data-entry]").last.locator("button[value=top]").click()
            move.append((time.perf_counter() - start) * 1000)
            refresh.append(page.evaluate(
                """() => new Promise(resolve => {
                    const t0 = performance.now();
                    document.body.addEventListener('htmx:afterSettle', () => resolve(performance.now() - t0), {once: true});
                    htmx.ajax('GET', location.pathname + '?part=entries', {target: '#entries', swap: 'innerHTML'});
                })"""))
        browser.close()
    server.shutdown()
    return {"page": "editor_2000_browser", "path": path, "rounds": rounds,
            "first_contentful_paint_ms": _percentiles(paint), "dom_content_loaded_ms": _percentiles(loaded),
            "move_to_top_click_to_loaded_ms": _percentiles(move), "htmx_list_refresh_ms": _percentiles(refresh)}


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    data_dir = tempfile.mkdtemp(prefix="lw-pages-bench-")
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ["LOREWEAVE_DATA_DIR"] = data_dir
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.test import Client

    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
    seeded = _seed(args.entries)
    client = Client()
    client.force_login(seeded["owner"])
    pages = {"editor_2000": f"/books/{seeded['big'].pk}", "library_first_page": "/library",
             "book_page": f"/library/{seeded['public'].pk}"}
    results = _server_times(client, pages, args.rounds)
    if args.browser:
        results.append(_browser_times(client, pages["editor_2000"], args.browser_rounds))
    return results


def _p50(value: Any) -> float:
    """A figure's median: the browser figures are {p50_ms, p95_ms}, the server ones a number."""
    return float(value["p50_ms"] if isinstance(value, dict) else value)


def compare(args: argparse.Namespace) -> int:
    """This bench, alternately on DIR's code and this checkout's, then medians and ratios."""
    other = Path(args.compare).resolve()
    mine = HERE.parents[1]
    runs: dict[str, list[list[dict[str, Any]]]] = {"before": [], "after": []}
    command = [sys.executable, str(HERE), "--rounds", str(args.rounds), "--entries", str(args.entries),
               "--browser-rounds", str(args.browser_rounds)] + (["--browser"] if args.browser else [])
    for pair in range(args.pairs):
        for label, checkout in (("before", other), ("after", mine)):
            env = {**os.environ, "PYTHONPATH": str(checkout)}
            done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, check=True)
            rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
            runs[label].append(rows)
            for row in rows:
                print(json.dumps({"pair": pair + 1, "code": label, "checkout": str(checkout), **row}))
    for index, row in enumerate(runs["after"][0]):
        keys = [k for k in row if k.endswith("_ms") and k != "target_p50_ms"]
        summary: dict[str, Any] = {"summary": row["page"]}
        for key in keys:
            before = statistics.median(_p50(r[index][key]) for r in runs["before"])
            after = statistics.median(_p50(r[index][key]) for r in runs["after"])
            summary[key] = {"before": round(before, 1), "after": round(after, 1),
                            "after_over_before": round(after / before, 2) if before else None}
        summary["queries"] = {"before": runs["before"][0][index].get("queries"), "after": row.get("queries")}
        print(json.dumps(summary))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--browser", action="store_true", help="also time the editor in Chromium")
    parser.add_argument("--browser-rounds", type=int, default=8)
    parser.add_argument("--compare", metavar="DIR", help="another checkout to run alternately (before/after)")
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    if args.compare:
        return compare(args)
    for row in run(args):
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
