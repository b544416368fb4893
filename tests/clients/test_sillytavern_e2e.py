"""Loreweave inside SillyTavern 1.18.0, as a user would meet it (issue 32).

The real SillyTavern (../shared/peers, copied, `npm ci`, `node server.js`) with our extension
installed, a local OpenAI-compatible model server that records every prompt, and Loreweave live on
its embedded default with a SillyTavern World Info book and SillyTavern's origin allowed. Chatting
in SillyTavern, the prompt the model receives holds the book's lore where SillyTavern puts World
Info (before and after the character definitions, at depth) for a normal turn, a continue and a
swipe, Loreweave logs each turn, the panel says when the origin is not allowed or the key is wrong, and a
stopped Loreweave leaves the chat working with one toast saying why.

Marked `contract`: it starts its own servers, so it runs once, in the first pass.
"""
from __future__ import annotations

import json
import shutil
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.clients.model_server import MODEL_ID, ModelServer, model_server
from tests.clients.sillytavern import PEER, SillyTavern, sillytavern
from tests.contract.live import LiveServer, live_server
from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, shot

pytestmark = [
    pytest.mark.contract,
    pytest.mark.skipif(not (PEER.exists() and Path(CHROMIUM).exists() and shutil.which("node") and shutil.which("npm")),
                       reason="needs ../shared/peers/sillytavern-1.18.0, Debian's Chromium, node and npm"),
]

BEFORE = "LORE-BEFORE: Vyraxes is a silver dragon asleep under Mount Ember."
AFTER = "LORE-AFTER: Vyraxes guards the Moon Lantern in its hoard."
DEPTH = "LORE-DEPTH: Whoever says the dragon's name wakes it."
UNRELATED = "LORE-UNRELATED: The river Sel floods every spring."

# A SillyTavern World Info file, as SillyTavern exports it: one entry per place.
WORLD_INFO = {"entries": {
    "0": {"uid": 0, "key": ["Vyraxes"], "keysecondary": [], "comment": "before", "content": BEFORE,
          "constant": False, "selective": True, "order": 100, "position": 0, "disable": False, "depth": 4, "role": 0},
    "1": {"uid": 1, "key": ["Vyraxes"], "keysecondary": [], "comment": "after", "content": AFTER,
          "constant": False, "selective": True, "order": 100, "position": 1, "disable": False, "depth": 4, "role": 0},
    "2": {"uid": 2, "key": ["Vyraxes"], "keysecondary": [], "comment": "depth", "content": DEPTH,
          "constant": False, "selective": True, "order": 100, "position": 4, "disable": False, "depth": 1, "role": 0},
    "3": {"uid": 3, "key": ["Sel river"], "keysecondary": [], "comment": "unrelated", "content": UNRELATED,
          "constant": False, "selective": True, "order": 100, "position": 0, "disable": False, "depth": 4, "role": 0},
}}


def _call(live: LiveServer, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
          content_type: str = "application/json") -> Any:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(f"{live.url}/api/v1/{path}", data=data, method=method,
                                     headers={"Authorization": f"Api-Key {live.api_key}", "Content-Type": content_type})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


def _import_book(live: LiveServer) -> int:
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="profile"\r\n\r\nsillytavern\r\n',
        f'--{boundary}\r\nContent-Disposition: form-data; name="title"\r\n\r\nVyraxes lore\r\n',
        (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="vyraxes.json"\r\n'
         f'Content-Type: application/json\r\n\r\n{json.dumps(WORLD_INFO)}\r\n'),
        f"--{boundary}--\r\n",
    ]
    book = _call(live, "POST", "books/import", raw="".join(parts).encode(),
                 content_type=f"multipart/form-data; boundary={boundary}")
    return int(book.get("id") or book["book"]["id"])


