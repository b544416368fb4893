"""Server time of the pages (issue 15, point 8): ``python -m bench.pages_bench``.

A fresh SQLite database in a temporary folder (the embedded default): a signed-in owner's
editor of a 2,000-entry world book (first page: 100 rows, warnings, canon meter), the library's
first page (40 public books, 20 cards) and a public book's page. Each page is rendered
``--rounds`` times through Django's full request stack in process (middleware, view, template;
no network); prints p50/p95 in ms, the HTML size and the SQL queries per page. Target: p50 ≤ 150 ms.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--entries", type=int, default=2000)
    args = parser.parse_args()

    data_dir = tempfile.mkdtemp(prefix="lw-pages-bench-")
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ["LOREWEAVE_DATA_DIR"] = data_dir
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lore_platform.settings")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
    from books.models import Book, Entry, IndexingState, Visibility, content_hash
    from lore_platform.tenancy.services import tenant_create
    from sharing.models import BookShare

    created = tenant_create(name="Bench", admin_email="bench@bench.test", profile="smart")
    tenant, owner = created.tenant, created.admin
    big = Book.objects.create(tenant=tenant, owner=owner, profile="smart", title="Big world", language="en")
    rows = []
    for i in range(args.entries):
        title, content = f"Place {i}", f"Place {i} trades salt and iron with its neighbours every spring. " * 4
        rows.append(Entry(tenant=tenant, book=big, title=title, content=content, position=i, constant=i < 12,
                          usage_count=i % 7, indexing_state=IndexingState.INDEXED,
                          content_hash=content_hash(title, content, [])))
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

    client = Client()
    client.force_login(owner)
    public = Book.objects.for_tenant(tenant).filter(visibility=Visibility.PUBLIC).order_by("id").first()
    pages = {"editor_2000": f"/books/{big.pk}", "library_first_page": "/library", "book_page": f"/library/{public.pk}"}
    for name, path in pages.items():
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)
        times = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            client.get(path)
            times.append((time.perf_counter() - start) * 1000)
        with CaptureQueriesContext(connection) as queries:
            body = client.get(path).content
        times.sort()
        print(json.dumps({
            "page": name, "path": path, "rounds": args.rounds,
            "p50_ms": round(statistics.median(times), 1), "p95_ms": round(times[int(len(times) * 0.95) - 1], 1),
            "html_kb": round(len(body) / 1024, 1), "queries": len(queries), "target_p50_ms": 150,
        }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
