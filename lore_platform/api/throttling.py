from __future__ import annotations

from typing import Any

from rest_framework.throttling import SimpleRateThrottle


class TenantRateThrottle(SimpleRateThrottle):
    """One request budget per tenant, whichever key or user spends it."""

    scope = "tenant"

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        actor = getattr(request, "actor", None)
        if actor is not None:
            return self.cache_format % {"scope": self.scope, "ident": f"tenant-{actor.tenant.pk}"}
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
