"""Smart-profile benchmark: indexing throughput and per-turn vector search.

    python -m bench.smart_bench [--entries 2000] [--turns 300] [--workers 1,2] [--json]

Runs on whichever database ``DATABASE_URL`` selects (PostgreSQL + pgvector, or
the embedded SQLite with the in-process index), in a throwaway database
(``loreweave_bench`` on PostgreSQL, a temporary file on SQLite) that is dropped
afterwards. It builds one world book of ``--entries`` generated entries
(~360-710 characters, 540 on average) and measures:

- indexing throughput, entries per second, running the real ``index_entries``
  task over 100-entry chunks in 1 and in 2 worker processes (the machine has 2
  cores; ``OMP_NUM_THREADS=1`` per process, as in production workers);
- per turn, over a 6-message window that slides by one message, what the smart
  selection calls through ``BookMeaningSearch``: the W-7 mostly-indexed check,
  embedding with the message cache (only the new message is embedded) into the
  window's query vector (recency-weighted mean), and ``nearest(k=10)`` on the
  configured ``VectorIndex``; p50/p95 of each stage and of the whole.

- per turn, the whole smart selection as the context call runs it
  (``lore_platform.cast.turns.turn_run``: canon, whole-book check, names, meaning,
  world index) over the same sliding window, with cached message vectors.
"""
from __future__ import annotations

import os

# Before numpy is imported anywhere: one BLAS/OpenMP thread per process.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lore_platform.settings")

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import platform as platform_info  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

WINDOW = 6
K = 10

PLACES = ["city", "fortress", "harbour", "village", "monastery", "mine", "forest", "marsh", "desert oasis", "island",
          "canyon", "library", "prison", "bridge", "tower", "market", "glacier", "volcano", "lighthouse", "ruin"]
PEOPLES = ["smiths", "monks", "pirates", "elves", "dwarves", "merchants", "witches", "knights", "nomads", "gnomes",
           "fishermen", "scholars", "thieves", "priests", "hunters", "giants", "goblins", "sailors", "miners", "bards"]
THINGS = ["a sleeping dragon", "a cursed bell", "a well of glowing water", "a clockwork golem", "a forbidden book",
          "a silver mask", "an iron crown", "a ghost ship", "a singing stone", "a frozen flame", "a river of ink",
          "a lantern that never dies", "a map of the stars", "a door without a key", "a garden of glass"]
DEEDS = ["guard it day and night", "trade it for salt and iron", "fear it and leave offerings at dawn",
         "hunt anyone who speaks of it", "worship it in secret", "sell its pieces to travellers",
         "swear oaths upon it", "have forgotten why it matters", "argue about who owns it", "hide it from the crown"]
HISTORY = ["It was founded {n} years ago after the war of the {a} and the {b}.",
           "A plague struck it {n} years ago, and the {a} still blame the {b}.",
           "Its rulers are chosen every {n} winters by a council of {a}.",
           "Travellers say the {a} and the {b} signed a secret pact there {n} years ago.",
           "Every {n}th spring the {a} hold a festival that the {b} are not allowed to attend."]
CUSTOMS = ["Strangers must give their true name at the gate.", "No one may carry fire after sunset.",
           "Debts are paid in songs rather than coin.", "Children are named after the nearest river.",
           "Bread is buried in the fields to ask for rain.", "Masks are worn on the longest night of the year.",
           "Every oath is sealed with a drop of blood.", "Ravens carry the messages between households."]
MESSAGES = ["Tell me more about the {p} near the {q}.", "We ride toward the {p} at dawn; what should we expect?",
            "Who rules the {p} these days?", "I heard the {q} keep {t} hidden somewhere. Is that true?",
            "¿Qué sabes de los {q} que viven junto al {p}?", "Let's ask the innkeeper about {t}.",
            "The old map mentions {t}. Where could it be?", "Háblame de la historia de ese {p}.",
            "Why do the {q} refuse to talk to outsiders?", "I draw my sword and step into the {p}."]


