"""API key format and hashing.

A key reads ``lw_<prefix>_<secret>``. The prefix (8 hex characters) finds the
row; the secret (32 random bytes, url-safe) is checked against a SHA-256 hash.
A fast hash is right here: the secret has 256 bits of entropy, so there is
nothing for a slow password hash to protect against, and every API call pays
for verification.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

KEY_TAG = "lw"


@dataclass(frozen=True, kw_only=True)
class GeneratedKey:
    prefix: str
    secret: str

    @property
    def full(self) -> str:
        return f"{KEY_TAG}_{self.prefix}_{self.secret}"


def key_generate() -> GeneratedKey:
    return GeneratedKey(prefix=secrets.token_hex(4), secret=secrets.token_urlsafe(32))


def key_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def key_split(raw: str) -> tuple[str, str] | None:
    """Return (prefix, secret) of a well-formed key, else None."""
    parts = raw.strip().split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_TAG or len(parts[1]) != 8 or not parts[2]:
        return None
    return parts[1], parts[2]


def key_matches(secret: str, stored_hash: str) -> bool:
    return hmac.compare_digest(key_hash(secret), stored_hash)
