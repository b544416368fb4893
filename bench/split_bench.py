"""How well the deterministic splitter recovers real entries: ``python -m bench.split_bench``.

Real books of ``shared/corpus`` (SillyTavern world info, every file the
readers accept) are turned back into notes: their titled entries (title 2–100
characters, lore 20–20,000: what a world book holds, W-12) concatenated in
notes of at most 40,000 characters (A-2), in three layouts:

- ``markdown``: ``## Title`` then the lore;
- ``plain``: the title alone on a line, then the lore, a blank line between;
- ``named``: one ``Title: lore`` line each (the lore's line breaks folded).

Each note is split (``jobs.splitter.split_text``) and an
original entry counts as recovered when exactly one split entry has its title
(compared casefolded, whitespace collapsed) and it holds the entry's lore.
Prints one JSON line per layout and the target (≥ 90% with headings).
Options: ``--corpus PATH`` (default ``../shared/corpus`` or ``$LOREWEAVE_SHARED/corpus``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from jobs.splitter import split_text

REPO = Path(__file__).resolve().parents[1]
NOTES_MAX = 40_000
LAYOUTS = ("markdown", "plain", "named")
TARGET = 0.90


@dataclass(frozen=True, kw_only=True)
class Original:
    book: str
    title: str
    content: str


def default_corpus() -> Path:
    shared = os.environ.get("LOREWEAVE_SHARED")
    return Path(shared) / "corpus" if shared else REPO.parent / "shared" / "corpus"


def key(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def corpus_books(corpus: Path, folders: Iterable[str] = ("st-worldinfo",)) -> dict[str, list[Original]]:
    """Titled, W-12-sized entries of each readable real book (fixtures left out: they are not real books)."""
    from books.formats import read_book

    books: dict[str, list[Original]] = {}
    for folder in folders:
        for path in sorted((corpus / folder).glob("*")):
            if path.name.startswith("fixture_"):
                continue
            try:
                book = read_book(path.read_bytes(), filename=path.name)
            except Exception:  # noqa: BLE001 - unreadable files are the importer's business, not this bench's
                continue
            seen: set[str] = set()
            entries = []
            for entry in book.entries:
                title, content = entry.title.strip(), entry.content.strip()
                if not 2 <= len(title) <= 100 or not 20 <= len(content) <= 20_000 or key(title) in seen:
                    continue
                seen.add(key(title))
                entries.append(Original(book=path.name, title=title, content=content))
            if len(entries) >= 2:
                books[path.name] = entries
    return books


def render(entry: Original, layout: str) -> str:
    if layout == "markdown":
        return f"## {entry.title}\n\n{entry.content}\n"
    if layout == "plain":
        return f"{entry.title}\n{entry.content}\n"
    return f"{entry.title}: {' '.join(entry.content.split())}"


def notes_of(entries: list[Original], layout: str) -> list[tuple[str, list[Original]]]:
    """The entries as notes of at most 40,000 characters each (an entry never straddles two)."""
    out: list[tuple[str, list[Original]]] = []
    parts: list[str] = []
    held: list[Original] = []
    sep = "\n" if layout == "named" else "\n\n"
    for entry in entries:
        text = render(entry, layout)
        if len(text) > NOTES_MAX:
            continue
        if parts and len(sep.join([*parts, text])) > NOTES_MAX:
            out.append((sep.join(parts), held))
            parts, held = [], []
        parts.append(text)
        held.append(entry)
    if parts:
        out.append((sep.join(parts), held))
    return out


def recovered(notes: str, originals: list[Original]) -> int:
    split = split_text(notes)
    by_title: dict[str, list[str]] = {}
    for entry in split:
        by_title.setdefault(key(entry.title), []).append(key(entry.content))
    count = 0
    for original in originals:
        found = by_title.get(key(original.title), [])
        lore = key(original.content)
        if len(found) == 1 and (found[0] == lore or lore in found[0]):
            count += 1
    return count


def measure(books: dict[str, list[Original]], layout: str) -> dict[str, object]:
    total = hit = 0
    per_book: dict[str, float] = {}
    for name, entries in books.items():
        book_total = book_hit = 0
        for notes, held in notes_of(entries, layout):
            book_total += len(held)
            book_hit += recovered(notes, held)
        total += book_total
        hit += book_hit
        per_book[name] = round(book_hit / book_total, 3) if book_total else 0.0
    return {
        "layout": layout,
        "books": len(books),
        "entries": total,
        "recovered": hit,
        "recovery": round(hit / total, 4) if total else 0.0,
        "per_book": per_book,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=default_corpus())
    args = parser.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"split_bench: no corpus at {args.corpus} (set LOREWEAVE_SHARED)", file=sys.stderr)
        return 2
    books = corpus_books(args.corpus)
    results = [measure(books, layout) for layout in LAYOUTS]
    for result in results:
        print(json.dumps(result, ensure_ascii=False))
    headed = next(r for r in results if r["layout"] == "markdown")
    ok = float(headed["recovery"]) >= TARGET  # type: ignore[arg-type]
    print(json.dumps({"target": TARGET, "with_headings": headed["recovery"], "met": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    raise SystemExit(main())