def world_book_generate(count: int, seed: int = 7) -> list[dict[str, Any]]:
    """``count`` distinct, deterministic lore entries of a few sentences each."""
    rng = random.Random(seed)
    entries = []
    for i in range(count):
        place, people, thing = rng.choice(PLACES), rng.choice(PEOPLES), rng.choice(THINGS)
        other = rng.choice([p for p in PEOPLES if p != people])
        name = f"{rng.choice(['North', 'South', 'Old', 'High', 'Low', 'Red', 'Grey', 'Silver'])}{place.split()[0]} {i}"
        sentences = [
            f"{name} is a {place} of the {people}, known across the realm for {thing}.",
            f"The {people} {rng.choice(DEEDS)}, while the {other} {rng.choice(DEEDS)}.",
            rng.choice(HISTORY).format(n=rng.randint(3, 900), a=people, b=other),
            rng.choice(CUSTOMS),
            rng.choice(HISTORY).format(n=rng.randint(3, 900), a=other, b=people),
            rng.choice(CUSTOMS),
            f"Those who visit the {place} speak of {rng.choice(THINGS)} and of the {other}, who {rng.choice(DEEDS)}.",
            rng.choice(HISTORY).format(n=rng.randint(3, 900), a=people, b=rng.choice(PEOPLES)),
            rng.choice(CUSTOMS),
        ]
        content = " ".join(sentences[: rng.randint(6, 9)])
        entries.append({"title": name.title(), "content": content, "keys": [f"{place} {i}"]})
    return entries


