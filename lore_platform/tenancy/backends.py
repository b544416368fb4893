"""The password check, with failed sign-ins limited per account and per client address (issue 26).

Every path that checks a password goes through Django's ``authenticate``, so limiting here covers
the pages' sign-in and Django's admin alike. While an account or address is locked out no password
is checked at all: the answer is the ordinary "wrong email or password" (a page says more, with 429:
web.views.accounts.SignInView), whether the account exists or not.
"""
from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.http import HttpRequest

from lore_platform.tenancy import limits


def sign_in_identity(request: HttpRequest | None, username: str | None) -> tuple[str, str]:
    """(account, address) a sign-in attempt is counted under."""
    account = (username or "").strip().lower()[:254]
    address = limits.client_address(request) if request is not None else ""
    return account, address


class ThrottledModelBackend(ModelBackend):
    def authenticate(self, request: HttpRequest | None, username: str | None = None, password: str | None = None,
                     **kwargs: Any) -> Any:
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        account, address = sign_in_identity(request, username)
        if limits.login_wait(account, address) is not None:
            return None
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            limits.login_failed(account, address)
        else:
            limits.login_succeeded(account)
        return user