def _text(prompt: list[dict[str, Any]]) -> str:
    """The prompt as one text, message after message, so places compare by offset whether or not
    SillyTavern squashes its system messages."""
    return "\n".join(f"[{m.get('role')}] {m.get('content') if isinstance(m.get('content'), str) else json.dumps(m.get('content'))}"
                     for m in prompt)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    workdir = Path(tmp_path_factory.mktemp("sillytavern"))
    with ExitStack() as outer:
        model = outer.enter_context(model_server())
        tavern = outer.enter_context(sillytavern(workdir))
        loreweave_stack = ExitStack()
        outer.callback(loreweave_stack.close)
        live = loreweave_stack.enter_context(live_server(workdir / "loreweave"))
        book_id = _import_book(live)
        yield {"model": model, "tavern": tavern, "live": live, "book_id": book_id, "stop_loreweave": loreweave_stack.close}


def _open(page: Any, tavern: SillyTavern, model: ModelServer) -> None:
    page.goto(tavern.url, wait_until="domcontentloaded", timeout=90_000)
    # First run: SillyTavern asks for the persona's name before anything else.
    popup_input = page.locator(".popup .popup-input")
    popup_input.wait_for(state="visible", timeout=90_000)
    popup_input.fill("Tester")
    page.locator(".popup .popup-button-ok").click()
    page.wait_for_function("() => window.SillyTavern && document.getElementById('loreweave_settings')", timeout=60_000)
    # Chat Completion → Custom (OpenAI-compatible) → the recording server, through SillyTavern's own controls.
    page.evaluate(
        """([url, model]) => {
            $('#main_api').val('openai').trigger('change');
            $('#chat_completion_source').val('custom').trigger('change');
            $('#custom_api_url_text').val(url).trigger('input');
            $('#custom_model_id').val(model).trigger('input');
            $('#api_button_openai').trigger('click');
        }""",
        [model.url, MODEL_ID],
    )
    page.wait_for_function("() => SillyTavern.getContext().onlineStatus && SillyTavern.getContext().onlineStatus !== 'no_connection'",
                           timeout=30_000)


def _test_connection(page: Any, expected: str) -> str:
    """Click "Test connection" until the panel says ``expected``: an origin just allowed reaches
    every Loreweave worker within its key cache's seconds (API_KEY_CACHE_SECONDS), as for a user."""
    text = ""
    for _ in range(15):
        page.locator("#loreweave_test").click()
        page.wait_for_function("() => !document.getElementById('loreweave_status').textContent.startsWith('Testing')",
                               timeout=15_000)
        text = page.locator("#loreweave_status").inner_text()
        if expected in text:
            return str(text)
        page.wait_for_timeout(1000)
    raise AssertionError(f"the panel says {text!r}, not {expected!r}")


def _configure_extension(page: Any, live: LiveServer, book_id: int, tavern: SillyTavern) -> None:
    """The panel as a user meets it: first without SillyTavern's origin allowed, then with a wrong key,
    then right; each time the panel says which."""
    page.locator("#extensions-settings-button .drawer-toggle").click()
    page.locator("#loreweave_settings .inline-drawer-toggle").click()
    page.locator("#loreweave_url").fill(live.url)
    page.locator("#loreweave_key").fill(live.api_key)
    page.locator("#loreweave_book_ids").fill(str(book_id))
    assert tavern.url in _test_connection(page, "does not allow this page's origin")
    _call(live, "PUT", "tenant/cors", {"origins": [tavern.url]})
    page.locator("#loreweave_key").fill("lw_wrong_key")
    _test_connection(page, "refused the API key")
    page.locator("#loreweave_key").fill(live.api_key)
    assert "sees 2 book(s)" in _test_connection(page, "Connected to")
    shot(page, "sillytavern-loreweave-settings")
    page.locator("#extensions-settings-button .drawer-toggle").click()


def _rows(live: LiveServer, chat_id: int) -> list[dict[str, Any]]:
    requests = _call(live, "GET", f"chats/{chat_id}/requests")
    return requests if isinstance(requests, list) else requests["results"]


def _send(page: Any, text: str) -> None:
    page.locator("#send_textarea").fill(text)
    page.locator("#send_textarea").press("Enter")


def _wait_idle(page: Any) -> None:
    # SillyTavern shows its stop button while generating.
    page.wait_for_function("() => !document.body.dataset.generating && $('#mes_stop').is(':hidden')", timeout=60_000)


