"""The retrieval engine: plain Python, no Django.

It decides, for one chat turn, which lore reaches the model. The platform (and
the ``loreweave assemble`` command) builds a :class:`~.values.TurnRequest`,
picks a tokenizer (:func:`~.tokenizers.tokenizer_for`) and calls
:func:`assemble`; the result is a :class:`~.values.Selection` (injections,
world index, request log, the chat's new timed state).

Modules: ``values`` (engine values), ``matching`` (multi-key Aho-Corasick
matching), ``decorators`` (``@@`` lines), ``tokenizers`` (token counting),
``keyword`` / ``classic`` / ``server`` (the keyword profiles), ``cases``
(conformance cases). Profiles other than ``classic`` and ``server`` live in
their own modules, ``retrieval.engine.<profile>``, exposing
``<profile>_assemble(request, *, tokenizer) -> Selection``.
"""
from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import cast

from .tokenizers import Tokenizer
from .values import Selection, TurnRequest

__all__ = ["ProfileUnavailableError", "assemble"]


class ProfileUnavailableError(LookupError):
    """The request names a profile this installation has no engine for."""


def assemble(request: TurnRequest, *, tokenizer: Tokenizer) -> Selection:
    """Run one turn under the request's profile."""
    profile = request.profile
    if profile == "classic":
        from .classic import classic_assemble

        return classic_assemble(request, tokenizer=tokenizer)
    if profile == "server":
        from .server import server_assemble

        return server_assemble(request, tokenizer=tokenizer)
    try:
        module = import_module(f"{__name__}.{profile}")
        runner = getattr(module, f"{profile}_assemble")
    except (ModuleNotFoundError, AttributeError) as error:
        raise ProfileUnavailableError(f"profile {profile!r} is not available in this engine yet") from error
    return cast(Callable[..., Selection], runner)(request, tokenizer=tokenizer)
