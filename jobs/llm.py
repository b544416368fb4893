"""The LLM port and its one real implementation: any OpenAI-compatible chat-completions server.

``LlmClient`` is the port (``complete(messages, schema) -> Completion``);
``OpenAICompatible`` implements it with the maintained ``openai`` client
(llama.cpp's server, vLLM, Ollama, hosted APIs). What it adds to the client:

- its own retry loop (the client's is off): 429 and 5xx are retried with
  exponential backoff, waiting what ``Retry-After`` says (seconds or an HTTP
  date, capped) when the server sends it; timeouts and lost connections too;
- structured output: a JSON schema in ``response_format``; a server that
  refuses it (400 naming ``response_format``/``json_schema``) is asked again
  without it, and this client remembers that;
- every failure becomes an ``LlmError`` with a ``code`` and a message a person
  understands (bad key, rate limited, server error, timeout, unreachable), in
  the product's words: never the server's own answer (its body or status
  code), so a job cannot be used to probe what listens where (issue 26);
- connections obey the operator's rule on where the server may connect
  (``lore_platform.outbound``): resolved and checked at connect time, the
  checked address is the one connected to, no redirects followed. The
  operator's own endpoint is allowed as configured (``LlmConfig.trusted``).

``parse_json`` is the tolerant reader for servers without structured output:
fenced JSON, prose around it, a truncated last item (dropped).
"""
from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import json_repair
import openai

from lore_platform import outbound


@dataclass(frozen=True, kw_only=True)
class LlmConfig:
    """Where the model is; ``model`` empty = no model configured (A-3)."""

    base_url: str = ""
    api_key: str = ""
    model: str = ""
    timeout: float = 60.0
    max_retries: int = 3
    retry_after_max: float = 30.0
    structured: bool = True
    # Allow-list entries for this config's own server: the operator's endpoint ("host:port"); empty for a
    # tenant's URL, which must pass OUTBOUND_ALLOW like any other.
    trusted: tuple[str, ...] = ()

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)


@dataclass(frozen=True, kw_only=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            calls=self.calls + other.calls,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "calls": self.calls,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Usage:
        data = data or {}
        return cls(**{k: int(data.get(k) or 0) for k in ("prompt_tokens", "completion_tokens", "total_tokens", "calls")})


@dataclass(frozen=True, kw_only=True)
class Completion:
    text: str
    finish_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)


class LlmError(Exception):
    """The model could not be used; ``code`` is stable, ``message`` is for a person."""

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable


class LlmClient(Protocol):
    def complete(self, messages: Sequence[Mapping[str, str]], *, schema: Mapping[str, Any] | None = None,
                 schema_name: str = "answer") -> Completion: ...


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return float(value) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _refuses_schema(error: openai.BadRequestError) -> bool:
    text = f"{error.message} {getattr(error, 'body', '')}".lower()
    return "response_format" in text or "json_schema" in text or "structured" in text


