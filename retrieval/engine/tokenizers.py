"""Token counting with the active model's tokenizer (C-14).

The budget must reflect what the model really sees, so each request counts with
the tokenizer of its model family, offline:

* ``cl100k_base``, ``o200k_base``, ``o200k_harmony``, ``llama3``, ``qwen3``:
  exact BPE counts from the bundled vocabularies of ``quicktok-v1`` (ids equal
  to tiktoken's for the OpenAI encodings), loaded lazily and shared.
* ``ceil-chars-4``: ``ceil(characters / 4)``, the deterministic counter the
  conformance cases use.
* ``estimate``: for model families with no bundled tokenizer (Gemma, Claude,
  Mistral, ...): a deliberately high estimate, labelled ``is_estimate`` so the
  request log and the editor can say so. Overcounting only trims lore early;
  undercounting would overflow the model's window.

:func:`model_lookup` maps a model id to its tokenizer and input window through
a small registry; :func:`tokenizer_for` returns the :class:`Tokenizer` port.
"""
from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .matching import TextCache
from .rules import SMART

__all__ = [
    "MODEL_REGISTRY",
    "CharsPerTokenTokenizer",
    "EstimateTokenizer",
    "ModelSpec",
    "QuicktokTokenizer",
    "Tokenizer",
    "UnknownTokenizerError",
    "input_window_for",
    "model_lookup",
    "tokenizer_by_name",
    "tokenizer_for",
]


@runtime_checkable
class Tokenizer(Protocol):
    """Port: counts the tokens a model would see for a text."""

    @property
    def name(self) -> str: ...

    @property
    def is_estimate(self) -> bool: ...

    def count(self, text: str) -> int: ...


