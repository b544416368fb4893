"""A local OpenAI-compatible chat-completions server for tests: real HTTP on 127.0.0.1, scripted answers.

Each request takes the next scripted reply (the last one repeats). A reply is
a chat.completion body built by :func:`completion` or an error body, with a
status, headers and an optional delay (for timeouts). Every request is kept
(path, headers, JSON body) for the tests to read.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict → JSON; str → sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def completion(content: str, *, model: str = "test-model", finish_reason: str = "stop",
               prompt_tokens: int = 100, completion_tokens: int = 50) -> Reply:
    """A chat.completion exactly as the OpenAI API (and llama.cpp / vLLM servers) answer it."""
    return Reply(body={
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": None},
            "logprobs": None,
            "finish_reason": finish_reason,
        }],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    })


def entries_json(entries: list[dict[str, Any]]) -> str:
    return json.dumps({"entries": entries})


def error(status: int, message: str, *, type_: str = "server_error", code: str | None = None,
          headers: dict[str, str] | None = None) -> Reply:
    return Reply(status=status, body={"error": {"message": message, "type": type_, "param": None, "code": code}},
                 headers=headers or {})


class LlmServer:
    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                with server._lock:
                    server.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                            "body": json.loads(raw or b"{}")})
                    server.times.append(time.monotonic())
                    index = len(server.requests) - 1
                    reply = server.replies[min(index, len(server.replies) - 1)] if server.replies else completion("")
                if reply.delay:
                    time.sleep(reply.delay)
                body = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                data = body.encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LlmServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def script(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests.clear()
        self.times.clear()
