"""Embeddings for smart retrieval: ports, vector helpers and in-process structures.

No Django here. The engine sees an :class:`Embedder` (text -> unit vectors) and a
:class:`VectorIndex` (nearest entries of some books); ``retrieval/adapter/embedders.py``
and ``retrieval/adapter/vector_store.py`` implement them on a real model and on the
database.

Vectors are 1-D ``float32`` numpy arrays. Embedders return them L2-normalised, so
cosine similarity is a dot product; the helpers normalise defensively anyway
because a port may be implemented by code we do not control.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]
Matrix = npt.NDArray[np.float32]

T = TypeVar("T")

# What an entry's vector is computed from; long entries are cut here because a
# sentence encoder averages over tokens (a 20,000-character entry embeds no better
# than its first pages) and embedding cost grows linearly with length.
PASSAGE_MAX_CHARS = 8000
DEFAULT_BATCH_SIZE = 64


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors of one fixed model.

    ``name`` identifies the model *and its weights*: it is stored with every
    vector, and a vector whose name differs from the configured embedder's is
    stale (re-indexed, never compared with this model's queries).
    """

    name: str
    dimension: int

    def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        """Vectors for documents (entries), in input order."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        """Vectors for queries (chat messages), in input order."""
        ...


class VectorIndex(Protocol):
    """Nearest entries by cosine similarity, as the smart selection asks for them."""

    def nearest(
        self,
        book_ids: Collection[int],
        query_vector: Vector,
        k: int,
        exclude_disabled: bool = True,
    ) -> list[tuple[int, float]]:
        """Up to ``k`` ``(entry_id, cosine similarity)`` pairs from ``book_ids``, best first.

        With ``exclude_disabled`` (the default, and what W-6 requires for anything
        that reaches a model) disabled entries are never returned.
        """
        ...


# --- text -------------------------------------------------------------------


def entry_passage_text(title: str, content: str, aliases: Sequence[str] = ()) -> str:
    """The text an entry is embedded from: title, aliases, then the lore itself.

    The indexer and the retrieval evaluation both use this, so what is measured
    is what runs.
    """
    head = title.strip()
    names = [a.strip() for a in aliases if a and a.strip()]
    if names:
        head = f"{head} ({', '.join(names)})" if head else ", ".join(names)
    body = content.strip()
    text = f"{head}\n{body}" if head and body else head or body
    return text[:PASSAGE_MAX_CHARS]


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- batching ---------------------------------------------------------------


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of at most ``size`` items."""
    if size < 1:
        raise ValueError("batch size must be at least 1")
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def embed_batched(
    embed: Callable[[list[str]], Matrix | Sequence[Vector]],
    texts: Sequence[str],
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dimension: int | None = None,
) -> list[Vector]:
    """Run ``embed`` over ``texts`` in batches; one unit ``float32`` vector per text.

    Bounds peak memory on large imports and lets a caller embed a whole book in
    one call. Checks the count (and dimension when given) of what comes back:
    a silent shape mismatch would corrupt the index.
    """
    out: list[Vector] = []
    for batch in batched(texts, batch_size):
        matrix = np.asarray(embed(batch), dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(batch):
            raise ValueError(f"embedder returned shape {matrix.shape} for {len(batch)} texts")
        if dimension is not None and matrix.shape[1] != dimension:
            raise ValueError(f"embedder returned dimension {matrix.shape[1]}, expected {dimension}")
        out.extend(normalize_rows(matrix))
    return out


# --- vector helpers ---------------------------------------------------------


def as_vector(values: Iterable[float] | npt.ArrayLike) -> Vector:
    """A 1-D float32 array (no copy when it already is one)."""
    vector = np.asarray(values, dtype=np.float32)
    if vector.ndim != 1:
        raise ValueError(f"a vector is 1-D, got shape {vector.shape}")
    return vector


def normalize(vector: Vector) -> Vector:
    """``vector`` scaled to unit length (a zero vector stays zero)."""
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:
        return vector.astype(np.float32, copy=True)
    return (vector / norm).astype(np.float32, copy=False)


def normalize_rows(matrix: Matrix) -> Matrix:
    norms: npt.NDArray[np.floating] = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    normalized: Matrix = (matrix / norms).astype(np.float32, copy=False)
    return normalized


def cosine(a: Vector, b: Vector) -> float:
    """Cosine similarity of two vectors (0.0 when either is zero)."""
    denominator = float(np.linalg.norm(a) * np.linalg.norm(b))
    if denominator == 0.0:
        return 0.0
    return float(np.dot(a, b) / denominator)


def cosine_many(matrix: Matrix, query: Vector) -> npt.NDArray[np.float32]:
    """Cosine similarity of every row of ``matrix`` with ``query``."""
    if matrix.shape[0] == 0:
        return np.zeros(0, dtype=np.float32)
    return (normalize_rows(matrix) @ normalize(query)).astype(np.float32, copy=False)


def vectors_mean(vectors: Sequence[Vector], weights: Sequence[float] | None = None) -> Vector:
    """Unit-length weighted mean of unit vectors: one query vector for a message window."""
    if not vectors:
        raise ValueError("vectors_mean() needs at least one vector")
    matrix = np.vstack([normalize(as_vector(v)) for v in vectors])
    w = np.ones(len(vectors), dtype=np.float32) if weights is None else np.asarray(weights, dtype=np.float32)
    if w.shape != (len(vectors),):
        raise ValueError("one weight per vector")
    return normalize((w[:, None] * matrix).sum(axis=0).astype(np.float32))


def top_k(scores: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.intp]:
    """Indices of the ``k`` highest scores, best first (ties: lower index first)."""
    n = scores.shape[0]
    if k <= 0 or n == 0:
        return np.zeros(0, dtype=np.intp)
    if k < n:
        candidates = np.argpartition(-scores, k - 1)[:k]
    else:
        candidates = np.arange(n)
    # lexsort's last key is primary: score descending, then index ascending.
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order]


