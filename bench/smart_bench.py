"""Smart-profile benchmark: indexing throughput and per-turn vector search.

    python -m bench.smart_bench [--entries 2000] [--turns 100] [--workers 1,2] [--database-url URL] [--json]

By default it creates a database of its own with a unique name on the server
``DATABASE_URL`` selects (PostgreSQL + pgvector; on SQLite, a temporary file
with the in-process index) and drops only that one afterwards. With
``--database-url`` it runs in that existing database as it is and drops
nothing (it deletes the tenant it made). It builds one world book of
``--entries`` generated entries (~360-710 characters, 540 on average) and measures:

- indexing throughput, entries per second, running the real ``index_entries``
  task over 100-entry chunks in 1 and in 2 worker processes (the machine has 2
  cores; ``OMP_NUM_THREADS=1`` per process, as in production workers);
- per turn and per kind of turn (``bench/honest.py``: ``cold`` with message
  vectors, book indexes and memos forgotten; ``rolling``, one new message in
  the 6-message window; ``all_new``, six new messages), what the smart
  selection calls through ``BookMeaningSearch`` (the W-7 mostly-indexed check,
  embedding the window into its query vector, ``nearest(k=10)`` on the
  configured ``VectorIndex``) and the whole smart turn as the context call runs
  it (``cast.turns.turn_run``);
- the naive baseline on every timed turn: an exact scan of every entry's vector
  in Python. Its top-k is compared with the index's (recall: HNSW is
  approximate), and the whole turn run again on it must inject the same entries
  (exit status 1 on a difference with the exact in-process index).
"""
from __future__ import annotations

import os

# Before numpy is imported anywhere: one BLAS/OpenMP thread per process.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import platform as platform_info  # noqa: E402
import random  # noqa: E402
import secrets  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

WINDOW = 6
K = 10
TASK_CHUNK = 100  # entries per index_entries call, as the docstring says

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


def _index_chunks(tenant_id: int, chunks: list[list[int]]) -> int:
    from django.db import connections

    from retrieval.adapter.tasks import index_entries

    embedded = 0
    for chunk in chunks:
        embedded += index_entries(tenant_id, chunk)["embedded"]
    connections.close_all()
    return embedded


def indexing_measure(tenant: Any, entry_ids: list[int], workers: int) -> dict[str, Any]:
    """Index every entry from scratch with ``workers`` processes; entries per second."""
    from django.db import connections

    from books.models import Entry, IndexingState
    from retrieval.adapter.models import EntryVector

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


class NaiveVectorIndex:
    """The baseline: every entry's vector compared with the query, one by one, each turn.

    Vectors are read once (reading is not the scan); disabled entries are left out as the
    real index leaves them out.
    """

    def __init__(self, tenant: Any, model_name: str) -> None:
        from books.models import Entry
        from retrieval.adapter.models import EntryVector

        enabled = set(Entry.objects.for_tenant(tenant).filter(enabled=True).values_list("pk", flat=True))
        self.rows: list[tuple[int, int, list[float]]] = []
        for entry_id, book_id, embedding in (
            EntryVector.objects.for_tenant(tenant).filter(model_name=model_name)
            .values_list("entry_id", "entry__book_id", "embedding")
        ):
            if entry_id in enabled:
                vector = [float(x) for x in embedding]
                norm = sum(x * x for x in vector) ** 0.5 or 1.0
                self.rows.append((entry_id, book_id, [x / norm for x in vector]))

    def nearest(self, book_ids: Any, query_vector: Any, k: int, exclude_disabled: bool = True) -> list[tuple[int, float]]:
        query = [float(x) for x in query_vector]
        norm = sum(x * x for x in query) ** 0.5 or 1.0
        wanted = {int(b) for b in book_ids}
        scored = [
            (sum(a * b for a, b in zip(vector, query)) / norm, entry_id)
            for entry_id, book_id, vector in self.rows if book_id in wanted
        ]
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        return [(entry_id, score) for score, entry_id in scored[:k]]


def _windows(kind: str, chat: list[str], turns: int) -> list[list[str]]:
    """Six-message windows for one kind of turn (``bench/honest.py``); texts never repeat across kinds."""
    if kind == "rolling":
        return [chat[t : t + WINDOW] for t in range(1, turns + 1)]
    return [[f"{text} [{kind} {t}]" for text in chat[t : t + WINDOW]] for t in range(turns)]


