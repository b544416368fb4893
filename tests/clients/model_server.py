"""A local OpenAI-compatible model server that records every prompt it is sent.

SillyTavern's "Custom (OpenAI-compatible)" source lists `GET /v1/models`, then posts one
`/v1/chat/completions` per generation, streaming (server-sent events) or not; both are answered
with the same scripted reply so the test reads what SillyTavern built, not what the model said.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_ID = "recording-model"


@dataclass
class ModelServer:
    url: str
    reply: str = "The model answers."
    prompts: list[list[dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_for(self, count: int, timeout: float = 60.0) -> list[dict[str, Any]]:
        """The count-th prompt (1-based) once it has arrived."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.prompts) >= count:
                    return self.prompts[count - 1]
            time.sleep(0.1)
        raise AssertionError(f"the model got {len(self.prompts)} prompt(s), expected {count}")


def _handler(state: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet test output
            pass

        def _json(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "owned_by": "test"}]})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._json(404, {"error": {"message": "not found"}})
                return
            with state.lock:
                state.prompts.append(list(body.get("messages") or []))
            if body.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                chunk = {"id": "c", "object": "chat.completion.chunk", "created": int(time.time()), "model": MODEL_ID,
                         "choices": [{"index": 0, "delta": {"role": "assistant", "content": state.reply},
                                      "finish_reason": None}]}
                done = dict(chunk, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
                for event in (chunk, done):
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                return
            self._json(200, {
                "id": "c", "object": "chat.completion", "created": int(time.time()), "model": MODEL_ID,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": state.reply},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            })

    return Handler


@contextmanager
def model_server() -> Iterator[ModelServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(ModelServer(url="")))
    state = ModelServer(url=f"http://127.0.0.1:{server.server_address[1]}/v1")
    server.RequestHandlerClass = _handler(state)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
