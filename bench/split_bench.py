"""How well the deterministic splitter recovers real entries: ``python -m bench.split_bench``.

Real books of ``shared/corpus`` (SillyTavern world info, every file the
readers accept) are turned back into notes: their titled entries (title 2–100
characters, lore 20–20,000: what a world book holds, W-12) concatenated in
notes of at most 40,000 characters (A-2), in six layouts:

- ``markdown``: ``## Title`` then the lore;
- ``plain``: the title alone on a line, then the lore, a blank line between;
- ``named``: one ``Title: lore`` line each (the lore's line breaks folded);
- ``bold``: ``**Title**`` alone on a line, a blank line, then the lore;
- ``bold_underscore``: ``__Title__`` alone on a line, then the lore;
- ``title_line``: a ``Title: <name>`` line, then the lore.

Each note is split (``jobs.splitter.split_text``). Per original entry:
*title* — exactly one split entry has its title (compared casefolded,
whitespace collapsed); *content* — exactly one split entry holds its lore and
that one holds no other entry's lore (it is in the right entry, whatever its
title); *recovered* — both, in the same entry. Every layout is measured on all
books and again on ``cjk_headed``: the books in a script without spaces whose
lore holds its own Markdown headings or bold lines (the hardest notes: the
lore's headings look like the notes' own).

Then the grounding check (``jobs.grounding``, issue 33): each book's own entries
against its notes (the share flagged is the false alarms), the same lore with
every sixth word left out, and an unrelated book's entries (the share flagged
is what the check catches of lore that is not in the notes).

``--before REV`` measures the splitter of that git revision in the same run
(``before`` rows), so a change to the splitter shows its own effect.
Prints one JSON line per layout and set, and the target (≥ 90% with headings).
Options: ``--corpus PATH`` (default ``../shared/corpus`` or ``$LOREWEAVE_SHARED/corpus``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from jobs.splitter import SplitEntry, split_text

REPO = Path(__file__).resolve().parents[1]
NOTES_MAX = 40_000
LAYOUTS = ("markdown", "plain", "named", "bold", "bold_underscore", "title_line")
Splitter = Callable[[str], Sequence[SplitEntry]]
# Scripts written without spaces (Han, kana, Hangul) and the lore's own headings or bold lines.
_NO_SPACE = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_OWN_HEADING = re.compile(r"^(#{1,6}[ \t]+\S|\*\*[^*\n]+\*\*[ \t]*[:：]?[ \t]*$)", re.MULTILINE)
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
    if layout == "bold":
        return f"**{entry.title}**\n\n{entry.content}\n"
    if layout == "bold_underscore":
        return f"__{entry.title}__\n{entry.content}\n"
    if layout == "title_line":
        return f"Title: {entry.title}\n{entry.content}\n"
    return f"{entry.title}: {' '.join(entry.content.split())}"


def cjk_headed(books: dict[str, list[Original]]) -> dict[str, list[Original]]:
    """The books in a script without spaces whose lore holds its own headings or bold lines."""
    out = {}
    for name, entries in books.items():
        text = "\n".join(e.content for e in entries)
        if len(_NO_SPACE.findall(text)) > len(text) // 4 and sum(bool(_OWN_HEADING.search(e.content))
                                                                 for e in entries) * 4 >= len(entries):
            out[name] = entries
    return out


def splitter_at(rev: str) -> Splitter:
    """``split_text`` of ``jobs/splitter.py`` as it was at git revision ``rev`` (to compare in one run)."""
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:jobs/splitter.py"], check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType(f"splitter_{rev}")
    module.__dict__["__name__"] = module.__name__
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{rev}:jobs/splitter.py", "exec"), module.__dict__)  # noqa: S102 - our own file
    return module.split_text  # type: ignore[no-any-return]


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


def scored(notes: str, originals: list[Original], split: Splitter = split_text) -> tuple[int, int, int]:
    """(titles matched, content in the right entry, both in the same entry) for one note."""
    found = [(key(e.title), key(e.content)) for e in split(notes)]
    by_title: dict[str, list[str]] = {}
    for title, text in found:
        by_title.setdefault(title, []).append(text)
    lores = [key(o.content) for o in originals]
    titles = content = both = 0
    for n, original in enumerate(originals):
        lore = lores[n]
        named = by_title.get(key(original.title), [])
        titles += len(named) == 1
        holders = [c for _, c in found if lore in c]
        alone = len(holders) == 1 and not any(other in holders[0] for m, other in enumerate(lores)
                                              if m != n and other not in lore)
        content += alone
        both += len(named) == 1 and lore in named[0]
    return titles, content, both


def recovered(notes: str, originals: list[Original], split: Splitter = split_text) -> int:
    return scored(notes, originals, split)[2]


def measure(books: dict[str, list[Original]], layout: str, split: Splitter = split_text) -> dict[str, object]:
    total = hit = titles = content = 0
    per_book: dict[str, float] = {}
    for name, entries in books.items():
        book_total = book_hit = 0
        for notes, held in notes_of(entries, layout):
            t, c, b = scored(notes, held, split)
            book_total += len(held)
            book_hit += b
            titles += t
            content += c
        total += book_total
        hit += book_hit
        per_book[name] = round(book_hit / book_total, 3) if book_total else 0.0
    return {
        "layout": layout,
        "books": len(books),
        "entries": total,
        "recovered": hit,
        "recovery": round(hit / total, 4) if total else 0.0,
        "titles": round(titles / total, 4) if total else 0.0,
        "content": round(content / total, 4) if total else 0.0,
        "per_book": per_book,
    }


def _cjk(entries: list[Original]) -> bool:
    text = "\n".join(e.content for e in entries)
    return len(_NO_SPACE.findall(text)) > len(text) // 4


def _edited(text: str) -> str:
    """The lore with every sixth word (CJK: character) left out: a heavy light edit of the writer's wording."""
    if _NO_SPACE.search(text):
        return "".join(ch for n, ch in enumerate(text) if n % 6 != 5)
    return " ".join(w for n, w in enumerate(text.split(" ")) if n % 6 != 5)