def _cold_reset() -> None:
    """Nothing remembered between turns: message vectors, book indexes and coverage, keyword memos,
    the smart title/alias matcher's names-per-text memo."""
    from retrieval.adapter.embedders import message_cache_get
    from retrieval.adapter.vector_store import memory_cache_clear
    from retrieval.engine import smart

    from .honest import engine_memos_clear, matcher_memo_clear

    message_cache_get().clear()
    memory_cache_clear()
    engine_memos_clear()
    for name in ("_big", "_name_matchers"):  # where the smart matcher lives, before and after issue 18
        cache = getattr(smart, name, None)
        for compiled in list(cache._items.values()) if cache is not None else ():
            names = getattr(compiled, "names", compiled)
            matcher_memo_clear(names.matcher)


# ``--profile``: cProfile over the rolling turns (embed + select), top functions printed to stderr.
PROFILER: Any = None
STAGES = ("w7_check", "embed", "vector_search", "load", "engine")


class _StageClock:
    """Per-stage wall time of one smart turn, measured in process around the calls the turn makes:
    the W-7 check and ranking (``ChatMeaningSearch``), the window embedding, and the engine
    (``assemble``, without the ranking it calls); ``load`` is the rest of ``turn_run`` (engine books,
    tokenizer, answer)."""

    def __init__(self) -> None:
        self.spent = dict.fromkeys(STAGES, 0.0)

    def meaning(self, books: list[Any]) -> Any:
        from retrieval.adapter.vector_store import ChatMeaningSearch

        clock = self

        class TimedMeaning(ChatMeaningSearch):
            def mostly_indexed(self, book_id: str) -> bool:
                started = time.perf_counter()
                try:
                    return super().mostly_indexed(book_id)
                finally:
                    clock.spent["w7_check"] += time.perf_counter() - started

            def rank(self, **kwargs: Any) -> list[str]:
                started = time.perf_counter()
                try:
                    return super().rank(**kwargs)
                finally:
                    clock.spent["vector_search"] += time.perf_counter() - started

        return TimedMeaning(books)


def _assemble_timed(clock_of: Any) -> Any:
    """``turns.assemble`` wrapped: the engine's time, less the ranking it asked for."""
    from cast import turns

    original = turns.assemble

    def timed(*args: Any, **kwargs: Any) -> Any:
        clock = clock_of()
        before = clock.spent["vector_search"] + clock.spent["w7_check"]
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            inner = clock.spent["vector_search"] + clock.spent["w7_check"] - before
            clock.spent["engine"] += time.perf_counter() - started - inner

    return original, timed


def search_measure(tenant: Any, book_id: int, turns: int, naive: NaiveVectorIndex) -> dict[str, Any]:
    """Per turn, what the smart selection calls: ``BookMeaningSearch`` (W-7 check + W-4 rank), per kind of turn.

    The naive exact scan runs on every timed turn; ``recall`` is the share of its top-k the index found.
    """
    from retrieval.adapter.embedders import embedder_get
    from retrieval.adapter.vector_store import BookMeaningSearch, memory_cache_clear, vector_index_get
    from retrieval.engine.embeddings import MessageEmbeddingCache

    from .honest import KINDS, ratio, summary_ms

    embedder = embedder_get()
    index = vector_index_get(tenant)
    chat = chat_generate(turns)

    memory_cache_clear()
    [probe] = embedder.embed_queries(["warm-up"])
    started = time.perf_counter()
    index.nearest([book_id], probe, K)
    cold_first = time.perf_counter() - started

    report: dict[str, Any] = {
        "backend": type(index).__name__, "window": WINDOW, "k": K, "first_query_cold_ms": round(cold_first * 1000, 1),
    }
    cache = MessageEmbeddingCache()
    for kind in KINDS:
        if kind == "rolling":
            cache.embed_queries(embedder, chat[:WINDOW])  # the chat's history before its first timed turn
        stages: dict[str, list[float]] = {"mostly_indexed": [], "embed": [], "nearest": [], "turn": [], "naive": []}
        recalls, short = [], 0
        for window in _windows(kind, chat, turns):
            if kind == "cold":
                memory_cache_clear()
                cache.clear()
            t0 = time.perf_counter()
            search = BookMeaningSearch(tenant, embedder=embedder, index=index, cache=cache)  # one per turn
            search.mostly_indexed(str(book_id))
            t1 = time.perf_counter()
            query = search.query_vector(window)
            assert query is not None
            t2 = time.perf_counter()
            found = index.nearest([book_id], query, K)
            t3 = time.perf_counter()
            exact = naive.nearest([book_id], query, K)
            t4 = time.perf_counter()
            short += len(found) < K
            recalls.append(len({e for e, _ in found} & {e for e, _ in exact}) / max(1, len(exact)))
            for name, seconds in (("mostly_indexed", t1 - t0), ("embed", t2 - t1), ("nearest", t3 - t2),
                                  ("turn", t3 - t0), ("naive", t4 - t3)):
                stages[name].append(seconds * 1000)
        report[kind] = {
            "w7_mostly_indexed_check": summary_ms(stages["mostly_indexed"]),
            "embed_and_query_vector": summary_ms(stages["embed"]),
            "nearest": summary_ms(stages["nearest"]),
            "turn_vector_stage": summary_ms(stages["turn"]),
            "naive_scan": summary_ms(stages["naive"]),
            "naive_ratio_to_nearest": ratio(stages["naive"], stages["nearest"]),
            "recall_at_k": {"min": round(min(recalls), 2) if recalls else None,
                            "mean": round(statistics.mean(recalls), 3) if recalls else None},
            "turns_short_of_k": short,
        }
    return report