def test_a_chat_in_sillytavern_gets_loreweaves_lore_where_world_info_goes(stack: dict[str, Any]) -> None:
    from playwright.sync_api import sync_playwright

    model: ModelServer = stack["model"]
    live: LiveServer = stack["live"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            _open(page, stack["tavern"], model)
            try:
                # Picking a character right after the first-run popup can be refused while SillyTavern
                # saves its welcome chat: ask again until Seraphina's chat is open.
                page.wait_for_function(
                    "() => { const c = SillyTavern.getContext();"
                    " if (c.characters[c.characterId]?.name === 'Seraphina' && c.chat.length >= 1 && !c.chat[0].is_system) return true;"
                    " c.selectCharacterById(c.characters.findIndex(x => x.name === 'Seraphina')); return false; }",
                    polling=1500, timeout=45_000)
            except Exception as error:
                state = page.evaluate("() => { const c = SillyTavern.getContext(); return {id: c.characterId, "
                                      "names: c.characters.map(x => x.name), chat: c.chat.map(m => [m.name, m.is_system])}; }")
                raise AssertionError(f"Seraphina's chat did not open: {state}") from error
            _configure_extension(page, live, stack["book_id"], stack["tavern"])

            # A normal turn: the lore is in SillyTavern's World Info places.
            _send(page, "Tell me about Vyraxes, please.")
            prompt = _text(model.wait_for(1))
            _wait_idle(page)
            description = page.evaluate(
                "() => { const c = SillyTavern.getContext(); return c.characters[c.characterId].description.slice(0, 60); }")
            greeting = page.evaluate("() => SillyTavern.getContext().chat[0].mes.slice(0, 40)")
            assert UNRELATED not in prompt
            for lore in (BEFORE, AFTER, DEPTH):
                assert prompt.count(lore) == 1, f"{lore!r} not exactly once in:\n{prompt}"
            assert description in prompt and greeting in prompt
            # ↑Char before the description, ↓Char after it and before the chat, @D1 just before the last message.
            assert prompt.index(BEFORE) < prompt.index(description) < prompt.index(AFTER) < prompt.index(greeting)
            assert prompt.index(greeting) < prompt.index(DEPTH) < prompt.index("Tell me about Vyraxes, please.")
            shot(page, "sillytavern-loreweave-chat")

            chat_id = page.evaluate("() => SillyTavern.getContext().chatMetadata.loreweave.chatId")
            rows = _rows(live, chat_id)
            assert len(rows) == 1
            assert len(rows[0]["injections"]) == 3

            # Continue: a second turn of the same Loreweave chat, the lore in the same places.
            page.evaluate("() => SillyTavern.getContext().executeSlashCommandsWithOptions('/continue')")
            prompt = _text(model.wait_for(2))
            _wait_idle(page)
            assert prompt.index(BEFORE) < prompt.index(description) < prompt.index(AFTER) < prompt.index(greeting)
            assert len(_rows(live, chat_id)) == 2

            # A swipe of the reply: a new prompt, the same lore in the same places, a third logged turn.
            page.locator("#chat .last_mes .swipe_right").click()
            prompt = _text(model.wait_for(3))
            _wait_idle(page)
            assert prompt.index(BEFORE) < prompt.index(description) < prompt.index(AFTER) < prompt.index(greeting)
            assert prompt.index(greeting) < prompt.index(DEPTH) < prompt.index("Tell me about Vyraxes, please.")
            assert len(_rows(live, chat_id)) == 3

            # Loreweave stopped: the chat goes on without its lore, and a toast says why.
            stack["stop_loreweave"]()
            _send(page, "And Vyraxes again?")
            prompt = _text(model.wait_for(4))
            _wait_idle(page)
            assert "And Vyraxes again?" in prompt
            assert BEFORE not in prompt and AFTER not in prompt and DEPTH not in prompt
            toast = page.locator("#toast-container .toast-warning")
            toast.first.wait_for(state="visible", timeout=10_000)
            assert "cannot be reached" in toast.first.inner_text()
            assert page.evaluate("() => SillyTavern.getContext().chat.at(-1).mes") == model.reply
            shot(page, "sillytavern-loreweave-down")
        finally:
            browser.close()