# --- in-process index ---------------------------------------------------------


class MemoryVectorIndex:
    """Exact cosine top-k over a numpy matrix: the in-process index (SQLite, tests).

    Brute force is the right tool at book scale: 2,000 x 512 float32 is 4 MB and
    one matrix-vector product takes well under a millisecond.
    """

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self._ids = np.zeros(0, dtype=np.int64)
        self._matrix = np.zeros((0, dimension), dtype=np.float32)
        self._positions: dict[int, int] = {}

    @classmethod
    def from_items(cls, dimension: int, items: Iterable[tuple[int, Vector]]) -> MemoryVectorIndex:
        index = cls(dimension)
        pairs = list(items)
        if pairs:
            index.add([p[0] for p in pairs], [p[1] for p in pairs])
        return index

    def __len__(self) -> int:
        return int(self._ids.shape[0])

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._positions

    @property
    def ids(self) -> list[int]:
        return [int(i) for i in self._ids]

    def add(self, entry_ids: Sequence[int], vectors: Sequence[Vector]) -> None:
        """Add or replace the vectors of ``entry_ids``."""
        if len(entry_ids) != len(vectors):
            raise ValueError("one vector per entry id")
        if not entry_ids:
            return
        matrix = np.vstack([as_vector(v) for v in vectors])
        if matrix.shape[1] != self.dimension:
            raise ValueError(f"vectors have dimension {matrix.shape[1]}, index has {self.dimension}")
        matrix = normalize_rows(matrix)
        replaced = [i for i in entry_ids if i in self._positions]
        if replaced:
            self.remove(replaced)
        # Last write wins for ids repeated in one call.
        latest = {int(entry_id): row for row, entry_id in enumerate(entry_ids)}
        rows = list(latest.values())
        self._ids = np.concatenate([self._ids, np.fromiter(latest.keys(), dtype=np.int64, count=len(latest))])
        self._matrix = np.vstack([self._matrix, matrix[rows]])
        self._reindex_positions()

    def remove(self, entry_ids: Iterable[int]) -> None:
        drop = {int(i) for i in entry_ids}
        if not drop:
            return
        keep = ~np.isin(self._ids, np.fromiter(drop, dtype=np.int64, count=len(drop)))
        self._ids = self._ids[keep]
        self._matrix = self._matrix[keep]
        self._reindex_positions()

    def vector(self, entry_id: int) -> Vector | None:
        position = self._positions.get(entry_id)
        return None if position is None else self._matrix[position].copy()

    def nearest(
        self,
        query_vector: Vector,
        k: int,
        *,
        allowed_ids: Collection[int] | None = None,
        excluded_ids: Collection[int] | None = None,
    ) -> list[tuple[int, float]]:
        """Up to ``k`` ``(entry_id, cosine)`` pairs, best first.

        ``allowed_ids`` keeps only those entries (``None``: all); ``excluded_ids``
        drops entries (disabled ones, already-selected ones).
        """
        query = as_vector(query_vector)
        if query.shape[0] != self.dimension:
            raise ValueError(f"query has dimension {query.shape[0]}, index has {self.dimension}")
        if k <= 0 or len(self) == 0:
            return []
        scores = self._matrix @ normalize(query)
        mask: npt.NDArray[np.bool_] | None = None
        if allowed_ids is not None:
            mask = np.isin(self._ids, np.fromiter((int(i) for i in allowed_ids), dtype=np.int64))
        if excluded_ids:
            drop = np.isin(self._ids, np.fromiter((int(i) for i in excluded_ids), dtype=np.int64))
            mask = ~drop if mask is None else mask & ~drop
        if mask is not None:
            candidates = np.flatnonzero(mask)
            picked = candidates[top_k(scores[candidates], k)]
        else:
            picked = top_k(scores, k)
        return [(int(self._ids[i]), float(scores[i])) for i in picked]

    def _reindex_positions(self) -> None:
        self._positions = {int(entry_id): position for position, entry_id in enumerate(self._ids)}


