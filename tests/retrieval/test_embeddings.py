"""Embedder port, vector helpers, in-process index and message cache (no database)."""
from __future__ import annotations

import numpy as np
import pytest

from retrieval.adapter.embedders import (
    DEFAULT_EMBEDDER,
    EMBEDDERS,
    UnknownEmbedder,
    UseMultilingualEmbedder,
    embedder_get,
    message_cache_get,
)
from retrieval.engine.embeddings import (
    Embedder,
    MemoryVectorIndex,
    MessageEmbeddingCache,
    batched,
    cosine,
    embed_batched,
    entry_passage_text,
    normalize,
    top_k,
    vectors_mean,
)
from tests.retrieval.embedding_helpers import CountingEmbedder, real_embedder

LORE = {
    "forge": "Ashenveil is a fortress city built inside the crater of an extinct volcano; its forges are fed by lava.",
    "pirates": "The Gilded Tide is a guild of sea merchants that secretly pays pirates to harass rival ships.",
    "oracle": "Mirelda is an old seer who gave up her eyes in exchange for visions of the future.",
    "forest": "In Thornwood Forest the trees move at night and travelers who leave the path vanish.",
    "plague": "The Crimson Plague turned the skin red and was spread by rats from the port twenty years ago.",
}


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return real_embedder()


# --- the real model ------------------------------------------------------------------


def test_default_embedder_is_the_bundled_use_model(embedder):
    assert embedder.name == DEFAULT_EMBEDDER == "use-multilingual-v3"
    assert embedder.dimension == 512
    assert isinstance(embedder, Embedder)
    assert embedder_get() is embedder_get(DEFAULT_EMBEDDER)  # one instance (one model load) per process
    [vector] = embedder.embed_passages(["The dragon sleeps under the frozen lake."])
    assert vector.dtype == np.float32 and vector.shape == (512,)
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-4)


def test_unknown_embedder_name_is_refused():
    with pytest.raises(UnknownEmbedder):
        embedder_get("no-such-model")
    assert set(EMBEDDERS) >= {"use-multilingual-v3"}


def test_cross_lingual_nearest_neighbour(embedder):
    ids = list(LORE)
    index = MemoryVectorIndex.from_items(512, zip(range(len(ids)), embedder.embed_passages(list(LORE.values()))))
    queries = {
        "oracle": "¿Quién es la anciana que perdió la vista a cambio de ver el porvenir?",
        "pirates": "¿Qué gremio de comerciantes soborna a piratas para atacar a sus rivales?",
        "forest": "Háblame del bosque donde los árboles caminan de noche.",
        "plague": "¿Qué epidemia traída por roedores volvía roja la piel?",
    }
    for target, vector in zip(queries, embedder.embed_queries(list(queries.values()))):
        [(best, score)] = index.nearest(vector, 1)
        assert ids[best] == target, (target, ids[best], score)


def test_batching_equals_one_by_one(embedder):
    texts = [*LORE.values(), "Hola, ¿qué tal?", "x", "A much longer message. " * 40]
    batched_embedder = UseMultilingualEmbedder(batch_size=3)
    batched_embedder._model = embedder._model  # share the loaded weights: this tests the batching, not a reload
    together = batched_embedder.embed_passages(texts)
    alone = [embedder.embed_passages([text])[0] for text in texts]
    assert len(together) == len(texts)
    for a, b in zip(together, alone):
        np.testing.assert_allclose(a, b, atol=1e-5)


# --- batching and vector helpers -------------------------------------------------------