def _naive_meaning(books: list[Any], naive: NaiveVectorIndex) -> Any:
    """The chat meaning search with the naive index in place of the configured one."""
    from retrieval.adapter.vector_store import BookMeaningSearch, ChatMeaningSearch

    class NaiveMeaning(ChatMeaningSearch):
        def _search(self, tenant: Any) -> BookMeaningSearch:
            if tenant.pk not in self._searches:
                self._searches[tenant.pk] = BookMeaningSearch(tenant, embedder=self.embedder, index=naive,
                                                              cache=self.cache)
            return self._searches[tenant.pk]

    return NaiveMeaning(books)


def selection_measure(book: Any, turns: int, naive: NaiveVectorIndex) -> dict[str, Any]:
    """The full smart turn (W-1..W-7) as the context call runs it, 6-message window, per kind of turn.

    As in ``chat_turn``: the window is embedded first (``embed``), then ``turn_run`` selects (``select``);
    ``turn`` is both. The same selection on the naive index runs after each timed turn (its window already
    embedded, so it is compared with ``select``), and its injections must match.
    """
    from retrieval.adapter.embedders import message_cache_get

    # One process times its own embedding: vectors another run left in the shared cache must
    # not warm its turns (cold above all).
    message_cache_get().shared = None
    from cast.selectors import GatheredBook, Gathering
    from cast.turns import TurnInput, turn_run
    from retrieval.adapter.vector_store import ChatMeaningSearch
    from retrieval.engine import values as ev
    from retrieval.engine.smart import meaning_window

    from .honest import KINDS, ratio, summary_ms

    chat = chat_generate(turns)
    gathering = Gathering(books=[GatheredBook(book=book, label=None, via="bench")], left_out=[])

    def messages_of(window: list[str]) -> tuple[ev.Message, ...]:
        return tuple(ev.Message(role="user" if i % 2 else "assistant", text=text) for i, text in enumerate(window))

    def select(messages: tuple[ev.Message, ...], meaning: Any) -> tuple[float, Any]:
        started = time.perf_counter()
        result = turn_run(request=TurnInput(messages=messages, model_id="gpt-4o"), profile="smart",
                          gathering=gathering, state={}, seed="bench", meaning=meaning)
        return (time.perf_counter() - started) * 1000, result

    from cast import turns as cast_turns

    clock = _StageClock()
    original_assemble, timed_assemble = _assemble_timed(lambda: clock)

    # Once per process, untimed: the tokenizer's vocabulary and the book's compiled form (timed elsewhere).
    select(messages_of([f"{text} [warm-up]" for text in chat[:WINDOW]]), None)
    report: dict[str, Any] = {}
    mismatches = 0
    for kind in KINDS:
        if kind == "rolling":  # the chat's history before its first timed turn
            ChatMeaningSearch([book]).window_embed(meaning_window(messages_of(chat[:WINDOW])))
        embeds, selects, totals, naive_times, matched, indexed, cpus = [], [], [], [], [], [], []
        stages: dict[str, list[float]] = {name: [] for name in STAGES}
        for window in _windows(kind, chat, turns):
            if kind == "cold":
                _cold_reset()
            messages = messages_of(window)
            clock = _StageClock()
            cast_turns.assemble = timed_assemble
            if PROFILER is not None and kind == "rolling":
                PROFILER.enable()
            try:
                cpu = time.process_time()
                started = time.perf_counter()
                meaning = clock.meaning([book])
                meaning.window_embed(meaning_window(messages))
                embed_ms = (time.perf_counter() - started) * 1000
                w7_before_ms = clock.spent["w7_check"] * 1000
                select_ms, result = select(messages, meaning)
                cpus.append((time.process_time() - cpu) * 1000)
            finally:
                cast_turns.assemble = original_assemble
                if PROFILER is not None:
                    PROFILER.disable()
            embeds.append(embed_ms)
            selects.append(select_ms)
            totals.append(embed_ms + select_ms)
            spent = {name: seconds * 1000 for name, seconds in clock.spent.items()}
            spent["embed"] = embed_ms - w7_before_ms  # window_embed runs the W-7 check first
            spent["load"] = select_ms - spent["engine"] - spent["vector_search"] - (spent["w7_check"] - w7_before_ms)
            for name in STAGES:
                stages[name].append(spent[name])
            naive_meaning = _naive_meaning([book], naive)
            naive_meaning.window_embed(meaning_window(messages))  # cache hits: the same vectors
            naive_ms, naive_result = select(messages, naive_meaning)
            naive_times.append(naive_ms)
            ours = [(i.entry, i.slot) for i in result.selection.injections]
            if ours != [(i.entry, i.slot) for i in naive_result.selection.injections]:
                mismatches += 1
            matched.append(sum(1 for i in result.selection.injections if i.slot == "matched"))
            indexed.append(len(result.selection.world_index))
        report[kind] = {
            "turn": summary_ms(totals), "embed": summary_ms(embeds), "select": summary_ms(selects),
            "turn_cpu": summary_ms(cpus),
            "stages_p50_ms": {name: round(statistics.median(values), 3) for name, values in stages.items() if values},
            "naive_select": summary_ms(naive_times), "naive_ratio_to_select": ratio(naive_times, selects),
            "matched_per_turn": max(matched, default=0), "world_index_lines": max(indexed, default=0),
        }
    report["naive_checked_turns"] = turns * len(KINDS)
    report["naive_mismatches"] = mismatches
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.smart_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=100, help="timed turns per kind (cold, rolling, all_new)")
    parser.add_argument("--workers", default="1,2", help="comma-separated process counts for indexing")
    parser.add_argument("--database-url", default="",
                        help="run in this existing database as it is (migrated if needed, never dropped; the "
                             "bench's tenant is deleted afterwards); default: a unique scratch database")
    parser.add_argument("--json", action="store_true", help="print only the JSON report")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="profile the rolling turns and print the top N functions by own time")
    args = parser.parse_args(argv)
    if args.profile:
        import cProfile

        global PROFILER
        PROFILER = cProfile.Profile()
    worker_counts = [int(w) for w in args.workers.split(",") if w.strip()]
    if args.database_url:
        os.environ["DATABASE_URL"] = args.database_url

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    scratch = Path(tempfile.mkdtemp(prefix="loreweave-bench-"))
    created_db = None
    try:
        if args.database_url:
            call_command("migrate", verbosity=0, interactive=False)
            database = {"name": connection.settings_dict["NAME"], "created": False}
        else:
            test_settings = connection.settings_dict.setdefault("TEST", {})
            if connection.vendor == "sqlite":
                # A file, not :memory:, so forked indexing workers share it.
                test_settings["NAME"] = str(scratch / "bench.sqlite3")
            else:
                # A name no one else holds: an existing database is never clobbered, and only this one is dropped.
                test_settings["NAME"] = f"loreweave_bench_{os.getpid()}_{secrets.token_hex(4)}"
            original = connection.settings_dict["NAME"]
            connection.creation.create_test_db(verbosity=0, autoclobber=False, serialize=False)
            created_db = original
            database = {"name": test_settings["NAME"], "created": True}
        report = {"database_used": database, **_run(args, worker_counts)}
    finally:
        if created_db is not None:
            connection.creation.destroy_test_db(created_db, verbosity=0)
        shutil.rmtree(scratch, ignore_errors=True)
    if not args.json:
        _print_summary(report)
    if PROFILER is not None:
        import pstats

        pstats.Stats(PROFILER, stream=sys.stderr).sort_stats("tottime").print_stats(args.profile)
        pstats.Stats(PROFILER, stream=sys.stderr).sort_stats("cumulative").print_stats(args.profile)
    print(json.dumps(report, indent=2))
    return 1 if report["selection"]["naive_mismatches"] and report["vector_backend"] == "memory" else 0


