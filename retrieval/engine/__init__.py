"""The retrieval engine: plain Python, no Django.

It decides, for one chat turn, which lore reaches the model. The platform (and
the ``loreweave assemble`` command) builds a :class:`~.values.TurnRequest`,
picks a tokenizer (:func:`~.tokenizers.tokenizer_for`) and calls
:func:`assemble`; the result is a :class:`~.values.Selection` (injections,
world index, request log, the chat's new timed state).

Modules: ``values`` (engine values), ``matching`` (multi-key Aho-Corasick
matching), ``decorators`` (``@@`` lines), ``tokenizers`` (token counting),
``keyword`` / ``classic`` / ``server`` (the keyword profiles), ``smart``
(world books), ``sillytavern`` (SillyTavern 1.12.6 World Info; its turn is
``sillytavern.turn``), ``templates`` (prompt rendering), ``cases`` (the
conformance cases' format, which the CLI reads and writes). Every profile
exposes ``<profile>_assemble(request, *, tokenizer) -> Selection`` and is
reached through :func:`assemble`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .tokenizers import Tokenizer
from .values import Selection, TurnRequest

if TYPE_CHECKING:
    from .smart import MeaningSearch

__all__ = ["ProfileUnavailableError", "assemble"]


class ProfileUnavailableError(LookupError):
    """The request names a profile this installation has no engine for."""


def assemble(request: TurnRequest, *, tokenizer: Tokenizer, meaning: MeaningSearch | None = None) -> Selection:
    """Run one turn under the request's profile.

    ``meaning`` is the semantic-retrieval port of the smart profile (W-4);
    without it smart falls back to names plus list order (W-7). The
    ``sillytavern`` profile reads each book's ``world_info`` (SillyTavern's
    own entry values) instead of its ``entries``.
    """
    profile = request.profile
    if profile == "classic":
        from .classic import classic_assemble

        return classic_assemble(request, tokenizer=tokenizer)
    if profile == "server":
        from .server import server_assemble

        return server_assemble(request, tokenizer=tokenizer)
    if profile == "smart":
        from .smart import smart_assemble

        return smart_assemble(request, tokenizer=tokenizer, meaning=meaning)
    if profile == "sillytavern":
        from .sillytavern.turn import sillytavern_assemble

        return sillytavern_assemble(request, tokenizer=tokenizer)
    raise ProfileUnavailableError(f"profile {profile!r} has no engine here")
