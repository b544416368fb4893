"""Token counting (C-14): the model's own tokenizer, offline; a labelled estimate otherwise."""
from __future__ import annotations

import pytest

from retrieval.engine.tokenizers import (
    CharsPerTokenTokenizer,
    EstimateTokenizer,
    Tokenizer,
    UnknownTokenizerError,
    input_window_for,
    model_lookup,
    tokenizer_by_name,
    tokenizer_for,
)

SAMPLES = [
    "Hello world, this is a simple English sentence about dragons.",
    "La marea roja tiñe los cascos de los barcos; ¿quién hundió el Albatros?",
    "星見塔は島でいちばん高い塔で、夜ごとに鐘が鳴る。",
    "斗罗大陆是一片神奇的大陆，以天斗帝国和星罗帝国两大帝国为势力分布。",
    "서울에서 만나요. 오늘 날씨가 좋네요.",
    "Это предложение на русском языке о драконах и замках.",
    "def f(x): return {'a': [1, 2, 3]}  # 12345678901234567890",
    "🙂🐉🔥 emoji heavy 🙂🐉🔥",
    "ﾃｽﾄ ＡＢＣ ｶﾀﾅ",
    "| Ajuste | Rango | Efecto |\n|---|---|---|\n\n\n\t\t",
    "{{char}} vigila el muelle para {{user}}. <|endoftext|>",
    "a" * 69,
]
BUNDLED = ["cl100k_base", "o200k_base", "llama3", "qwen3"]


def test_ceil_chars_4_is_the_conformance_counter() -> None:
    counter = tokenizer_by_name("ceil-chars-4")
    assert [counter.count(t) for t in ["", "a", "abcd", "abcde", "星見塔"]] == [0, 1, 1, 2, 1]
    assert counter.name == "ceil-chars-4" and not counter.is_estimate


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_tokenizers_count_offline(name: str) -> None:
    tokenizer = tokenizer_by_name(name)
    assert isinstance(tokenizer, Tokenizer)
    assert tokenizer.count("hello world") == 2
    assert not tokenizer.is_estimate and tokenizer.name == name
    # special-token text in lore is counted as plain text, never refused
    assert tokenizer.count("<|endoftext|>") > 1


def test_families_really_differ_so_the_budget_follows_the_model() -> None:
    text = "def f(x): return 12345678901234567890"
    counts = {name: tokenizer_by_name(name).count(text) for name in BUNDLED}
    assert counts["qwen3"] > counts["cl100k_base"]  # Qwen splits every digit


def test_cl100k_matches_tiktokens_documented_example() -> None:
    import quicktok  # type: ignore[import-untyped]

    # tiktoken's README: cl100k_base encodes "tiktoken is great!" as these ids.
    assert quicktok.get_encoding("cl100k_base").encode("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]
    assert tokenizer_by_name("cl100k_base").count("tiktoken is great!") == 6


@pytest.mark.parametrize(
    ("model_id", "tokenizer", "window"),
    [
        ("gpt-4o", "o200k_base", 128_000),
        ("openai/gpt-4o-mini-2024-07-18", "o200k_base", 128_000),
        ("gpt-4.1-mini", "o200k_base", 1_047_576),
        ("gpt-4", "cl100k_base", 8_192),
        ("gpt-4-turbo-2024-04-09", "cl100k_base", 128_000),
        ("gpt-3.5-turbo", "cl100k_base", 16_385),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3", 131_072),
        ("meta-llama/Meta-Llama-3-8B", "llama3", 8_192),
        ("Qwen/Qwen3-8B", "qwen3", 32_768),
        ("qwen2.5-72b-instruct", "qwen3", 32_768),
        ("gpt-oss-20b", "o200k_harmony", 131_072),
    ],
)
def test_model_registry_picks_tokenizer_and_window(model_id: str, tokenizer: str, window: int) -> None:
    spec = model_lookup(model_id)
    assert (spec.tokenizer, spec.input_window) == (tokenizer, window)
    assert tokenizer_for(model_id).name == tokenizer
    assert input_window_for(model_id) == window


@pytest.mark.parametrize("model_id", ["gemma-2-9b-it", "claude-3-5-sonnet", "mistral-large", "", None, "gpt4o"])
def test_unknown_families_get_a_labelled_estimate(model_id: str | None) -> None:
    tokenizer = tokenizer_for(model_id)
    assert tokenizer.is_estimate and tokenizer.name == "estimate"
    assert input_window_for(model_id) is None


def test_explicit_tokenizer_name_wins_over_the_model() -> None:
    assert tokenizer_for("gpt-4o", tokenizer="ceil-chars-4").name == "ceil-chars-4"


def test_unknown_tokenizer_name_is_refused() -> None:
    with pytest.raises(UnknownTokenizerError):
        tokenizer_by_name("gemma")
    with pytest.raises(UnknownTokenizerError):
        tokenizer_by_name("ceil-chars-0")


@pytest.mark.parametrize("name", BUNDLED)
def test_estimate_never_undercounts_the_bundled_families(name: str) -> None:
    real = tokenizer_by_name(name)
    estimate = EstimateTokenizer()
    for text in SAMPLES:
        assert estimate.count(text) >= real.count(text), (name, text)


def test_estimate_is_not_absurd_for_plain_prose() -> None:
    text = SAMPLES[0] * 10
    assert EstimateTokenizer().count(text) <= 3 * tokenizer_by_name("cl100k_base").count(text)
    assert EstimateTokenizer().count("") == 0 and EstimateTokenizer().count(" ") == 1


def test_tokenizers_are_shared_instances() -> None:
    assert tokenizer_by_name("cl100k") is tokenizer_by_name("cl100k_base")
    assert CharsPerTokenTokenizer(chars_per_token=3).count("abcdefg") == 3