class OpenAICompatible:
    """``LlmClient`` over ``POST {base_url}/chat/completions``."""

    def __init__(self, config: LlmConfig, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        self._sleep = sleep
        self._structured = config.structured
        self._client = openai.OpenAI(
            base_url=config.base_url.rstrip("/"),
            api_key=config.api_key or "none",  # local servers need none; the client insists on a value
            timeout=config.timeout,
            max_retries=0,
            http_client=outbound.http_client(timeout=config.timeout, extra_allow=config.trusted),
        )

    def complete(self, messages: Sequence[Mapping[str, str]], *, schema: Mapping[str, Any] | None = None,
                 schema_name: str = "answer") -> Completion:
        attempt = 0
        while True:
            try:
                return self._once(messages, schema, schema_name)
            except LlmError as error:
                if not error.retryable or attempt >= self.config.max_retries:
                    raise
                wait = getattr(error, "wait", None)
                backoff = min(self.config.retry_after_max, 0.5 * 2**attempt)
                self._sleep(min(self.config.retry_after_max, wait) if wait is not None else backoff)
                attempt += 1

    def _once(self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any] | None,
              schema_name: str) -> Completion:
        kwargs: dict[str, Any] = {"model": self.config.model, "messages": list(messages), "temperature": 0.7}
        if schema is not None and self._structured:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": dict(schema), "strict": True},
            }
        try:
            response = self._client.chat.completions.create(**kwargs)
        except openai.BadRequestError as error:
            if "response_format" in kwargs and _refuses_schema(error):
                self._structured = False
                return self._once(messages, schema, schema_name)
            raise LlmError("model_bad_request", "The model server refused the request as invalid.") from error
        except openai.AuthenticationError as error:
            raise LlmError(
                "model_auth_failed",
                "The model server refused the API key. An admin should check the model settings' key.",
            ) from error
        except openai.PermissionDeniedError as error:
            raise LlmError("model_auth_failed", "The model server denied access to this model.") from error
        except openai.NotFoundError as error:
            raise LlmError(
                "model_not_found",
                f"The model server has no model {self.config.model!r} or no chat-completions endpoint.",
            ) from error
        except openai.RateLimitError as error:
            failure = LlmError(
                "model_rate_limited",
                "The model server kept answering 'too many requests'; try again later.",
                retryable=True,
            )
            failure.wait = _retry_after(error.response.headers)  # type: ignore[attr-defined]
            raise failure from error
        except openai.APITimeoutError as error:
            raise LlmError(
                "model_timeout",
                f"The model server did not answer within {self.config.timeout:g} seconds.",
                retryable=True,
            ) from error
        except openai.APIConnectionError as error:
            refused = outbound.refusal_in(error)
            if refused is not None:  # the rule, not the network: asking again cannot help
                raise LlmError(
                    "model_address_refused",
                    f"The model server's address is not allowed: {refused} (A-3)",
                ) from error
            raise LlmError(
                "model_unreachable", f"The model server at {self.config.base_url} could not be reached.", retryable=True
            ) from error
        except openai.APIStatusError as error:
            retryable = error.status_code >= 500
            failure = LlmError(
                "model_server_error",
                "The model server failed and kept failing after retries."
                if retryable else "The model server refused the request.",
                retryable=retryable,
            )
            failure.wait = _retry_after(error.response.headers)  # type: ignore[attr-defined]
            raise failure from error
        except (openai.APIError, json.JSONDecodeError) as error:  # an answer the client cannot read (not JSON at all)
            raise LlmError("model_bad_response", "The model server's answer could not be read.") from error
        if not hasattr(response, "choices"):  # a 200 that is not a chat completion (a text page): the client hands back text
            raise LlmError("model_bad_response", "The model server's answer could not be read.")
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content if choice and choice.message else None) or ""
        usage = response.usage
        return Completion(
            text=text,
            finish_reason=(choice.finish_reason if choice else None) or "stop",
            usage=Usage(
                prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
                total_tokens=getattr(usage, "total_tokens", 0) or 0,
                calls=1,
            ),
        )


# --- tolerant parsing ----------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n?(.*?)(?:```|$)", re.S)


class NotJson(ValueError):
    pass


def parse_json(text: str, *, truncated: bool = False) -> tuple[Any, bool]:
    """The JSON value in a model's answer, and whether its last list item was cut off (and dropped).

    Accepts bare JSON, JSON in a fenced block, JSON with prose before or after
    it, and JSON cut short (``truncated`` = the server said it hit its length
    limit). Raises ``NotJson`` when there is none.
    """
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    starts = [i for i in (body.find("{"), body.find("[")) if i >= 0]
    if not starts:
        raise NotJson("The model answered with text, not JSON.")
    body = body[min(starts):]
    try:
        value, end = json.JSONDecoder().raw_decode(body)
        return value, False
    except json.JSONDecodeError:
        pass
    value = json_repair.loads(body)
    if value in ("", None) or not isinstance(value, (dict, list)):
        raise NotJson("The model answered with text, not JSON.")
    # Repaired: the answer was cut short if it does not close; its last item is then incomplete.
    stripped = body.rstrip().rstrip("`").rstrip()
    cut = truncated or not stripped.endswith(("}", "]"))
    if cut:
        items = value.get("entries") if isinstance(value, dict) else value
        if isinstance(items, list) and items:
            items.pop()
    return value, cut