# --- message cache --------------------------------------------------------------


class SharedVectorStore(Protocol):
    """Message vectors kept where every process of the deployment finds them (a port: the
    platform's shared cache). A store that fails answers nothing and keeps nothing: the cache
    then embeds as if it were empty, it never fails the turn."""

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]: ...

    def set_many(self, values: dict[str, bytes]) -> None: ...


class MessageEmbeddingCache:
    """Bounded LRU of message vectors, so a turn embeds only the messages it has not seen.

    Keyed by (model name, kind, sha256 of the text): a model change never serves
    another model's vector, and equal texts share one entry whoever sent them.
    Thread-safe; the embedder is called outside the lock with the misses only.

    With a ``shared`` store, a vector another process embedded is read from there (one
    round trip for a turn's misses) instead of embedded again: a chat's turns land on any
    of the web processes, and each used to embed the window's older messages once more.
    """

    def __init__(self, max_items: int = 4096, *, shared: SharedVectorStore | None = None) -> None:
        if max_items < 1:
            raise ValueError("max_items must be at least 1")
        self.max_items = max_items
        self.shared = shared
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[tuple[str, str, str], Vector] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0

    def embed_queries(self, embedder: Embedder, texts: Sequence[str]) -> list[Vector]:
        """Query vectors for ``texts`` in order, embedding only cache misses (in one call)."""
        return self._embed(embedder, texts, "query")

    def embed_passages(self, embedder: Embedder, texts: Sequence[str]) -> list[Vector]:
        """Passage vectors for ``texts`` in order (for callers that embed messages as passages)."""
        return self._embed(embedder, texts, "passage")

    def _embed(self, embedder: Embedder, texts: Sequence[str], kind: str) -> list[Vector]:
        keys = [(embedder.name, kind, text_sha256(text)) for text in texts]
        found: dict[tuple[str, str, str], Vector] = {}
        with self._lock:
            for key in keys:
                vector = self._items.get(key)
                if vector is not None:
                    self._items.move_to_end(key)
                    found[key] = vector
        missing: dict[tuple[str, str, str], str] = {}
        for key, text in zip(keys, texts):
            if key not in found and key not in missing:
                missing[key] = text
        if missing and self.shared is not None:
            fetched = self._shared_get(list(missing))
            for key in fetched:
                del missing[key]
            found.update(fetched)
            self._keep(fetched)
        with self._lock:
            self.hits += sum(1 for key in keys if key in found)
            self.misses += len(missing)
        if missing:
            embed = embedder.embed_queries if kind == "query" else embedder.embed_passages
            vectors = embed(list(missing.values()))
            if len(vectors) != len(missing):
                raise ValueError(f"embedder returned {len(vectors)} vectors for {len(missing)} texts")
            embedded = {key: as_vector(vector) for key, vector in zip(missing, vectors)}
            self._keep(embedded)
            found.update(embedded)
            if self.shared is not None:
                self._shared_set(embedded)
        return [found[key] for key in keys]

    def _keep(self, vectors: dict[tuple[str, str, str], Vector]) -> None:
        with self._lock:
            for key, vector in vectors.items():
                vector.setflags(write=False)  # shared between turns: nobody may mutate it
                self._items[key] = vector
                self._items.move_to_end(key)
            while len(self._items) > self.max_items:
                self._items.popitem(last=False)

    @staticmethod
    def _shared_key(key: tuple[str, str, str]) -> str:
        return "message-vector:" + ":".join(key)

    def _shared_get(self, keys: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], Vector]:
        assert self.shared is not None
        names = {self._shared_key(key): key for key in keys}
        try:
            stored = self.shared.get_many(list(names))
        except Exception:  # noqa: BLE001 — a failing store is an empty one (see SharedVectorStore)
            return {}
        found = {}
        for name, data in stored.items():
            key = names.get(name)
            if key is not None and isinstance(data, bytes) and len(data) % 4 == 0 and data:
                found[key] = np.frombuffer(data, dtype=np.float32).copy()
        return found

    def _shared_set(self, vectors: dict[tuple[str, str, str], Vector]) -> None:
        assert self.shared is not None
        try:
            self.shared.set_many({self._shared_key(key): vector.astype(np.float32).tobytes()
                                  for key, vector in vectors.items()})
        except Exception:  # noqa: BLE001 — not kept: another process embeds it again, nothing worse
            return