def chat_generate(turns: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [
        rng.choice(MESSAGES).format(p=rng.choice(PLACES), q=rng.choice(PEOPLES), t=rng.choice(THINGS))
        + f" ({i})"  # every message distinct, so each turn really embeds one new message
        for i in range(turns + WINDOW)
    ]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _ms(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(_percentile(values, 0.5) * 1000, 3),
        "p95_ms": round(_percentile(values, 0.95) * 1000, 3),
        "max_ms": round(max(values) * 1000, 3),
    }


def _index_chunks(tenant_id: int, chunks: list[list[int]]) -> int:
    from django.db import connections

    from retrieval.tasks import index_entries

    embedded = 0
    for chunk in chunks:
        embedded += index_entries(tenant_id, chunk)["embedded"]
    connections.close_all()
    return embedded


def indexing_measure(tenant: Any, entry_ids: list[int], workers: int) -> dict[str, Any]:
    """Index every entry from scratch with ``workers`` processes; entries per second."""
    from django.db import connections

    from books.models import Entry, IndexingState
    from retrieval.indexing import TASK_CHUNK
    from retrieval.models import EntryVector

    EntryVector.objects.for_tenant(tenant).delete()
    Entry.objects.for_tenant(tenant).update(indexing_state=IndexingState.PENDING)
    chunks = [entry_ids[i : i + TASK_CHUNK] for i in range(0, len(entry_ids), TASK_CHUNK)]
    connections.close_all()  # forked workers open their own connections
    started = time.perf_counter()
    if workers == 1:
        embedded = _index_chunks(tenant.pk, chunks)
    else:
        shares = [chunks[w::workers] for w in range(workers)]
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            embedded = sum(pool.starmap(_index_chunks, [(tenant.pk, share) for share in shares]))
    seconds = time.perf_counter() - started
    indexed = Entry.objects.for_tenant(tenant).filter(indexing_state=IndexingState.INDEXED).count()
    return {
        "workers": workers,
        "entries": len(entry_ids),
        "embedded": embedded,
        "indexed": indexed,
        "seconds": round(seconds, 2),
        "entries_per_second": round(len(entry_ids) / seconds, 1),
    }


def search_measure(tenant: Any, book_id: int, turns: int) -> dict[str, Any]:
    """Per turn, what the smart selection will call: ``BookMeaningSearch`` (W-7 check + W-4 rank)."""
    from retrieval.embedders import embedder_get
    from retrieval.engine.embeddings import MessageEmbeddingCache
    from retrieval.vector_store import BookMeaningSearch, memory_cache_clear, vector_index_get

    embedder = embedder_get()
    index = vector_index_get(tenant)
    cache = MessageEmbeddingCache()
    chat = chat_generate(turns)

    memory_cache_clear()
    [probe] = embedder.embed_queries(["warm-up"])
    started = time.perf_counter()
    index.nearest([book_id], probe, K)
    cold = time.perf_counter() - started

    stages: dict[str, list[float]] = {"mostly_indexed": [], "embed": [], "nearest": [], "turn": []}
    found_sizes = []
    for turn in range(turns):
        window = chat[turn : turn + WINDOW]
        t0 = time.perf_counter()
        search = BookMeaningSearch(tenant, embedder=embedder, index=index, cache=cache)  # one per turn
        mostly = search.mostly_indexed(str(book_id))
        t1 = time.perf_counter()
        query = search.query_vector(window)
        assert query is not None
        t2 = time.perf_counter()
        found = index.nearest([book_id], query, K)
        t3 = time.perf_counter()
        found_sizes.append(len(found))
        if turn >= 3:  # the first turns fill the cache
            for name, seconds in (("mostly_indexed", t1 - t0), ("embed", t2 - t1), ("nearest", t3 - t2),
                                  ("turn", t3 - t0)):
                stages[name].append(seconds)
    return {
        "backend": type(index).__name__,
        "turns_timed": len(stages["turn"]),
        "window": WINDOW,
        "k": K,
        "mostly_indexed": mostly,
        "first_query_cold_ms": round(cold * 1000, 1),
        "w7_mostly_indexed_check": _ms(stages["mostly_indexed"]),
        "embed_new_message_and_query_vector": _ms(stages["embed"]),
        "nearest": _ms(stages["nearest"]),
        "turn_vector_stage": _ms(stages["turn"]),
        "cache": {"hits": cache.hits, "misses": cache.misses},
        "always_k_results": min(found_sizes) == K,
    }


def selection_measure(book: Any, turns: int) -> dict[str, Any]:
    """The full smart turn (W-1..W-7) as the context call runs it, 6-message window, cached vectors."""
    from lore_platform.cast.selectors import GatheredBook, Gathering
    from lore_platform.cast.turns import TurnInput, turn_run
    from retrieval.engine import values as ev

    chat = chat_generate(turns)
    gathering = Gathering(books=[GatheredBook(book=book, label=None, via="bench")], left_out=[])
    times, matched, indexed = [], [], []
    for turn in range(turns):
        window = tuple(ev.Message(role="user" if i % 2 else "assistant", text=text)
                       for i, text in enumerate(chat[turn : turn + WINDOW]))
        started = time.perf_counter()
        result = turn_run(request=TurnInput(messages=window, model_id="gpt-4o"), profile="smart",
                          gathering=gathering, state={}, seed="bench")
        elapsed = time.perf_counter() - started
        if turn >= 3:
            times.append(elapsed)
        matched.append(sum(1 for i in result.selection.injections if i.slot == "matched"))
        indexed.append(len(result.selection.world_index))
    return {"turn": _ms(times), "matched_per_turn": max(matched), "world_index_lines": max(indexed)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.smart_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--workers", default="1,2", help="comma-separated process counts for indexing")
    parser.add_argument("--json", action="store_true", help="print only the JSON report")
    args = parser.parse_args(argv)
    worker_counts = [int(w) for w in args.workers.split(",") if w.strip()]

    import django

    django.setup()
    from django.db import connection

    test_settings = connection.settings_dict.setdefault("TEST", {})
    scratch = Path(tempfile.mkdtemp(prefix="loreweave-bench-"))
    if connection.vendor == "sqlite":
        # A file, not :memory:, so forked indexing workers share it.
        test_settings["NAME"] = str(scratch / "bench.sqlite3")
    else:
        test_settings["NAME"] = "loreweave_bench"
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        report = _run(args, worker_counts)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        shutil.rmtree(scratch, ignore_errors=True)
    if not args.json:
        _print_summary(report)
    print(json.dumps(report, indent=2))
    return 0


def _run(args: argparse.Namespace, worker_counts: list[int]) -> dict[str, Any]:
    from django.conf import settings
    from django.db import connection

    from books.models import Book, Entry, Profile, content_hash
    from lore_platform.tenancy.services import tenant_create
    from retrieval.embedders import embedder_get
    from retrieval.models import EntryVector

    created = tenant_create(name="Bench", admin_email="bench@loreweave.local", profile="smart")
    tenant = created.tenant
    book = Book.objects.create(tenant=tenant, owner=created.admin, title="Bench world", profile=Profile.SMART)
    generated = world_book_generate(args.entries)
    # Written directly rather than through books.services so that no indexing hook
    # runs during setup: indexing is what is being measured.
    rows = [
        Entry(
            tenant=tenant, book=book, position=i, title=e["title"], content=e["content"], keys=e["keys"],
            content_hash=content_hash(e["title"], e["content"], e["keys"]),
        )
        for i, e in enumerate(generated)
    ]
    Entry.objects.for_tenant(tenant).bulk_create(rows, batch_size=500)
    entry_ids = list(Entry.objects.for_tenant(tenant).filter(book=book).order_by("pk").values_list("pk", flat=True))

    embedder = embedder_get()
    started = time.perf_counter()
    embedder.embed_passages(["load the model before timing"])  # workers load it once at start-up
    load_seconds = time.perf_counter() - started

    indexing = [indexing_measure(tenant, entry_ids, workers) for workers in worker_counts]
    if connection.vendor == "postgresql":
        # Fresh tables have no statistics until autovacuum runs; without them the
        # planner may sort all vectors instead of walking the HNSW graph.
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {EntryVector._meta.db_table}, {Entry._meta.db_table}")
    search = search_measure(tenant, book.pk, args.turns)
    selection = selection_measure(book, args.turns)
    lengths = [len(e["content"]) for e in generated]
    return {
        "database": connection.vendor,
        "vector_backend": settings.VECTOR_BACKEND,
        "model": embedder.name,
        "dimension": embedder.dimension,
        "model_load_seconds": round(load_seconds, 2),
        "entries": len(entry_ids),
        "entry_chars": {"mean": round(statistics.mean(lengths)), "min": min(lengths), "max": max(lengths)},
        "cpu_count": os.cpu_count(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "python": platform_info.python_version(),
        "indexing": indexing,
        "search": search,
        "selection": selection,
    }


def _print_summary(report: dict[str, Any]) -> None:
    out = sys.stderr
    out.write(f"smart bench: {report['entries']} entries on {report['database']} ({report['vector_backend']}), "
              f"{report['model']} ({report['dimension']}-d), model load {report['model_load_seconds']} s\n")
    for run in report["indexing"]:
        out.write(f"  indexing, {run['workers']} process(es): {run['entries_per_second']} entries/s "
                  f"({run['seconds']} s)\n")
    s = report["search"]
    out.write(f"  per turn ({s['window']}-message window, cached vectors, k={s['k']}): "
              f"W-7 check p50 {s['w7_mostly_indexed_check']['p50_ms']} ms; "
              f"vector stage p50 {s['turn_vector_stage']['p50_ms']} ms, p95 {s['turn_vector_stage']['p95_ms']} ms; "
              f"nearest p50 {s['nearest']['p50_ms']} ms, p95 {s['nearest']['p95_ms']} ms; "
              f"first query (cold) {s['first_query_cold_ms']} ms\n")
    t = report["selection"]
    out.write(f"  full smart selection per turn: p50 {t['turn']['p50_ms']} ms, p95 {t['turn']['p95_ms']} ms "
              f"({t['matched_per_turn']} matched, {t['world_index_lines']} index lines)\n")


if __name__ == "__main__":
    raise SystemExit(main())
