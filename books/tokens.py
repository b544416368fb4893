"""Token counts for the editor (canon meter, long-entry warning), as the engine counts them.

C-14: the active model's tokenizer. The engine's registry
(``retrieval/engine/tokenizers.py``) maps a model id to its tokenizer and input
window; for a model it does not know it gives its deliberately high estimate,
so the editor never promises more room than the live selection will find.
"""
from __future__ import annotations

import math

from lore_platform.errors import ValidationFailed
from retrieval.engine.tokenizers import Tokenizer, UnknownTokenizerError, input_window_for, tokenizer_for

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """``ceil(chars / 4)``: the plain rule, for callers that name no model."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def model_tokenizer(model_id: str | None, tokenizer: str | None = None) -> Tokenizer:
    """The tokenizer the engine uses for ``model_id`` (its estimate for unknown models).

    A ``tokenizer`` name (``o200k_base``, ``ceil-chars-4`` …) wins, as in the context call (P-7).
    """
    try:
        return tokenizer_for(model_id or None, tokenizer=tokenizer or None)
    except UnknownTokenizerError as exc:
        raise ValidationFailed(str(exc), field="tokenizer", rule="C-14") from None


def model_input_window(model_id: str | None) -> int | None:
    """The model's input window from the engine registry; None for a model it does not know."""
    return input_window_for(model_id or None)
