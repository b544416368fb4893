"""Library search by meaning, measured on judged queries over the corpus books (issue 28, point 3).

    python -m bench.library_search [--corpus PATH] [--judged bench/library_search_judged.json] [--json]

Builds a scratch database (SQLite, or PostgreSQL's test database when DATABASE_URL names one), publishes
every corpus book that imports with at least one entry (title, description and entries as imported),
embeds each with the configured model (the same vector text the library uses), then asks every judged
query two ways:

- ``before``: the old ranking, plain cosine similarity of the query with each book's vector, nearest
  first, no floor (what ``library_search(mode="meaning")`` returned before issue 28; kept here only);
- ``after``: ``library_search(mode="meaning")`` as it is now (relevance floor + reciprocal-rank fusion).

Prints precision@5 (relevant books in the first five / 5), the same over min(5, relevant books) (what
a perfect ranking scores 1.0 on), and for the queries that should find nothing, how many books came back.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

HERE = Path(__file__).resolve().parent
DEFAULT_JUDGED = HERE / "library_search_judged.json"
DEFAULT_CORPUS = HERE.parent.parent / "shared" / "corpus"
CUT = 5


def _publish_corpus(corpus: Path) -> dict[str, int]:
    """Every importable corpus book with entries, public in one tenant: {corpus path: book id}."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from books.imports import import_read
    from books.models import Book, Entry, Visibility
    from lore_platform.tenancy.models import Tenant
    from sharing import services as sharing_services

    tenant = Tenant.objects.create(name="Bench", slug="bench-library-search")
    owner = get_user_model().objects.create(username="bench", email="bench@loreweave.local")
    books: dict[str, int] = {}
    for path in sorted(p for p in corpus.glob("*/*") if p.suffix != ".md"):
        try:
            imported = import_read(path.read_bytes(), filename=path.name)
        except Exception:  # noqa: BLE001 - malformed files are part of the corpus; the library never sees them
            continue
        if not imported.entries:
            continue
        book = Book.objects.create(tenant=tenant, owner=owner, title=imported.name[:120],
                                   description=imported.description or "", visibility=Visibility.PUBLIC,
                                   language="en")
        Entry.objects.bulk_create([
            Entry(tenant=tenant, book=book, title=(e.title or "")[:200], content=e.content or "", position=i)
            for i, e in enumerate(imported.entries)
        ])
        share = sharing_services._share_get_or_create(book)
        share.published_at = timezone.now()
        share.save(update_fields=["published_at"])
        sharing_services._search_document_write(book, share)
        sharing_services.book_vector_refresh_run(tenant=tenant, book_id=book.pk)
        books[str(path.relative_to(corpus))] = book.pk
    return books


def _before(q: str) -> list[int]:
    """The old ranking: every book by cosine similarity, nearest first (no floor, no text)."""
    from retrieval.adapter.embedders import embedder_get
    from sharing.models import BookVector
    from sharing.selectors import _nearest_in_process

    embedder = embedder_get()
    [query] = embedder.embed_queries([q])
    vectors = BookVector.objects.unscoped().filter(model_name=embedder.name)
    return [book_id for book_id, _ in _nearest_in_process(vectors, query)]


def _after(q: str) -> list[int]:
    from sharing.selectors import library_search

    return [book.pk for book in library_search(q=q, mode="meaning")]


def _score(ranked: list[int], relevant: set[int]) -> dict[str, float]:
    top = ranked[:CUT]
    hits = len([b for b in top if b in relevant])
    return {"p_at_5": hits / CUT, "p_at_5_reachable": hits / min(CUT, len(relevant)) if relevant else 0.0}


def run(corpus: Path, judged_path: Path) -> dict[str, Any]:
    judged = json.loads(judged_path.read_text(encoding="utf-8"))
    ids = _publish_corpus(corpus)
    names = {pk: path for path, pk in ids.items()}
    rows = []
    for item in judged["queries"]:
        relevant = {ids[p] for p in item["relevant"] if p in ids}
        row: dict[str, Any] = {"q": item["q"], "none": bool(item.get("none")), "relevant": len(relevant)}
        for label, ranker in (("before", _before), ("after", _after)):
            ranked = ranker(item["q"])
            row[label] = {**_score(ranked, relevant), "returned": len(ranked),
                          "top": [names.get(b, str(b)) for b in ranked[:CUT]]}
        rows.append(row)
    judged_rows = [r for r in rows if not r["none"]]
    summary: dict[str, Any] = {"books": len(ids), "queries": len(judged_rows), "none_queries": len(rows) - len(judged_rows)}
    for label in ("before", "after"):
        summary[label] = {
            "precision_at_5": round(sum(r[label]["p_at_5"] for r in judged_rows) / len(judged_rows), 3),
            "precision_at_5_reachable": round(
                sum(r[label]["p_at_5_reachable"] for r in judged_rows) / len(judged_rows), 3),
            "returned_for_none_queries": [r[label]["returned"] for r in rows if r["none"]],
        }
    return {"summary": summary, "queries": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path(os.environ.get("LOREWEAVE_SHARED", DEFAULT_CORPUS.parent)) / "corpus")
    parser.add_argument("--judged", type=Path, default=DEFAULT_JUDGED)
    parser.add_argument("--json", action="store_true", help="print the whole report as JSON")
    args = parser.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"no corpus at {args.corpus}: set LOREWEAVE_SHARED or pass --corpus", file=sys.stderr)
        return 2

    import django

    django.setup()
    from django.db import connection

    test_settings = connection.settings_dict.setdefault("TEST", {})
    if connection.vendor == "postgresql":
        test_settings["NAME"] = f"loreweave_bench_search_{os.getpid()}"
    original = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=False, serialize=False)
    try:
        report = run(args.corpus, args.judged)
    finally:
        connection.creation.destroy_test_db(original, verbosity=0)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    s = report["summary"]
    print(f"{s['books']} corpus books, {s['queries']} judged queries, {s['none_queries']} that should find nothing")
    print(f"{'':8} {'P@5':>6} {'P@5 (of reachable)':>20}  books returned for nothing-queries")
    for label in ("before", "after"):
        r = s[label]
        print(f"{label:8} {r['precision_at_5']:>6.3f} {r['precision_at_5_reachable']:>20.3f}  {r['returned_for_none_queries']}")
    print()
    for row in report["queries"]:
        b, a = row["before"], row["after"]
        print(f"- {row['q']!r}: before P@5 {b['p_at_5']:.2f} ({b['returned']} returned), "
              f"after P@5 {a['p_at_5']:.2f} ({a['returned']} returned): {a['top'][:3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
