"""Turn cost against book size: ``python -m bench.book_size_bench [--sizes 200,2000,20000] [--turns N]``.

One classic book (recursion on, scan depth 10, 2,000-token budget) of each size,
a rolling 20-message chat (two new messages a turn, as partner apps send it),
the compact log a context call asks for by default. Two generators:

* ``shared``: realistic key sharing. Each entry has its own name and aliases
  (unique, as real lore names are), and two in five also carry a common key
  (a place, a people, a trade) that about four entries share at every size;
  contents name other entries now and then. The chat names entries from the
  whole book. What a turn activates stays about the same as the book grows:
  the target is judged here.
* ``dense``: the scheme ``bench/context_load.py`` uses for its books, grown
  to 20,000 entries (the issue's figure): keys drawn from 19,200 word+number
  names, so at 20,000 entries each key is shared by about five entries, and
  every content names about two keys. With recursion on, three passes reach
  most of the book: the *output* grows ~135x from 2,000 to 20,000 entries
  (130 activated entries to 17,500). Reported with its activations, so the
  engine's growth (work per activated entry) is told apart from the output's.

``--profile sillytavern`` runs the same books as SillyTavern entries through
the sillytavern profile (its log lists every entry; its scan stops at the
first budget overflow, so floods stop there).

Each line is one JSON object:

* ``size``: per generator and size: compile ms; rolling-turn wall and CPU
  p50; activated (injected + over budget), injected, log rows; ``work``: the
  engine's executed Python lines in one more, traced, rolling turn
  (:func:`bench.honest.engine_lines`: deterministic, the same on a loaded
  machine), with that turn's activated and touched entries (touched: every
  record the turn wrote, which a compact log lists);
* ``targets``: the 20,000-entry rolling turn within 10x the 2,000-entry one on
  ``shared`` (met/missed); on both generators the output's growth (activated
  entries) beside the turn's, and the engine's own growth: work per activated
  entry at the largest size within 1.5x of the 2,000-entry one (met/missed).

``--shared-token-memo`` counts tokens as before issue 29 (through the
tokenizer's memo, shared by every book and bounded at 2 MB, which a flooded
20,000-entry book overflowed on every turn), the rest of the engine as now.
Figures of the engine before issue 29 come from running this file against
that commit (see the report in the issue).
"""
from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from retrieval.engine import classic
from retrieval.engine.keyword import (
    CompiledBookSet,
    book_set_compile,
    compile_cache_clear,
)
from retrieval.engine.sillytavern.entries import book_from_st_json
from retrieval.engine.sillytavern.turn import sillytavern_assemble
from retrieval.engine.tokenizers import Tokenizer, tokenizer_by_name
from retrieval.engine.values import (
    Book,
    BookSettings,
    Entry,
    Message,
    Names,
    Outcome,
    Selection,
    TurnRequest,
)

from .honest import engine_lines, load_average

SIZES = (200, 2_000, 20_000)
WINDOW = 20  # messages a partner app sends
SCAN_DEPTH = 10
TARGET_RATIO = 10.0  # the 20,000-entry turn within this many times the 2,000-entry one
WORK_GROWTH = 1.5  # work per activated entry may grow this much from 2,000 entries to the largest size

_SYLLABLES = (
    "ka", "lo", "mi", "ra", "to", "ne", "su", "va", "de", "ri", "po", "lu", "ga", "fe", "zo", "bri", "tan",
    "mor", "sel", "dun", "cas", "ver", "nal", "quo", "thi", "ar", "en", "ul", "os", "ix",
)
_FILLER = ["the", "a", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by", "at", "from", "his", "her", "it", "this", "which", "an", "be", "are", "were", "had", "old", "river", "north", "stone", "long", "winter", "city", "road", "market", "tower", "night", "gate", "hill", "sea", "iron", "salt", "lord", "house"]


@dataclass(frozen=True)
class Generated:
    book: Book
    chat_keys: tuple[str, ...]  # keys the chat may name


def _name(rng: random.Random, taken: set[str]) -> str:
    """A proper name nobody else in the book has (rejection: 837,000 syllable words to choose from)."""
    while True:
        name = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))).capitalize()
        if name not in taken:
            taken.add(name)
            return name