def test_batched_splits_in_order():
    assert list(batched(range(7), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(batched([], 3)) == []
    with pytest.raises(ValueError):
        list(batched([1], 0))


def test_embed_batched_checks_what_the_model_returns():
    calls = []

    def fake(batch):
        calls.append(len(batch))
        return np.ones((len(batch), 4), dtype=np.float32)

    out = embed_batched(fake, ["a"] * 5, batch_size=2, dimension=4)
    assert calls == [2, 2, 1] and len(out) == 5
    assert np.linalg.norm(out[0]) == pytest.approx(1.0)  # normalised
    with pytest.raises(ValueError, match="dimension"):
        embed_batched(fake, ["a"], dimension=8)
    with pytest.raises(ValueError, match="shape"):
        embed_batched(lambda batch: np.ones((1, 4)), ["a", "b"])


def test_cosine_and_mean_helpers():
    a, b = np.array([1, 0], dtype=np.float32), np.array([0, 2], dtype=np.float32)
    assert cosine(a, a) == pytest.approx(1.0)
    assert cosine(a, b) == pytest.approx(0.0)
    assert cosine(a, np.zeros(2, dtype=np.float32)) == 0.0
    mean = vectors_mean([a, b])
    np.testing.assert_allclose(mean, normalize(np.array([1, 1], dtype=np.float32)), atol=1e-6)
    weighted = vectors_mean([a, b], weights=[3, 1])
    assert weighted[0] > weighted[1]
    with pytest.raises(ValueError):
        vectors_mean([])


def test_top_k_orders_by_score_then_index():
    scores = np.array([0.1, 0.9, 0.5, 0.9, 0.3], dtype=np.float32)
    assert top_k(scores, 3).tolist() == [1, 3, 2]
    assert top_k(scores, 10).tolist() == [1, 3, 2, 4, 0]
    assert top_k(scores, 0).tolist() == []


def test_entry_passage_text_includes_title_and_aliases():
    assert entry_passage_text("Frostmere", "A frozen lake.", ["the Lake", ""]) == "Frostmere (the Lake)\nA frozen lake."
    assert entry_passage_text("", "Only lore.") == "Only lore."
    assert len(entry_passage_text("T", "x" * 50_000)) == 8000


# --- in-process index ----------------------------------------------------------------------


def _unit(*values: float) -> np.ndarray:
    return normalize(np.array(values, dtype=np.float32))


def test_memory_index_top_k_and_filters():
    index = MemoryVectorIndex.from_items(
        3, [(10, _unit(1, 0, 0)), (11, _unit(0.9, 0.1, 0)), (12, _unit(0, 1, 0)), (13, _unit(0, 0, 1))]
    )
    query = _unit(1, 0.05, 0)
    assert [i for i, _ in index.nearest(query, 2)] == [10, 11]
    assert [i for i, _ in index.nearest(query, 2, excluded_ids={10})] == [11, 12]
    assert [i for i, _ in index.nearest(query, 5, allowed_ids={12, 13})] == [12, 13]
    assert index.nearest(query, 2, allowed_ids=set()) == []
    [(best, score)] = index.nearest(query, 1)
    assert best == 10 and score == pytest.approx(cosine(query, _unit(1, 0, 0)), abs=1e-6)
    with pytest.raises(ValueError):
        index.nearest(_unit(1, 0), 1)


def test_memory_index_replace_and_remove():
    index = MemoryVectorIndex.from_items(2, [(1, _unit(1, 0)), (2, _unit(0, 1))])
    index.add([1], [_unit(0, 1)])  # replaced, not duplicated
    assert len(index) == 2 and sorted(index.ids) == [1, 2]
    np.testing.assert_allclose(index.vector(1), _unit(0, 1))
    index.remove([2])
    assert index.ids == [1] and 2 not in index
    assert MemoryVectorIndex(2).nearest(_unit(1, 0), 3) == []


# --- message cache ---------------------------------------------------------------------------


def test_message_cache_embeds_only_new_messages(embedder):
    counting = CountingEmbedder(embedder)
    cache = MessageEmbeddingCache(max_items=100)
    window = [f"message number {i} about the dragon" for i in range(6)]
    first = cache.embed_queries(counting, window)
    assert counting.texts == window
    counting.reset()

    # Next turn: the window slides by one message; only the new one is embedded.
    next_window = window[1:] + ["and now a brand new message"]
    second = cache.embed_queries(counting, next_window)
    assert counting.texts == ["and now a brand new message"]
    assert len(counting.calls) == 1
    for a, b in zip(first[1:], second[:5]):
        np.testing.assert_array_equal(a, b)
    counting.reset()

    # Same window again: no call at all.
    cache.embed_queries(counting, next_window)
    assert counting.calls == []
    assert cache.hits == 5 + 6 and cache.misses == 7


def test_message_cache_keys_on_model_and_deduplicates(embedder):
    cache = MessageEmbeddingCache()
    one = CountingEmbedder(embedder, name="model-one")
    two = CountingEmbedder(embedder, name="model-two")
    cache.embed_queries(one, ["hello", "hello"])
    assert one.texts == ["hello"]  # equal texts in one window are embedded once
    cache.embed_queries(two, ["hello"])
    assert two.texts == ["hello"]  # another model never gets model-one's vector


def test_message_cache_is_bounded_lru(embedder):
    counting = CountingEmbedder(embedder)
    cache = MessageEmbeddingCache(max_items=2)
    cache.embed_queries(counting, ["a"])
    cache.embed_queries(counting, ["b"])
    cache.embed_queries(counting, ["a"])  # touch a: b is now the oldest
    cache.embed_queries(counting, ["c"])  # evicts b
    assert len(cache) == 2
    counting.reset()
    cache.embed_queries(counting, ["a", "b", "c"])
    assert counting.texts == ["b"]


def test_process_wide_message_cache(embedder):
    cache = message_cache_get()
    assert cache is message_cache_get() and cache.max_items >= 1000
    first = cache.embed_queries(embedder, ["a message seen in an earlier turn"])
    again = cache.embed_queries(CountingEmbedder(embedder, fail=True), ["a message seen in an earlier turn"])
    np.testing.assert_array_equal(first[0], again[0])


class DictStore:
    """What every web process shares (the platform's cache), as a dict."""

    def __init__(self, *, fail: bool = False) -> None:
        self.values: dict[str, bytes] = {}
        self.fail = fail

    def get_many(self, keys):
        if self.fail:
            raise ConnectionError("the shared cache is down")
        return {k: self.values[k] for k in keys if k in self.values}

    def set_many(self, values):
        if self.fail:
            raise ConnectionError("the shared cache is down")
        self.values.update(values)


def test_a_message_another_process_embedded_is_not_embedded_again(embedder):
    """A chat's turns land on any web process: the window's older messages were embedded by
    another one, and are read from the shared store, not embedded once more."""
    store = DictStore()
    one, two = MessageEmbeddingCache(shared=store), MessageEmbeddingCache(shared=store)
    window = [f"message {i} about the lighthouse keeper" for i in range(6)]
    first = one.embed_queries(embedder, window)
    counting = CountingEmbedder(embedder)
    second = two.embed_queries(counting, [*window[2:], "a new message", "and the reply"])
    assert counting.texts == ["a new message", "and the reply"]
    for a, b in zip(first[2:], second[:4]):
        np.testing.assert_array_equal(a, b)
    counting.reset()
    two.embed_queries(counting, window[2:])  # now in this process's own cache too
    assert counting.calls == [] and len(store.values) == 8


def test_a_failing_shared_store_only_costs_an_embedding(embedder):
    cache = MessageEmbeddingCache(shared=DictStore(fail=True))
    counting = CountingEmbedder(embedder)
    [vector] = cache.embed_queries(counting, ["the store is down"])
    assert counting.texts == ["the store is down"] and vector.shape == (embedder.dimension,)


@pytest.mark.django_db
def test_the_process_cache_shares_through_the_platform_cache(embedder):
    """The deployment's cache (Redis in production, this process's memory in the embedded
    default) holds the vectors: a process that never saw a message reads it from there."""
    from retrieval.adapter.embedders import DjangoCacheVectorStore

    text = "a message the other web process embedded"
    message_cache_get().embed_queries(embedder, [text])
    elsewhere = MessageEmbeddingCache(shared=DjangoCacheVectorStore())
    [vector] = elsewhere.embed_queries(CountingEmbedder(embedder, fail=True), [text])
    np.testing.assert_array_equal(vector, message_cache_get().embed_queries(embedder, [text])[0])


def test_cached_vectors_are_read_only(embedder):
    cache = MessageEmbeddingCache()
    [vector] = cache.embed_queries(embedder, ["do not mutate me"])
    with pytest.raises(ValueError):
        vector[0] = 1.0
