"""What every page view shares: refusals as pages, htmx partials, paging."""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.core.paginator import Page, Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from lore_platform.errors import DomainError, NotFound


def refusals_as_pages(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """NotFound is Django's 404 page (P-3: missing and forbidden look alike); other refusals a page
    with the service's message and rule, at the service's status."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except NotFound as exc:
            raise Http404(exc.message) from None
        except DomainError as exc:
            return render(request, "web/refused.html", {"error": exc}, status=exc.status)

    return wrapped


def is_htmx(request: HttpRequest) -> bool:
    return request.headers.get("HX-Request") == "true"


def page_of(items: Any, request: HttpRequest, per_page: int) -> Page:
    return Paginator(items, per_page).get_page(request.GET.get("page"))


def query_without_page(request: HttpRequest) -> str:
    """The current filters, for paging links."""
    params = request.GET.copy()
    params.pop("page", None)
    return params.urlencode()