def grounding_measure(books: dict[str, list[Original]]) -> dict[str, object]:
    """The grounding check (``jobs.grounding``) on the markdown notes of each book: its own entries
    (should pass), the same with every sixth word left out (should pass) and the entries of an unrelated
    book in the same kind of script (invented as far as these notes know: should be flagged)."""
    from jobs import grounding

    names = sorted(books)
    shares: dict[str, list[float]] = {"own": [], "edited": [], "foreign": []}
    for n, name in enumerate(names):
        mine = {key(e.title) for e in books[name]}
        others = [o for o in names[n + 1:] + names[:n]
                  if _cjk(books[o]) == _cjk(books[name]) and not mine & {key(e.title) for e in books[o]}
                  and o.split("_")[:2] != name.split("_")[:2]]  # versions of one book share their lore
        for notes, held in notes_of(books[name], "markdown"):
            source = grounding.Source.of(notes)
            for entry in held:
                shares["own"].append(grounding.grounding(entry.content, source).share)
                shares["edited"].append(grounding.grounding(_edited(entry.content), source).share)
            if others:
                for entry in books[others[0]][: len(held)]:
                    shares["foreign"].append(grounding.grounding(entry.content, source).share)
    out: dict[str, object] = {"check": "grounding", "threshold": grounding.GROUNDED_MIN}
    for kind, values in shares.items():
        values.sort()
        out[kind] = {"entries": len(values), "flagged": round(sum(v < grounding.GROUNDED_MIN for v in values)
                                                              / max(1, len(values)), 4),
                     "median_share": values[len(values) // 2] if values else None,
                     "p10_share": values[len(values) // 10] if values else None,
                     "p90_share": values[len(values) * 9 // 10] if values else None}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=default_corpus())
    parser.add_argument("--before", metavar="REV", help="also measure the splitter of this git revision")
    parser.add_argument("--per-book", action="store_true", help="print each book's recovery too")
    args = parser.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"split_bench: no corpus at {args.corpus} (set LOREWEAVE_SHARED)", file=sys.stderr)
        return 2
    books = corpus_books(args.corpus)
    sets = {"all": books, "cjk_headed": cjk_headed(books)}
    splitters: list[tuple[str, Splitter]] = [("now", split_text)]
    if args.before:
        splitters.insert(0, (f"before ({args.before})", splitter_at(args.before)))
    results = []
    for layout in LAYOUTS:
        for set_name, chosen in sets.items():
            for which, split in splitters:
                result = {"set": set_name, "splitter": which, **measure(chosen, layout, split)}
                if not args.per_book:
                    result.pop("per_book")
                results.append(result)
                print(json.dumps(result, ensure_ascii=False))
    print(json.dumps(grounding_measure(books), ensure_ascii=False))
    headed = next(r for r in results if r["layout"] == "markdown" and r["set"] == "all" and r["splitter"] == "now")
    ok = float(headed["recovery"]) >= TARGET  # type: ignore[arg-type]
    print(json.dumps({"target": TARGET, "with_headings": headed["recovery"], "met": ok,
                      "cjk_headed_books": sorted(sets["cjk_headed"])}, ensure_ascii=False))
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    raise SystemExit(main())