def shared_book(size: int, seed: int = 7) -> Generated:
    """Key sharing as in the shared corpus's real world books, at any size.

    There (SillyTavern books of 100 entries): 2-3 keys an entry, about one distinct key in ten
    held by more than one entry (at most 5-11 entries), contents naming several other entries.
    Here: a unique name and 0-2 unique aliases per entry; two in five entries also carry a common
    key (a place, a people, a trade) held by about four entries whatever the book's size; each
    content names 1-4 other entries. What a turn activates is then set by those habits (how many
    entries each activated entry names, three recursion passes), not by the book's size.
    """
    rng = random.Random(seed)
    taken: set[str] = set()
    names = [_name(rng, taken) for _ in range(size)]
    common = [f"{_name(rng, taken).lower()} {rng.choice(('guild', 'folk', 'road', 'coast', 'order'))}"
              for _ in range(max(4, size // 10))]
    entries = []
    chat_keys: list[str] = []
    for number, name in enumerate(names):
        keys = [name] + [_name(rng, taken) for _ in range(rng.randint(0, 2))]
        if rng.random() < 0.4:
            keys.append(rng.choice(common))
        chat_keys.extend(keys)
        words = [rng.choice(_FILLER) for _ in range(rng.randint(40, 90))]
        for _ in range(rng.randint(1, 4)):  # other entries named in the content
            words.insert(rng.randrange(len(words)), rng.choice(names))
        if rng.random() < 0.2:
            words.insert(rng.randrange(len(words)), rng.choice(common))
        entries.append(Entry(id=f"e{number}", title=name, content=f"{name}: " + " ".join(words) + ".",
                             keys=tuple(keys), order=rng.randint(0, 200), priority=rng.randint(0, 20)))
    return Generated(_book(entries, "shared"), tuple(chat_keys))


_CONTEXT_LOAD_WORDS = ["amber", "bastion", "cinder", "dagger", "ember", "falcon", "garnet", "harbor", "ivory", "jasper", "kestrel", "lantern", "meadow", "nimbus", "onyx", "pyre", "quarry", "raven", "sable", "thistle", "umber", "vessel", "willow", "xenon", "yarrow", "zephyr", "anchor", "briar", "cobalt", "drift", "echo", "fable", "grove", "hollow", "iron", "jade", "knoll", "lumen", "marrow", "north", "ochre", "pine", "quill", "rune", "salt", "tide"]


def dense_book(size: int, seed: int = 7) -> Generated:
    """``bench/context_load.py``'s book scheme, one book of ``size`` entries."""
    rng = random.Random(seed)
    keys: list[str] = []
    entries = []
    for number in range(size):
        entry_keys = sorted({f"{rng.choice(_CONTEXT_LOAD_WORDS)}{rng.randint(1, 400)}" for _ in range(rng.randint(3, 6))})
        keys.extend(entry_keys)
        content = f"Harbour lore {number}: " + " ".join(
            rng.choice(keys) if rng.random() < 0.05 else "words" for _ in range(40)
        )
        entries.append(Entry(id=f"e{number}", title=f"Harbour {number}", content=content, keys=tuple(entry_keys),
                             order=rng.randint(0, 200), priority=rng.randint(0, 20)))
    return Generated(_book(entries, "dense"), tuple(keys[:400]))


def _book(entries: Sequence[Entry], generator: str) -> Book:
    # Compile caches key on (id, version): each generator and size is a book of its own.
    return Book(id=f"bench-{generator}", name="Bench", version=len(entries), entries=tuple(entries),
                settings=BookSettings(scan_depth=SCAN_DEPTH, token_budget=2_000, recursive=True))


GENERATORS: Mapping[str, Callable[[int], Generated]] = {"shared": shared_book, "dense": dense_book}


def rolling_chat(keys: Sequence[str], turns: int, seed: int = 3) -> list[list[Message]]:
    """``turns + 1`` windows of a chat: each the last 20 messages, two of them new; half name a key."""
    rng = random.Random(seed)

    def message(number: int) -> Message:
        words = [rng.choice(_FILLER) for _ in range(25)]
        if rng.random() < 0.5:
            words.insert(rng.randrange(len(words)), rng.choice(keys))
        return Message(role="user" if number % 2 else "assistant", text=" ".join(words) + f" ({number})")

    history = [message(n) for n in range(WINDOW)]
    windows = [list(history)]
    for turn in range(turns):
        history = [*history[2:], message(WINDOW + 2 * turn), message(WINDOW + 2 * turn + 1)]
        windows.append(list(history))
    return windows


def request(book: Book, chat: Sequence[Message], turn: int, profile: str = "classic") -> TurnRequest:
    return TurnRequest(profile=profile, books=(book,), chat=tuple(chat),  # type: ignore[arg-type]
                       names=Names(user="Ana", char="Kael"), seed="bench", turn=turn, log_full=False)


def as_world_info(book: Book) -> Book:
    """The same book with SillyTavern entry values (as the adapter gives the sillytavern profile)."""
    raw = [{"uid": number, "key": list(entry.keys), "keysecondary": list(entry.secondary_keys),
            "content": entry.content, "comment": entry.title, "order": entry.order, "position": 0,
            "probability": 100, "useProbability": True}
           for number, entry in enumerate(book.entries)]
    return replace(book, world_info=book_from_st_json(raw, world=book.id))


def assemble(req: TurnRequest, tokenizer: Tokenizer) -> Selection:
    if req.profile == "sillytavern":
        return sillytavern_assemble(req, tokenizer=tokenizer)
    return classic.classic_assemble(req, tokenizer=tokenizer)


ACTIVATED = {Outcome.INJECTED, Outcome.OVER_BUDGET}  # sillytavern logs only injected: its scan stops at the budget


def touched(selection: Selection) -> int:
    """Entries the turn wrote something for: every record a compact log lists."""
    return len(selection.request_log)


def activated(selection: Selection) -> int:
    return sum(1 for record in selection.request_log if record.outcome in ACTIVATED)


def _old_entry_tokens(
    compiled: CompiledBookSet, tokenizer: Tokenizer, rendered: Mapping[int, str], indices: Iterable[int]
) -> dict[int, int]:
    """The engine before issue 29: each activated entry counted through the tokenizer's shared memo."""
    return {index: tokenizer.count(rendered[index]) for index in indices}


def measure(generator: str, size: int, turns: int, tokenizer: Tokenizer, profile: str = "classic") -> dict[str, object]:
    generated = GENERATORS[generator](size)
    book = generated.book
    compile_cache_clear()
    gc.collect()
    started = time.perf_counter()
    if profile == "sillytavern":
        book = as_world_info(book)  # reading the entries is the sillytavern profile's compile, with the first turn's
    else:
        book_set_compile((book,), profile="classic")
    compile_ms = (time.perf_counter() - started) * 1000
    windows = rolling_chat(generated.chat_keys, turns + 1)
    assemble(request(book, windows[0], 0, profile), tokenizer)  # the chat so far (and the ST compile)
    wall: list[float] = []
    cpu: list[float] = []
    counts: list[tuple[int, int, int]] = []
    for turn, window in enumerate(windows[1:turns + 1], start=1):
        req = request(book, window, turn, profile)
        gc.collect()
        cpu_started = time.thread_time()
        started = time.perf_counter()
        selection = assemble(req, tokenizer)
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.thread_time() - cpu_started) * 1000)
        counts.append((activated(selection), len(selection.injections), touched(selection)))
    # One more rolling turn, traced: the engine's executed lines, the same on every run.
    last = request(book, windows[turns + 1], turns + 1, profile)
    selection, work = engine_lines(lambda: assemble(last, tokenizer))
    touched_now, activated_now = touched(selection), activated(selection)
    return {
        "bench": "size", "profile": profile, "generator": generator, "entries": size,
        "keys": sum(len(e.keys) for e in book.entries), "compile_ms": round(compile_ms, 1),
        "turn_p50_ms": round(statistics.median(wall), 3), "turn_cpu_p50_ms": round(statistics.median(cpu), 3),
        "activated": statistics.median(c[0] for c in counts), "injected": statistics.median(c[1] for c in counts),
        "log_rows": statistics.median(c[2] for c in counts),
        "us_per_activated": round(statistics.median(cpu) * 1000 / max(1.0, statistics.median(c[0] for c in counts)), 1),
        "work_lines": work, "work_activated": activated_now, "work_touched": touched_now,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--turns", type=int, default=15, help="timed rolling turns per size")
    parser.add_argument("--generators", default="shared,dense")
    parser.add_argument("--tokenizer", default="cl100k_base")
    parser.add_argument("--profile", choices=("classic", "sillytavern"), default="classic",
                        help="sillytavern: the same books as SillyTavern entries (its log lists every entry)")
    parser.add_argument("--shared-token-memo", action="store_true",
                        help="count tokens through the tokenizer's shared memo, as before issue 29")
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    tokenizer = tokenizer_by_name(args.tokenizer)
    tokenizer.count("warm up")
    if args.shared_token_memo:
        classic.entry_tokens = _old_entry_tokens  # type: ignore[attr-defined]
    print(json.dumps({"bench": "setup", "profile": args.profile, "sizes": sizes, "turns": args.turns, "window": WINDOW, "scan_depth": SCAN_DEPTH,
                      "log": "compact", "token_counts": "tokenizer's shared memo" if args.shared_token_memo else "per book set",
                      "load_average": load_average()}))
    results: dict[tuple[str, int], dict[str, object]] = {}
    for generator in args.generators.split(","):
        for size in sizes:
            line = measure(generator, size, max(1, args.turns), tokenizer, args.profile)
            results[generator, size] = line
            print(json.dumps(line), flush=True)
    targets: dict[str, object] = {"bench": "targets", "load_average": load_average()}
    base, top = 2_000, max(sizes)
    for generator in args.generators.split(","):
        if (generator, base) not in results or top <= base:
            continue
        small, big = results[generator, base], results[generator, top]
        time_ratio = float(big["turn_cpu_p50_ms"]) / max(1e-9, float(small["turn_cpu_p50_ms"]))  # type: ignore[arg-type]
        output_ratio = float(big["activated"]) / max(1.0, float(small["activated"]))  # type: ignore[arg-type]
        per_activated = [float(r["work_lines"]) / max(1.0, float(r["work_activated"]))  # type: ignore[arg-type]
                         for r in (small, big)]
        growth = per_activated[1] / per_activated[0]
        figures: dict[str, object] = {
            f"turn_ratio_{top}_over_{base}": round(time_ratio, 1),
            f"activated_ratio_{top}_over_{base}": round(output_ratio, 1),
            "work_per_activated": [round(v, 1) for v in per_activated],
            f"work_per_activated_growth_le_{WORK_GROWTH:g}x": f"{growth:.2f} " + ("met" if growth <= WORK_GROWTH else "missed"),
        }
        if generator == "shared":
            figures[f"turn_ratio_le_{TARGET_RATIO:g}x"] = "met" if time_ratio <= TARGET_RATIO else "missed"
        targets[generator] = figures
    print(json.dumps(targets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
