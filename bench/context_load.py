"""Load and latency of the context call over HTTP: ``python -m bench.context_load``.

The real stack: gunicorn (deploy/gunicorn.conf.py), PostgreSQL, Redis as the
Celery broker and a Celery worker (it applies the usage sweeps the turns ask
for, on the same two cores, as in production). A tenant with 3 classic books of 2,000 entries in all, attached
to one character; 20 concurrent clients, each with its own chat, call
``POST /api/v1/chats/{id}/context`` with the chat's last 20 messages (two of
them new each turn: the model's reply and the user's next message, as partner
apps send it). Prints JSON lines: throughput, p50/p99 latency, and the
in-process engine time for the same kind of turn (its share of p50).

Three runs: "saturated" (clients send back to back: the throughput ceiling,
where latency is mostly queueing: p50 = clients / throughput), "paced" (each
client pauses between turns, like a person reading and typing) and
"paced_fresh" (paced, but all 20 messages are new every turn: the worst case
for the per-text memo of the matcher). Targets on a 2-core machine (keyword
profiles), read on the paced run: p50 <= 30 ms, p99 <= 150 ms.

Options: ``--clients 20 --requests 40`` (per client), ``--database-url``,
``--broker-url``, ``--port``. The database named in the URL is dropped and
recreated.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

REPO = Path(__file__).resolve().parents[1]
BOOKS = (("Harbour", 800), ("Mountains", 700), ("Court", 500))
WORDS = (
    "amber bastion cinder dagger ember falcon garnet harbor ivory jasper kestrel lantern meadow nimbus "
    "onyx pyre quarry raven sable thistle umber vessel willow xenon yarrow zephyr anchor briar cobalt "
    "drift echo fable grove hollow iron jade knoll lumen marrow north ochre pine quill rune salt tide"
).split()


def _key(rng: random.Random) -> str:
    return f"{rng.choice(WORDS)}{rng.randint(1, 400)}"


def _env(args: argparse.Namespace) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": args.database_url,
        "CELERY_BROKER_URL": args.broker_url,
        "DEBUG": "false",
        "SECRET_KEY": "bench-" + "s3cr3t-" * 10,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "false",
        "API_THROTTLE_RATE": "1000000/min",
        "GUNICORN_ACCESS_LOG": "off",
        "OMP_NUM_THREADS": "1",
        "DJANGO_SETTINGS_MODULE": "lore_platform.settings",
    }


def _recreate_database(url: str) -> None:
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


SETUP = r'''
import json, random, sys
import django
django.setup()
from books.models import Book, Entry, content_hash
from lore_platform.tenancy.services import tenant_create
from lore_platform.tenancy.selectors import actor_for_api_key
from lore_platform.cast.services import character_import
from lore_platform.cast.chats import chat_create
from lore_platform.cast.attachments import book_attach
from bench.context_load import BOOKS, _key

rng = random.Random(7)
created = tenant_create(name="Bench", admin_email="bench@loreweave.local")
actor = actor_for_api_key(created.key.api_key)
character = character_import(tenant=created.tenant, name="Kael")
keys = []
for title, count in BOOKS:
    book = Book.objects.create(tenant=created.tenant, owner=created.admin, title=title, profile="classic",
                               scan_depth=10, token_budget=2000, recursive=True)
    rows = []
    for i in range(count):
        entry_keys = sorted({_key(rng) for _ in range(rng.randint(3, 6))})
        keys.extend(entry_keys)
        content = f"{title} lore {i}: " + " ".join(rng.choice(keys) if rng.random() < 0.05 else "words" for _ in range(40))
        rows.append(Entry(tenant=created.tenant, book=book, title=f"{title} {i}", content=content, keys=entry_keys,
                          order=rng.randint(0, 200), priority=rng.randint(0, 20), position=i,
                          content_hash=content_hash(f"{title} {i}", content, entry_keys)))
    Entry.objects.for_tenant(created.tenant).bulk_create(rows, batch_size=500)
    book_attach(actor=actor, target="character", target_id=character.pk, book_id=book.pk)
chats = [chat_create(actor=actor, kind="character", character_id=character.pk, profile="classic").pk
         for _ in range(int(sys.argv[1]))]
print(json.dumps({"key": created.key.secret, "chats": chats, "keys": keys[:400]}))
'''


def _message(rng: random.Random, keys: list[str], index: int, turn: int) -> dict[str, str]:
    words = [rng.choice(WORDS) for _ in range(25)]
    if rng.random() < 0.5:
        words.insert(rng.randrange(len(words)), rng.choice(keys))
    return {"role": "user" if index % 2 == 0 else "assistant", "text": " ".join(words) + f" ({turn})"}


def _messages(rng: random.Random, keys: list[str], turn: int) -> list[dict[str, str]]:
    """A 20-message history written from scratch: every message is new to the server (the worst case)."""
    return [_message(rng, keys, i, turn) for i in range(20)]


class RollingChat:
    """A chat as partner apps send it: the last 20 messages, two of them new each turn
    (the model's reply to the last turn and the user's next message)."""

    def __init__(self, rng: random.Random, keys: list[str]) -> None:
        self.rng, self.keys = rng, keys
        self.history = _messages(rng, keys, 0)

    def next_turn(self, turn: int) -> list[dict[str, str]]:
        self.history = [*self.history[2:], _message(self.rng, self.keys, 1, turn), _message(self.rng, self.keys, 0, turn)]
        return self.history


def _client(port: int, key: str, chat: int, keys: list[str], requests: int, seed: int,
            latencies: list[float], errors: list[str], think_ms: float = 0.0, history: str = "rolling") -> None:
    rng = random.Random(seed)
    rolling = RollingChat(rng, keys)
    if think_ms:
        time.sleep(rng.random() * think_ms / 1000)  # clients do not start in lockstep
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Api-Key {key}", "Content-Type": "application/json"}
    for turn in range(requests):
        messages = rolling.next_turn(turn) if history == "rolling" else _messages(rng, keys, turn)
        body = json.dumps({"messages": messages, "model": {"id": "gpt-4o"}})
        started = time.perf_counter()
        try:
            conn.request("POST", f"/api/v1/chats/{chat}/context", body=body, headers=headers)
            response = conn.getresponse()
            payload = response.read()
        except OSError as exc:
            errors.append(str(exc))
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            continue
        latencies.append((time.perf_counter() - started) * 1000)
        if response.status != 200:
            errors.append(f"{response.status}: {payload[:200]!r}")
        if think_ms:
            # A person reads and types between turns; exponential pauses around the mean.
            time.sleep(rng.expovariate(1000 / think_ms))


def _percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def _engine_share(env: dict[str, str], keys: list[str], turns: int) -> float:
    """Median in-process time of turn_run (the engine, its tokenizer and labels) for a rolling-history
    turn: no HTTP, no database, no writes."""
    code = r'''
import json, random, statistics, sys, time
import django
django.setup()
from lore_platform.cast.models import Chat
from lore_platform.cast.selectors import chat_books_gather
from lore_platform.cast.turns import TurnInput, turn_run
from retrieval.engine import values as ev
from bench.context_load import RollingChat
keys = json.loads(sys.argv[1]); turns = int(sys.argv[2])
chat = Chat.objects.unscoped().select_related("tenant", "character").first()
rolling = RollingChat(random.Random(3), keys)
times = []
gathering = chat_books_gather(chat, profile="classic")
for turn in range(turns):
    messages = tuple(ev.Message(role=m["role"], text=m["text"]) for m in rolling.next_turn(turn))
    started = time.perf_counter()
    turn_run(request=TurnInput(messages=messages, model_id="gpt-4o"), profile="classic",
             gathering=gathering, state=chat.timed_state or {}, seed="bench")
    times.append((time.perf_counter() - started) * 1000)
print(statistics.median(times[20:]))
'''
    out = subprocess.run([sys.executable, "-c", code, json.dumps(keys), str(turns)], cwd=REPO, env=env,
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _usage_settled(env: dict[str, str], wait_s: float = 30.0) -> dict[str, object]:
    """After the runs: did the worker's sweeps count every turn's injections (W-11)?"""
    code = r'''
import json, sys, time
import django
django.setup()
from django.db.models import Sum
from books.models import Entry
from lore_platform.cast.models import RequestLog
deadline = time.time() + float(sys.argv[1])
while True:
    waiting = RequestLog.objects.unscoped().filter(usage_recorded_at__isnull=True).count()
    if not waiting or time.time() > deadline:
        break
    time.sleep(0.5)
injected = sum(len(ids) for log in RequestLog.objects.unscoped().only("usage") for ids in log.usage.values())
counted = Entry.objects.unscoped().aggregate(n=Sum("usage_count"))["n"] or 0
print(json.dumps({"logs_waiting": waiting, "injections": injected, "counted": counted}))
'''
    out = subprocess.run([sys.executable, "-c", code, str(wait_s)], cwd=REPO, env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=40, help="requests per client")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/loreweave_bench")
    parser.add_argument("--broker-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--think-ms", type=float, default=500.0,
                        help="mean pause between a client's turns in the paced run (the saturated run has none)")
    args = parser.parse_args(argv)
    env = _env(args)

    _recreate_database(args.database_url)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=REPO, env=env, check=True)
    setup = subprocess.run([sys.executable, "-c", SETUP, str(args.clients)], cwd=REPO, env=env,
                           capture_output=True, text=True)
    if setup.returncode != 0:
        sys.stderr.write(setup.stderr[-3000:])
        return 2
    data = json.loads(setup.stdout.strip().splitlines()[-1])
    print(json.dumps({"setup": {"books": len(BOOKS), "entries": sum(n for _, n in BOOKS), "clients": args.clients}}))

    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "lore_platform.celery", "worker", "--concurrency", "1",
         "--pool", "solo", "-l", "WARNING"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "lore_platform.wsgi:application", "-c", "deploy/gunicorn.conf.py",
         "--bind", f"127.0.0.1:{args.port}"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=2)
                conn.request("GET", "/healthz")
                if conn.getresponse().status in (200, 503):
                    break
            except OSError:
                time.sleep(0.3)
        # Warm every worker process (each compiles the books once per version), unrecorded.
        warm_threads = [
            threading.Thread(target=_client, args=(args.port, data["key"], chat, data["keys"], 5, 1000 + i, [], []))
            for i, chat in enumerate(data["chats"])
        ]
        for thread in warm_threads:
            thread.start()
        for thread in warm_threads:
            thread.join()
        runs = {}
        errors: list[str] = []
        for label, think, history in (("saturated", 0.0, "rolling"), ("paced", args.think_ms, "rolling"),
                                      ("paced_fresh", args.think_ms, "fresh")):
            latencies: list[float] = []
            threads = [
                threading.Thread(target=_client, args=(args.port, data["key"], chat, data["keys"], args.requests,
                                                       i + 100 * len(runs), latencies, errors, think, history))
                for i, chat in enumerate(data["chats"])
            ]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            runs[label] = (latencies, time.perf_counter() - started)
        usage = _usage_settled(env)
    finally:
        for process in (server, worker):
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()

    engine = _engine_share(env, data["keys"], 80)
    summary = {}
    for label, (latencies, elapsed) in runs.items():
        summary[label] = {
            "requests": len(latencies), "seconds": round(elapsed, 2),
            "throughput_rps": round(len(latencies) / elapsed, 1),
            "p50_ms": round(_percentile(latencies, 0.50), 1), "p99_ms": round(_percentile(latencies, 0.99), 1),
        }
    paced = summary["paced"]
    print(json.dumps({
        "http": summary,
        "clients": args.clients, "think_ms": args.think_ms, "errors": len(errors), "usage": usage,
        "engine": {"in_process_p50_ms": round(engine, 2),
                   "share_of_paced_p50": round(engine / max(paced["p50_ms"], 0.001), 2)},
        "targets_paced": {"p50_le_30ms": paced["p50_ms"] <= 30, "p99_le_150ms": paced["p99_ms"] <= 150},
    }))
    if errors:
        print(json.dumps({"first_errors": errors[:3]}))
    settled = usage["logs_waiting"] == 0 and usage["injections"] == usage["counted"]
    return 0 if not errors and settled else 1


if __name__ == "__main__":
    raise SystemExit(main())