class UnknownTokenizerError(ValueError):
    """A tokenizer name that is neither bundled nor a known counter."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CharsPerTokenTokenizer:
    """``ceil(len(text) / chars_per_token)`` over Unicode code points."""

    chars_per_token: int = 4

    @property
    def name(self) -> str:
        return f"ceil-chars-{self.chars_per_token}"

    @property
    def is_estimate(self) -> bool:
        return False  # a declared counting rule, not a guess at a model

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)


_PIECE = re.compile(r"[^\W\d_]+|\d|\s+|.", re.DOTALL)


def _width_form(ch: str) -> bool:
    return "\uff00" <= ch <= "\uffef"


@dataclass(frozen=True, kw_only=True, slots=True)
class EstimateTokenizer:
    """Conservative estimate for models without a bundled tokenizer.

    Text is cut the way byte-level BPE pre-tokenisers cut it (letter runs,
    single digits, whitespace runs, single symbols) and each piece is charged
    generously: 3 ASCII letters per token, 1.5 tokens per other letter (2 for
    full-width and half-width forms), one per digit and per ASCII symbol, the
    UTF-8 byte count for other symbols (emoji), a quarter per single space and
    half per character of other whitespace. Calibrated on 751 lore texts
    (English, Spanish, Chinese, Japanese, Korean, Russian, code, emoji): it
    never undercounted cl100k, o200k, Llama 3 or Qwen 3 and overcounts by
    about 1.8x on average. Overcounting only trims lore early; undercounting
    would overflow the model's window.
    """

    @property
    def name(self) -> str:
        return "estimate"

    @property
    def is_estimate(self) -> bool:
        return True

    def count(self, text: str) -> int:
        if not text:
            return 0
        total = 0.0
        for found in _PIECE.finditer(text):
            piece = found.group()
            first = piece[0]
            if first.isspace():
                total += 0.25 if piece == " " else len(piece) / 2
            elif first.isdigit():
                total += 1
            elif first.isalpha():
                other = [ch for ch in piece if not ch.isascii()]
                wide = sum(1 for ch in other if _width_form(ch))
                total += math.ceil((len(piece) - len(other)) / 3 + (len(other) - wide) * 1.5 + wide * 2)
            else:
                total += 1 if piece.isascii() else len(piece.encode("utf-8"))
        return max(1, math.ceil(total))


class QuicktokTokenizer:
    """Exact counts with a vocabulary bundled in ``quicktok-v1``; loads on first use."""

    __slots__ = ("_counted", "_encoding", "_lock", "encoding_name")

    def __init__(self, encoding_name: str) -> None:
        self.encoding_name = encoding_name
        self._encoding: Any = None
        self._lock = threading.Lock()
        # Entry contents are counted again every turn they activate: remember the counts.
        self._counted: TextCache[int] = TextCache(limit_chars=2_000_000)

    @property
    def name(self) -> str:
        return self.encoding_name

    @property
    def is_estimate(self) -> bool:
        return False

    def _load(self) -> Any:
        if self._encoding is None:
            with self._lock:
                if self._encoding is None:
                    # heavy vocabularies: load only when a request needs them
                    import quicktok  # type: ignore[import-untyped]

                    self._encoding = quicktok.get_encoding(self.encoding_name)
        return self._encoding

    def count(self, text: str) -> int:
        found = self._counted.get(text)
        if found is None:
            # ``count`` treats special-token text such as "<|endoftext|>" as
            # ordinary characters, which is how lore text reaches the model.
            found = int(self._load().count(text))
            self._counted.put(text, found)
        return found


BUNDLED_ENCODINGS = ("cl100k_base", "o200k_base", "o200k_harmony", "llama3", "qwen3")
_ALIASES = {"cl100k": "cl100k_base", "o200k": "o200k_base", "llama-3": "llama3", "qwen": "qwen3"}
_instances: dict[str, Tokenizer] = {}
_instances_lock = threading.Lock()


def tokenizer_by_name(name: str) -> Tokenizer:
    """A tokenizer by name: a bundled encoding, ``ceil-chars-N`` or ``estimate``."""
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    with _instances_lock:
        found = _instances.get(key)
        if found is not None:
            return found
        tokenizer: Tokenizer
        if key in BUNDLED_ENCODINGS:
            tokenizer = QuicktokTokenizer(key)
        elif key == "estimate":
            tokenizer = EstimateTokenizer()
        elif key.startswith("ceil-chars-") and key.removeprefix("ceil-chars-").isdigit():
            per = int(key.removeprefix("ceil-chars-"))
            if per < 1:
                raise UnknownTokenizerError(f"tokenizer {name!r}: characters per token must be at least 1")
            tokenizer = CharsPerTokenTokenizer(chars_per_token=per)
        else:
            raise UnknownTokenizerError(
                f"unknown tokenizer {name!r}; known: {', '.join(BUNDLED_ENCODINGS)}, ceil-chars-N, estimate"
            )
        _instances[key] = tokenizer
        return tokenizer


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    """What the registry knows about a model family."""

    prefix: str
    family: str
    tokenizer: str
    input_window: int


# Matched on the model id, lower-cased, without an "org/" prefix; the longest
# matching prefix wins. Windows are the documented input context sizes.
MODEL_REGISTRY: tuple[ModelSpec, ...] = (
    ModelSpec(prefix="gpt-4o", family="openai", tokenizer="o200k_base", input_window=128_000),
    ModelSpec(prefix="gpt-4.1", family="openai", tokenizer="o200k_base", input_window=1_047_576),
    ModelSpec(prefix="gpt-4.5", family="openai", tokenizer="o200k_base", input_window=128_000),
    ModelSpec(prefix="o1", family="openai", tokenizer="o200k_base", input_window=200_000),
    ModelSpec(prefix="o3", family="openai", tokenizer="o200k_base", input_window=200_000),
    ModelSpec(prefix="o4-mini", family="openai", tokenizer="o200k_base", input_window=200_000),
    ModelSpec(prefix="gpt-oss", family="openai", tokenizer="o200k_harmony", input_window=131_072),
    ModelSpec(prefix="gpt-4-turbo", family="openai", tokenizer="cl100k_base", input_window=128_000),
    ModelSpec(prefix="gpt-4", family="openai", tokenizer="cl100k_base", input_window=8_192),
    ModelSpec(prefix="gpt-3.5-turbo", family="openai", tokenizer="cl100k_base", input_window=16_385),
    ModelSpec(prefix="llama-3", family="llama3", tokenizer="llama3", input_window=8_192),
    ModelSpec(prefix="llama3", family="llama3", tokenizer="llama3", input_window=8_192),
    ModelSpec(prefix="meta-llama-3", family="llama3", tokenizer="llama3", input_window=8_192),
    ModelSpec(prefix="llama-3.1", family="llama3", tokenizer="llama3", input_window=131_072),
    ModelSpec(prefix="llama-3.2", family="llama3", tokenizer="llama3", input_window=131_072),
    ModelSpec(prefix="llama-3.3", family="llama3", tokenizer="llama3", input_window=131_072),
    ModelSpec(prefix="meta-llama-3.1", family="llama3", tokenizer="llama3", input_window=131_072),
    ModelSpec(prefix="qwen3", family="qwen", tokenizer="qwen3", input_window=32_768),
    ModelSpec(prefix="qwen2.5", family="qwen", tokenizer="qwen3", input_window=32_768),
    ModelSpec(prefix="qwen2", family="qwen", tokenizer="qwen3", input_window=32_768),
)
# A model the registry does not know gets the window the smart profile assumes when none is named.
UNKNOWN_MODEL = ModelSpec(prefix="", family="unknown", tokenizer="estimate", input_window=SMART.default_input_window)


def model_lookup(model_id: str | None) -> ModelSpec:
    """The registry entry for ``model_id``; :data:`UNKNOWN_MODEL` (an estimate) when none fits."""
    if not model_id:
        return UNKNOWN_MODEL
    name = model_id.strip().lower().rsplit("/", 1)[-1]
    best: ModelSpec | None = None
    for spec in MODEL_REGISTRY:
        fits = name == spec.prefix or name.startswith((spec.prefix + "-", spec.prefix + ".", spec.prefix + ":"))
        if fits and (best is None or len(spec.prefix) > len(best.prefix)):
            best = spec
    return best or UNKNOWN_MODEL


def tokenizer_for(model_id: str | None = None, *, tokenizer: str | None = None) -> Tokenizer:
    """The tokenizer for a request: an explicit name wins, else the model's family, else the estimate."""
    if tokenizer:
        return tokenizer_by_name(tokenizer)
    return tokenizer_by_name(model_lookup(model_id).tokenizer)


def input_window_for(model_id: str | None) -> int | None:
    """The model's input window from the registry; ``None`` for a model it does not know."""
    spec = model_lookup(model_id)
    return None if spec is UNKNOWN_MODEL else spec.input_window
