"""Domain errors. Services raise these; the API layer turns them into JSON.

The domain never imports the API layer: a service called from a Celery task,
a management command or the CLI raises the same error a view would show.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class Term(str):
    """A product word inside a refusal's values ("The book title", "entries"): English in the API,
    said in the reader's language on pages. Plain values (a book's title, a number) stay as given."""

    __slots__ = ()


class Phrase(str):
    """An English sentence that keeps its template and values (a refusal's message, an entry warning,
    an import receipt's note): the API and what is stored say the English, a page fills in the
    catalogue's translation of the template (``web.refusals``)."""

    def __new__(cls, template: str, values: Mapping[str, Any] | None = None) -> Phrase:
        template = str(template)  # a lazy translation (a page's own refusal) is read once, here
        filled = template.format(**values) if values else template
        phrase = super().__new__(cls, filled)
        phrase.template = template
        phrase.values = dict(values) if values else {}
        return phrase

    template: str
    values: dict[str, Any]


class DomainError(Exception):
    """A refused operation: names the field and the product rule it broke.

    ``message`` is English, the API's words. With ``values`` it is a template filled in with them
    (``"{what} is {length:,} characters"``) and kept as a ``Phrase``: the API says the filled-in
    English, a page fills in its translation of the template, so the words need not be parsed back.
    """

    status = 400
    code = "invalid"

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        rule: str | None = None,
        code: str | None = None,
        details: dict[str, Any] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> None:
        # A Phrase passed on as it is keeps its template and values.
        self.message = message if isinstance(message, Phrase) and not values else Phrase(message, values)
        super().__init__(str(self.message))
        self.field = field
        self.rule = rule
        if code:
            self.code = code
        self.details = details or {}

    @property
    def template(self) -> str:
        return self.message.template

    @property
    def values(self) -> dict[str, Any]:
        return self.message.values

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        if self.rule is not None:
            body["rule"] = self.rule
        if self.details:
            body["details"] = self.details
        return body


class ValidationFailed(DomainError):
    status = 400
    code = "invalid"


class LimitExceeded(DomainError):
    """A product limit (W-12, S-14, I-3 …) would be broken; nothing was written."""

    status = 422
    code = "limit_exceeded"


class PayloadTooLarge(DomainError):
    status = 413
    code = "payload_too_large"


class NotFound(DomainError):
    """Missing and forbidden look the same to the caller (P-3)."""

    status = 404
    code = "not_found"


class PermissionDenied(DomainError):
    """The caller can see the thing but may not do this to it."""

    status = 403
    code = "permission_denied"


class Conflict(DomainError):
    status = 409
    code = "conflict"


class ServiceUnavailable(DomainError):
    """A service the request needs (the database) is not answering; retry shortly."""

    status = 503
    code = "service_unavailable"


class TooManyAttempts(DomainError):
    """Too many tries (failed sign-ins, sign-ups) from one account or address; ``retry_after``
    seconds until the next is heard. Answered 429 with ``Retry-After``."""

    status = 429
    code = "throttled"

    def __init__(self, message: str, *, retry_after: float, **kwargs: Any) -> None:
        self.retry_after = max(1, int(retry_after + 0.999))
        super().__init__(message, details={"retry_after": self.retry_after}, **kwargs)


class PreconditionFailed(DomainError):
    """An ``If-Match`` (or a page's hidden version) named a version that is no longer current: a lost
    update refused, nothing written (RFC 9110 §13.1.1; GitHub and Stripe answer the same)."""

    status = 412
    code = "precondition_failed"


class PreconditionRequired(DomainError):
    """The tenant requires ``If-Match`` on every change of an editable resource (RFC 6585 §3)."""

    status = 428
    code = "precondition_required"
