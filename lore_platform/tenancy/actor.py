"""Who is calling: resolved once per request, passed to every service."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lore_platform.tenancy.models import ApiKey, Tenant, User

READ = "read"
WRITE = "write"


@dataclass(frozen=True, kw_only=True)
class Actor:
    tenant: Tenant
    user: User | None
    role: str  # "member" | "admin"
    api_key: ApiKey | None = None
    scopes: frozenset[str] = field(default_factory=lambda: frozenset({READ, WRITE}))

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def can_write(self) -> bool:
        return WRITE in self.scopes

    @property
    def can_read(self) -> bool:
        return READ in self.scopes or WRITE in self.scopes
