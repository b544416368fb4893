"""Helpers for retrieval tests: the real model once per process, and a call counter.

The real embedder is a process-wide singleton (``embedder_get``), so every test
module shares one model load. ``CountingEmbedder`` wraps it to count what is
embedded, or to pose as another model (``name=``) for re-index tests.
"""
from __future__ import annotations

from collections.abc import Sequence

from retrieval.adapter.embedders import DEFAULT_EMBEDDER, embedder_get
from retrieval.engine.embeddings import Embedder, Vector


def real_embedder() -> Embedder:
    return embedder_get(DEFAULT_EMBEDDER)


class CountingEmbedder:
    def __init__(self, inner: Embedder, *, name: str | None = None, fail: bool = False) -> None:
        self.inner = inner
        self.name = name or inner.name
        self.dimension = inner.dimension
        self.fail = fail
        self.calls: list[tuple[str, list[str]]] = []

    @property
    def texts(self) -> list[str]:
        return [text for _, batch in self.calls for text in batch]

    def reset(self) -> None:
        self.calls.clear()

    def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        self.calls.append(("passage", list(texts)))
        if self.fail:
            raise RuntimeError("model crashed")
        return self.inner.embed_passages(texts)

    def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        self.calls.append(("query", list(texts)))
        if self.fail:
            raise RuntimeError("model crashed")
        return self.inner.embed_queries(texts)
