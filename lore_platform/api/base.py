"""Sealed base views: the tenant and actor are resolved once, here.

Subclasses narrow ``scoped_queryset`` (always starting from
``Model.objects.for_tenant(...)``); they never write their own owner filter.

Every POST with an ``Idempotency-Key`` goes through ``lore_platform.tenancy.idempotency`` here, once,
after authentication and throttling: a retry gets the first answer back (``Idempotent-Replayed: true``)
without running the handler. A POST without the header costs one header lookup.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse
from django.http.request import RawPostDataException
from rest_framework import generics, viewsets
from rest_framework.views import APIView

from lore_platform.api.conditional import ConditionalMixin
from lore_platform.encoding import json_dumps
from lore_platform.tenancy import idempotency
from lore_platform.tenancy.actor import Actor
from lore_platform.tenancy.models import IdempotencyKey
from lore_platform.tenancy.permissions import IsTenantActor, request_actor

REPLAYED_HEADER = "Idempotent-Replayed"


def _sealed(cls: type, base: type) -> None:
    # The tenant scope is applied here once; a subclass narrows ``scoped_queryset`` instead.
    if cls is not base and "get_queryset" in vars(cls):
        raise TypeError(f"{cls.__name__} may not override get_queryset: narrow scoped_queryset instead")


class _Replay(Exception):
    """The stored first answer to this Idempotency-Key: given back instead of running the handler."""

    def __init__(self, response: HttpResponse) -> None:
        super().__init__("idempotent replay")
        self.response = response


def _multipart_digest(request: Any) -> bytes:
    """A multipart body by its parts, not its bytes: a client's retry draws a new random boundary."""
    digest = hashlib.sha256()
    for name in sorted(request.data.keys()):
        for value in request.data.getlist(name) if hasattr(request.data, "getlist") else [request.data[name]]:
            digest.update(f"{name}\x1f".encode())
            if hasattr(value, "chunks"):  # an uploaded file: its name and content
                digest.update(f"{getattr(value, 'name', '')}\x1f".encode())
                for chunk in value.chunks():
                    digest.update(chunk)
                value.seek(0)
            else:
                digest.update(str(value).encode())
            digest.update(b"\x1e")
    return digest.hexdigest().encode()


def _body_of(request: Any) -> bytes:
    if (request.content_type or "").startswith("multipart/"):
        return _multipart_digest(request)
    try:
        return bytes(request._request.body)
    except RawPostDataException:  # already parsed (a permission read request.data): its parsed value
        return json_dumps(request.data)


class TenantAPIMixin(ConditionalMixin):
    permission_classes: Sequence[Any] = [IsTenantActor]
    # Scope an unsafe method needs; read-only POSTs (previews, stateless context) lower it.
    required_scope = "write"
    request: Any
    _idempotency: IdempotencyKey | None = None

    @property
    def actor(self) -> Actor:
        actor = request_actor(self.request)
        assert actor is not None, "IsTenantActor runs before any handler"
        return actor

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        if request.method != "POST":
            return
        key = request.headers.get("Idempotency-Key")
        if key is None:
            return
        row, replay = idempotency.claim(tenant=self.actor.tenant, key=key, method=request.method,
                                        path=request.get_full_path(), body=_body_of(request))
        if replay:
            answer = HttpResponse(bytes(row.body), status=row.status)
            for name, value in row.headers.items():
                answer[name] = value
            answer[REPLAYED_HEADER] = "true"
            raise _Replay(answer)
        self._idempotency = row

    def handle_exception(self, exc: Exception) -> Any:
        if isinstance(exc, _Replay):
            return exc.response
        try:
            return super().handle_exception(exc)  # type: ignore[misc]
        except BaseException:
            self._idempotency_release()  # a 500: the server's failure, so a retry may run it again
            raise

    def finalize_response(self, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        row, self._idempotency = self._idempotency, None
        if row is not None:
            if response.status_code >= 500 or getattr(response, "streaming", False):
                idempotency.release(row)
            else:
                if hasattr(response, "render") and not getattr(response, "is_rendered", True):
                    response.render()
                idempotency.record(row, status=response.status_code, body=bytes(response.content),
                                   headers={name: value for name, value in response.items()})
        return response

    def _idempotency_release(self) -> None:
        row, self._idempotency = self._idempotency, None
        if row is not None:
            idempotency.release(row)


class TenantAPIView(TenantAPIMixin, APIView):
    pass


class TenantGenericAPIView(TenantAPIMixin, generics.GenericAPIView):
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _sealed(cls, TenantGenericAPIView)

    def scoped_queryset(self, actor: Actor) -> QuerySet[Any]:
        raise NotImplementedError

    def get_queryset(self) -> QuerySet[Any]:
        return self.scoped_queryset(self.actor)


class TenantViewSet(TenantAPIMixin, viewsets.GenericViewSet):
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _sealed(cls, TenantViewSet)

    def scoped_queryset(self, actor: Actor) -> QuerySet[Any]:
        raise NotImplementedError

    def get_queryset(self) -> QuerySet[Any]:
        return self.scoped_queryset(self.actor)
