"""Gunicorn settings for the Loreweave API (read by `gunicorn -c deploy/gunicorn.conf.py`)."""
import json
import multiprocessing
import os
import socket

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
# The context call is CPU-bound Python: threads would share one interpreter lock,
# so scale with processes (measured with bench.context_load on 2 cores: 2 workers x 4
# threads gave 52 req/s and a paced p50 of 79 ms; 4-6 workers x 1 thread gave 57-68 req/s
# and 45-47 ms; after the per-turn work was cut, 3 workers gave paced p50 25-32 ms and
# 5 workers 23-25 ms).
workers = int(os.environ.get("GUNICORN_WORKERS", 2 * multiprocessing.cpu_count() + 1))
threads = int(os.environ.get("GUNICORN_THREADS", 1))
# "sync" (the default): one request per connection, taken by whichever process is free. gthread keeps
# each keep-alive connection in the process that accepted it, so under saturation some processes queue
# while others idle. bench.context_load on 2 cores (issue 18.1, alternating, same code): sync 152-160
# req/s saturated vs gthread 129-142, paced p99 33-34 vs 35-36 ms; gthread costs ~0.5 ms less CPU per
# call (no connection per request) but leaves part of a core idle. sync needs a buffering proxy in front
# (nginx's defaults: proxy_buffering and proxy_request_buffering on; PRODUCTION.md), so a slow client
# holds the proxy, not a worker: set GUNICORN_WORKER_CLASS=gthread where clients reach gunicorn directly.
worker_class = os.environ.get("GUNICORN_WORKER_CLASS", "sync")
# One bad request must not hold a worker for a minute (issue 13): the request deadline is
# REQUEST_DEADLINE seconds. The database cancels any statement that runs longer (set here, before
# the app loads, so only web processes get it), regex keys run under a per-turn time budget
# (retrieval.engine.regex_budget), request lists are counted before they are processed, and a
# worker that still stops answering is killed and replaced after ``timeout``.
REQUEST_DEADLINE = int(os.environ.get("REQUEST_DEADLINE", 15))
os.environ.setdefault("DATABASE_STATEMENT_TIMEOUT_MS", str(REQUEST_DEADLINE * 1000))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", REQUEST_DEADLINE + 5))
graceful_timeout = 15
keepalive = 5
# The longest request line gunicorn reads (its maximum): what nginx lets through (one 8 KiB header
# buffer, deploy/nginx/loreweave-proxy.conf) also passes here, so over-long lines are refused by the
# proxy with its JSON 414. Header fields keep gunicorn's limits (100 fields of 8190 bytes).
limit_request_line = 8190
max_requests = 5000
max_requests_jitter = 500
# "-" logs requests to stdout; "off" turns the access log off (benchmarks).
accesslog = None if os.environ.get("GUNICORN_ACCESS_LOG") == "off" else os.environ.get("GUNICORN_ACCESS_LOG", "-")
errorlog = "-"
# Load the app before forking so compiled matchers and models are shared copy-on-write.
preload_app = True


def when_ready(server):  # noqa: ANN001, ANN201 (gunicorn hook)
    """In the master, after the app is loaded and before workers fork: load what every worker needs."""
    if preload_app:
        from config.warm import process_warm

        loaded = process_warm()
        server.log.info("warm: tokenizers loaded before fork: %s", ", ".join(loaded) or "none")
        # What the master loaded lives as long as the workers: keep the collector off it, so
        # full collections stay short and do not dirty the pages the workers share.
        import gc

        gc.collect()
        gc.freeze()


# --- gunicorn's own refusals as JSON (issue 26.6) --------------------------------------------------
# A request gunicorn cannot parse (request line or headers too long, malformed) never reaches Django:
# gunicorn answers it itself with a small HTML page that echoes part of the request. Answer it as the
# API answers every error instead, {"error": {"code", "message"}}, without echoing what was sent.
# gunicorn offers no hook for this; it writes these answers through gunicorn.util.write_error, looked
# up at call time, so replacing that function here (the config is read in the master, before the
# workers fork) covers every worker class.
_GUNICORN_ERRORS = {
    400: ("bad_request", "The request could not be read (malformed request line or headers)."),
    403: ("forbidden", "Request forbidden."),
    414: ("uri_too_long", "The request line is too long."),
    417: ("expectation_failed", "The Expect header is not supported."),
    431: ("headers_too_large", "Too many headers, or a header too long."),
    500: ("internal_error", "The server could not answer this request."),
    501: ("not_implemented", "This transfer coding is not supported."),
}


def _write_json_error(sock: "socket.socket", status_int: int, reason: str, mesg: str) -> None:
    """gunicorn.util.write_error's signature; ``mesg`` (which quotes the request) is left out on purpose."""
    from gunicorn import util

    code, message = _GUNICORN_ERRORS.get(status_int, ("bad_request", "The request could not be read."))
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode("latin1")
    util.write_nonblock(sock, head + body)


def _json_errors() -> None:
    from gunicorn import util

    util.write_error = _write_json_error


_json_errors()
