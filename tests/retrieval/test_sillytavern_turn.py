"""The sillytavern profile as one engine turn: rolls follow the chat's seed, not the process (issue 31)."""
from __future__ import annotations

import random
import subprocess
import sys

import pytest

from retrieval.engine import assemble, values as ev
from retrieval.engine.sillytavern import book_from_st_json
from retrieval.engine.tokenizers import tokenizer_for
from tests.shared_data import REPO_ROOT


def _group_book(members: int = 12) -> ev.Book:
    entries = [
        {"uid": uid, "key": ["gate"], "content": f"Guard {uid}.", "order": 100, "position": 0, "selective": True,
         "group": "guards", "groupWeight": 100, "probability": 100, "useProbability": True}
        for uid in range(members)
    ]
    return ev.Book(id="b", name="b", version=1, world_info=book_from_st_json(entries, world="b"))


def _winner(seed: str, turn: int | None = None) -> list[str]:
    request = ev.TurnRequest(profile="sillytavern", books=(_group_book(),),
                             chat=(ev.Message(role="user", text="At the gate."),), seed=seed, turn=turn)
    selection = assemble(request, tokenizer=tokenizer_for(None, tokenizer="ceil-chars-4"))
    return [i.entry for i in selection.injections]


def test_group_roll_comes_from_the_seed_not_the_process_random(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_global_random() -> float:
        raise AssertionError("the sillytavern profile used the process's random state")

    monkeypatch.setattr(random, "random", no_global_random)
    first = _winner("chat-7")
    assert len(first) == 1
    assert _winner("chat-7") == first  # same chat, same turn: same pick
    assert len({tuple(_winner(f"chat-{n}")) for n in range(20)}) > 1  # other chats roll otherwise


def test_same_seed_same_pick_in_another_process() -> None:
    code = (
        "from tests.retrieval.test_sillytavern_turn import _winner; print(_winner('chat-7', 3))"
    )
    picks = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT,
                       env={"PYTHONHASHSEED": seed, "PATH": ""}, timeout=120).stdout.strip()
        for seed in ("0", "1", "99")
    }
    assert picks == {str(_winner("chat-7", 3))}
