"""The WSGI app with per-step timing, for ``bench.context_load`` only: ``bench.timed_wsgi:application``.

Production serves ``config.wsgi`` and never imports this module, so the
hot path carries no timing code. Here the turn's steps are wrapped where
``cast.turns`` looks them up (its module globals) and every
response gets a ``Server-Timing`` header, in ms::

    Server-Timing: app;dur=12.1, gather;dur=0.9, turn;dur=3.2, engine;dur=2.6

``app`` is the whole Django request (middleware, view, encoding); ``turn`` is
``turn_run`` (loading books as engine values, the engine, labels); ``engine``
is ``retrieval.engine.assemble`` alone; ``gather`` is the chat's books; ``embed``
the smart window's embedding before the chat lock.
A gunicorn thread serves one request at a time, so a thread-local holds
the request's figures.
"""
from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from django.core.wsgi import get_wsgi_application  # noqa: E402

_django = get_wsgi_application()

from cast import turns  # noqa: E402  (after the app registry is ready)

_steps = threading.local()
STEPS = ("gather", "embed", "turn", "engine")


def _timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            figures = getattr(_steps, "figures", None)
            if figures is not None:
                figures[name] = figures.get(name, 0.0) + (time.perf_counter() - started) * 1000

    return wrapper


turns.chat_books_gather = _timed("gather", turns.chat_books_gather)  # type: ignore[assignment]
turns._meaning_for = _timed("embed", turns._meaning_for)  # type: ignore[assignment]
turns.turn_run = _timed("turn", turns.turn_run)  # type: ignore[assignment]
turns.assemble = _timed("engine", turns.assemble)  # type: ignore[assignment]


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    _steps.figures = {}
    started = time.perf_counter()
    captured: dict[str, Any] = {}

    def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        captured.update(status=status, headers=headers, exc_info=exc_info)
        return lambda data: None  # the write() callable; Django does not use it

    # Django's response is fully built when the view returns; the body is joined here
    # (answers are a few KB) so that the header can carry the whole request's time.
    body = b"".join(_django(environ, capture))
    figures = _steps.figures
    _steps.figures = None
    figures["app"] = (time.perf_counter() - started) * 1000
    timing = ", ".join(f"{name};dur={figures[name]:.2f}" for name in ("app", *STEPS) if name in figures)
    headers = [*captured["headers"], ("Server-Timing", timing)]
    if not any(name.lower() == "content-length" for name, _ in headers):
        headers.append(("Content-Length", str(len(body))))  # the load generator reads answers by length
    start_response(captured["status"], headers, captured["exc_info"])
    return [body]