def _run(args: argparse.Namespace, worker_counts: list[int]) -> dict[str, Any]:
    from lore_platform.tenancy.services import tenant_create

    tag = secrets.token_hex(4)  # a given database may already hold another run's tenant
    created = tenant_create(name=f"Bench {tag}", admin_email=f"bench-{tag}@loreweave.local", profile="smart")
    tenant = created.tenant
    try:
        return _measure(args, worker_counts, tenant, created)
    finally:
        if args.database_url:
            # Only what this run wrote goes: its tenant, its admin and their rows.
            from django.contrib.auth import get_user_model

            tenant.delete()
            get_user_model().objects.filter(pk=created.admin.pk).delete()


def _measure(args: argparse.Namespace, worker_counts: list[int], tenant: Any, created: Any) -> dict[str, Any]:
    from django.conf import settings
    from django.db import connection

    from books.models import Book, Entry, Profile, content_hash
    from retrieval.adapter.embedders import embedder_get
    from retrieval.adapter.models import EntryVector

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
    naive = NaiveVectorIndex(tenant, embedder.name)
    search = search_measure(tenant, book.pk, args.turns, naive)
    selection = selection_measure(book, args.turns, naive)
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
    db = report["database_used"]
    out.write(f"smart bench: {report['entries']} entries on {report['database']} ({report['vector_backend']}), "
              f"database {db['name']} ({'created and dropped by this run' if db['created'] else 'given; kept'}), "
              f"{report['model']} ({report['dimension']}-d), model load {report['model_load_seconds']} s\n")
    for run in report["indexing"]:
        out.write(f"  indexing, {run['workers']} process(es): {run['entries_per_second']} entries/s "
                  f"({run['seconds']} s)\n")
    s, t = report["search"], report["selection"]
    out.write(f"  per turn ({s['window']}-message window, k={s['k']}), medians; naive = every vector scanned:\n")
    for kind in ("cold", "rolling", "all_new"):
        v, f = s[kind], t[kind]
        out.write(f"    {kind:<8} vector stage p50 {v['turn_vector_stage'].get('p50_ms')} ms "
                  f"(W-7 check {v['w7_mostly_indexed_check'].get('p50_ms')}, embed {v['embed_and_query_vector'].get('p50_ms')}, "
                  f"nearest {v['nearest'].get('p50_ms')}; naive scan {v['naive_scan'].get('p50_ms')} ms = "
                  f"{v['naive_ratio_to_nearest']}x, recall min {v['recall_at_k']['min']}); "
                  f"full smart turn p50 {f['turn'].get('p50_ms')} ms, p95 {f['turn'].get('p95_ms')} ms "
                  f"(embed {f['embed'].get('p50_ms')}, select {f['select'].get('p50_ms')}; the same selection on "
                  f"the naive index {f['naive_select'].get('p50_ms')} ms = {f['naive_ratio_to_select']}x)\n")
    out.write("  full smart turn per stage, p50 ms (in process; cpu = process CPU time of the turn):\n")
    for kind in ("cold", "rolling", "all_new"):
        f = t[kind]
        parts = ", ".join(f"{name} {value}" for name, value in f["stages_p50_ms"].items())
        out.write(f"    {kind:<8} {parts}; turn {f['turn'].get('p50_ms')}, cpu {f['turn_cpu'].get('p50_ms')}\n")
    out.write(f"  naive answers checked on {t['naive_checked_turns']} turns: {t['naive_mismatches']} differ"
              f"{' (HNSW is approximate)' if t['naive_mismatches'] and report['vector_backend'] != 'memory' else ''}\n")


if __name__ == "__main__":
    raise SystemExit(main())
