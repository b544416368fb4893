"""Load once, before gunicorn forks its workers, what every worker would load on its first turns.

Tokenizer vocabularies take 0.2–0.7 s each to load and tens of MB: loaded in
the master they are shared copy-on-write by every worker, and a worker
recycled after ``max_requests`` starts warm instead of making its first
callers wait.
"""
from __future__ import annotations

import importlib
import os

# Modules the context call imports lazily (they pull in heavier dependencies).
HOT_MODULES = (
    "cast.usage",
    "cast.tasks",
    "cast.turns",
    "retrieval.adapter.vector_store",
    "retrieval.adapter.lookup",
    "sharing.selectors",
)


def process_warm() -> list[str]:
    """Import the hot modules and load the tokenizers named by ``LOREWEAVE_PRELOAD_TOKENIZERS``
    (comma-separated; ``all``, the default, is every bundled vocabulary; empty loads none).
    Returns the tokenizers loaded."""
    from django.conf import settings
    from django.conf.urls.i18n import is_language_prefix_patterns_used

    from retrieval.engine.tokenizers import BUNDLED_ENCODINGS, tokenizer_by_name

    for module in HOT_MODULES:
        importlib.import_module(module)
    # The URLconf is imported on a process's first request (LocaleMiddleware asks whether any
    # pattern is language-prefixed): ~0.75 s of imports (the jobs views pull in the LLM client),
    # paid by every worker after each fork unless the master loads it here.
    is_language_prefix_patterns_used(settings.ROOT_URLCONF)
    wanted = os.environ.get("LOREWEAVE_PRELOAD_TOKENIZERS", "all").strip()
    names = list(BUNDLED_ENCODINGS) if wanted == "all" else [n.strip() for n in wanted.split(",") if n.strip()]
    for name in names:
        tokenizer_by_name(name).count("warm")
    return names
