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
- cancellation: given a ``cancelled`` callback, each try runs in a thread the
  caller's thread waits on, asking ``cancelled()`` every ``poll`` seconds, before
  each try and through each wait between tries; once it says yes the call is
  abandoned and no further request is sent (``LlmCancelled``);
- every request it sends is counted in ``usage.calls``, failed ones included
  (a ``Completion``'s usage, or an ``LlmError``'s when it gives up);
- ``max_tokens`` on every request, from the configured limit of the model's answer.

``parse_json`` is the tolerant reader for servers without structured output:
fenced JSON, prose around it, a truncated last item (dropped).
"""
from __future__ import annotations

import email.utils
import json
import re
import threading
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
    # The longest answer asked for (tokens): a bound on a runaway answer; 0 sends none.
    max_tokens: int = 4096

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
        self.wait: float | None = None  # what the server's Retry-After asked for
        self.usage = Usage()  # the requests spent before giving up (set by ``complete``)


class LlmCancelled(LlmError):
    """The caller cancelled: the call in flight was abandoned and nothing more was sent."""

    def __init__(self) -> None:
        super().__init__("cancelled", "The call was cancelled.")


class LlmClient(Protocol):
    def complete(self, messages: Sequence[Mapping[str, str]], *, schema: Mapping[str, Any] | None = None,
                 schema_name: str = "answer", cancelled: Callable[[], bool] | None = None) -> Completion: ...


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

    # Seconds between two ``cancelled()`` questions while a try or a wait runs.
    poll = 0.5
    # Set when the server refused ``max_tokens`` (a 400 naming it): later requests go without it.
    _max_tokens_refused = False

    def complete(self, messages: Sequence[Mapping[str, str]], *, schema: Mapping[str, Any] | None = None,
                 schema_name: str = "answer", cancelled: Callable[[], bool] | None = None) -> Completion:
        attempt = 0
        sent = _Sent()
        while True:
            # Asked before every try: a cancel during the last try's wait sends nothing more.
            if cancelled is not None and cancelled():
                raise self._spent(LlmCancelled(), sent)
            try:
                completion = self._try(messages, schema, schema_name, cancelled, sent)
            except LlmError as error:
                if isinstance(error, LlmCancelled) or not error.retryable or attempt >= self.config.max_retries:
                    raise self._spent(error, sent)  # noqa: B904 - the same error, re-raised with its usage
                backoff = min(self.config.retry_after_max, 0.5 * 2**attempt)
                wait = min(self.config.retry_after_max, error.wait) if error.wait is not None else backoff
                if not self._wait(wait, cancelled):
                    raise self._spent(LlmCancelled(), sent) from error
                attempt += 1
                continue
            # The answer's tokens, and every request this answer cost (its failed tries too).
            return Completion(text=completion.text, finish_reason=completion.finish_reason,
                              usage=Usage(prompt_tokens=completion.usage.prompt_tokens,
                                          completion_tokens=completion.usage.completion_tokens,
                                          total_tokens=completion.usage.total_tokens, calls=sent.count))

    @staticmethod
    def _spent(error: LlmError, sent: _Sent) -> LlmError:
        error.usage = Usage(calls=sent.count)
        return error

    def _wait(self, seconds: float, cancelled: Callable[[], bool] | None) -> bool:
        """Sleep ``seconds`` between tries; False (at once) when the caller cancels meanwhile."""
        if cancelled is None:
            self._sleep(seconds)
            return True
        left = seconds
        while left > 0:
            if cancelled():
                return False
            step = min(self.poll, left)
            self._sleep(step)
            left -= step
        return True

    def _try(self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any] | None, schema_name: str,
             cancelled: Callable[[], bool] | None, sent: _Sent) -> Completion:
        """One try. With ``cancelled``, the HTTP call runs in a thread this one waits on, so a cancel
        abandons it at once instead of waiting out the server (up to the timeout)."""
        if cancelled is None:
            return self._once(messages, schema, schema_name, sent)
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                outcome["completion"] = self._once(messages, schema, schema_name, sent)
            except BaseException as error:  # noqa: BLE001 - handed to the waiting thread as it is
                outcome["error"] = error
            finally:
                done.set()

        threading.Thread(target=run, name="llm-call", daemon=True).start()
        while not done.wait(self.poll):
            if cancelled():
                sent.abandoned = True  # the thread sends nothing more (no structured-output re-ask)
                raise LlmCancelled()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["completion"]

    def _once(self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any] | None,
              schema_name: str, sent: _Sent | None = None) -> Completion:
        sent = sent if sent is not None else _Sent()
        kwargs: dict[str, Any] = {"model": self.config.model, "messages": list(messages), "temperature": 0.7}
        if self.config.max_tokens > 0 and not self._max_tokens_refused:
            kwargs["max_tokens"] = self.config.max_tokens
        if schema is not None and self._structured:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": dict(schema), "strict": True},
            }
        if sent.abandoned:
            raise LlmCancelled()
        sent.count += 1
        try:
            response = self._client.chat.completions.create(**kwargs)
        except openai.BadRequestError as error:
            if "response_format" in kwargs and _refuses_schema(error):
                self._structured = False
                return self._once(messages, schema, schema_name, sent)
            if "max_tokens" in kwargs and "max_tokens" in f"{error.message} {getattr(error, 'body', '')}".lower():
                # A limit above what this server allows (or a parameter it does not take): its own limit holds.
                self._max_tokens_refused = True
                return self._once(messages, schema, schema_name, sent)
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
            failure.wait = _retry_after(error.response.headers)
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
            failure.wait = _retry_after(error.response.headers)
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


@dataclass
class _Sent:
    """The requests one ``complete`` sent, and whether its caller gave up on the try in flight."""

    count: int = 0
    abandoned: bool = False


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
