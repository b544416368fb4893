"""Sign-up, sign-in/out, invitations, the tenant switcher, members and the admins' API keys page
(issue 15, point 1; issue 26: accounts nobody else can take over, abuse limits)."""
from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.tokens import default_token_generator
from django.contrib.auth.views import LoginView, PasswordResetConfirmView
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.utils.encoding import force_bytes
from django.utils.http import url_has_allowed_host_and_scheme, urlsafe_base64_encode
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from lore_platform.errors import DomainError, TooManyAttempts
from lore_platform.tenancy import limits
from lore_platform.tenancy.backends import sign_in_identity
from lore_platform.tenancy.selectors import invitations_pending, tenant_cors_origins, tenant_memberships
from lore_platform.tenancy.services import (
    IssuedKey,
    api_key_create,
    api_key_revoke,
    invitation_accept,
    invitation_create,
    invitation_decline,
    invitation_open,
    invitation_revoke,
    password_reset_request,
    signup_confirm,
    signup_open,
    signup_request,
    tenant_cors_set,
    workspace_create,
)
from web.forms import (
    ApiKeyForm,
    CorsOriginsForm,
    InviteForm,
    PasswordResetAskForm,
    SignInForm,
    SignUpForm,
    WorkspaceForm,
)
from web.refusals import FORM_REFUSED_STATUS, form_page_status, refusal_on_form, refusal_text
from web.selectors import api_keys_of, mail_outbox as mail_outbox_read
from web.session import actor_required, page_actor, tenant_switch
from web.views.common import refusals_as_pages

BACKEND = "lore_platform.tenancy.backends.ThrottledModelBackend"


def _local(target: str, request: HttpRequest, default: str = "/books") -> str:
    """``target`` when it is a path on this site (no open redirect), else ``default``."""
    if target.startswith("/") and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return default


def throttled(request: HttpRequest, refusal: TooManyAttempts, template: str, context: dict[str, Any]) -> HttpResponse:
    """429 with ``Retry-After``: JSON for a caller that asks for it, else the page with the message."""
    if "application/json" in request.headers.get("Accept", ""):
        response: HttpResponse = JsonResponse({"error": refusal.as_dict()}, status=429)
    else:
        response = render(request, template, {**context, "throttled": refusal_text(refusal)}, status=429)
    response["Retry-After"] = str(refusal.retry_after)
    return response


def _login_refusal(wait: float) -> TooManyAttempts:
    return TooManyAttempts("Too many failed sign-ins. Try again in {minutes} minutes.",
                           values={"minutes": max(1, int(wait + 59) // 60)}, retry_after=wait)


class SignInView(LoginView):
    """Sign-in. Failures are counted by the password check itself (ThrottledModelBackend); here a
    locked account or address is answered 429 with ``Retry-After`` and a clear message, before any
    password is checked — a right one included."""

    template_name = "web/login.html"
    authentication_form = SignInForm
    redirect_authenticated_user = True

    def _wait(self) -> float | None:
        account, address = sign_in_identity(self.request, str(self.request.POST.get("username", "")))
        return limits.login_wait(account, address)

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        wait = self._wait()
        if wait is not None:
            return self._throttled(wait)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        wait = self._wait()  # this failure may have started a lockout
        if wait is not None:
            return self._throttled(wait, form=form)
        # A refused sign-in is no success (issue 26, point 7): the form again, as a 422.
        response = super().form_invalid(form)
        response.status_code = FORM_REFUSED_STATUS
        return response

    def _throttled(self, wait: float, form: Any = None) -> HttpResponse:
        context = self.get_context_data(form=form or self.get_form_class()(self.request))
        return throttled(self.request, _login_refusal(wait), self.template_name, context)


def signup(request: HttpRequest) -> HttpResponse:
    """A new account (and workspace): the answer is the same whether the email has an account or not,
    and nothing is created until the link mailed to the address is used (issue 26). Signed in, a
    person creates another workspace here."""
    if request.user.is_authenticated:
        return _workspace_new(request)
    next_path = _local(request.POST.get("next") or request.GET.get("next", ""), request, default="")
    form = SignUpForm(request.POST or None)
    context = {"form": form, "next": next_path}
    if request.method == "POST":
        address = limits.client_address(request)
        wait = limits.limit_wait(limits.signup_address_limit(), address)
        if wait is not None:
            return throttled(request, _signup_refusal(wait), "web/signup.html", context)
        limits.limit_hit(limits.signup_address_limit(), address)
        if form.is_valid():
            data = form.cleaned_data
            with refusal_on_form(form) as refused:
                signup_request(
                    email=data["email"], password=data["password"], tenant_name=data["tenant"], next_path=next_path,
                    link_for=lambda token: request.build_absolute_uri(reverse("web-signup-confirm", args=[token])),
                    login_link=request.build_absolute_uri(reverse("web-login")),
                )
            if not refused:
                return render(request, "web/signup_sent.html", {"email": data["email"].strip().lower(),
                                                                "mail_outbox_page": settings.MAIL_OUTBOX_PAGE})
    return render(request, "web/signup.html", context, status=form_page_status(form))


def password_reset(request: HttpRequest) -> HttpResponse:
    """Ask for a password-reset link: the same answer for any address (issue 26); limited per client
    address and per address mailed."""
    form = PasswordResetAskForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        email = form.cleaned_data["email"].strip().lower()
        address = limits.client_address(request)
        wait = limits.limit_wait(limits.password_reset_address_limit(), address)
        if wait is not None:
            refusal = TooManyAttempts("Too many password-reset requests from your address. Try again in {minutes} "
                                      "minutes.", values={"minutes": max(1, int(wait + 59) // 60)}, retry_after=wait)
            return throttled(request, refusal, "web/password_reset.html", {"form": form})
        limits.limit_hit(limits.password_reset_address_limit(), address)
        # Past its own budget an address is not mailed again, and the caller is told the same as ever.
        if limits.limit_wait(limits.password_reset_account_limit(), email) is None:
            limits.limit_hit(limits.password_reset_account_limit(), email)
            with refusal_on_form(form) as refused:
                password_reset_request(
                    email=email,
                    link_for=lambda user: request.build_absolute_uri(reverse("web-password-reset-confirm", kwargs={
                        "uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
                        "token": default_token_generator.make_token(user)})),
                    signup_link=request.build_absolute_uri(reverse("web-signup")),
                )
            if refused:
                return render(request, "web/password_reset.html", {"form": form})
        return render(request, "web/password_reset_sent.html",
                      {"email": email, "mail_outbox_page": settings.MAIL_OUTBOX_PAGE})
    return render(request, "web/password_reset.html", {"form": form})


class PasswordResetSetView(PasswordResetConfirmView):
    """Django's: the link's token moves into the session (out of the address bar and Referer), the
    new password is validated, every other session of the account ends; then sign in."""

    template_name = "web/password_reset_confirm.html"
    success_url = reverse_lazy("web-login")

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        # A person who proved the address has done more than a guesser: their account's failures end.
        limits.login_succeeded(str(form.user.email).strip().lower())
        messages.success(self.request, _("Your password is set. Sign in with it."))
        return response


def _signup_refusal(wait: float) -> TooManyAttempts:
    return TooManyAttempts("Too many sign-ups from your address. Try again in {minutes} minutes.",
                           values={"minutes": max(1, int(wait + 59) // 60)}, retry_after=wait)


def _workspace_new(request: HttpRequest) -> HttpResponse:
    form = WorkspaceForm(request.POST or None)
    if request.method == "POST":
        # New workspaces count against the same per-address budget as sign-ups.
        address = limits.client_address(request)
        wait = limits.limit_wait(limits.signup_address_limit(), address)
        if wait is not None:
            return throttled(request, _signup_refusal(wait), "web/workspace_new.html", {"form": form})
        limits.limit_hit(limits.signup_address_limit(), address)
    if request.method == "POST" and form.is_valid():
        with refusal_on_form(form) as refused:
            tenant = workspace_create(user=request.user, name=form.cleaned_data["tenant"])  # type: ignore[arg-type]
        if not refused:
            tenant_switch(request, tenant.slug)
            return redirect("web-books")
    return render(request, "web/workspace_new.html", {"form": form})


@refusals_as_pages
def signup_confirm_page(request: HttpRequest, token: str) -> HttpResponse:
    """The link mailed at sign-up: a button (a mail scanner that fetches the link uses nothing), then
    the account exists and its owner is signed in."""
    if request.method != "POST":
        found = signup_open(token=token)
        return render(request, "web/signup_confirm.html", {"email": found.email})
    confirmed = signup_confirm(token=token)
    login(request, confirmed.user, backend=BACKEND)
    if confirmed.tenant is not None:
        tenant_switch(request, confirmed.tenant.slug)
    return redirect(_local(confirmed.next_path, request))


@refusals_as_pages
def invitation_page(request: HttpRequest, token: str) -> HttpResponse:
    """An invitation link: whoever holds it sees what it offers; only the invited email's owner,
    signed in, joins by accepting (or declines)."""
    invitation = invitation_open(token=token)
    here = request.get_full_path()
    user = request.user
    mine = user.is_authenticated and str(getattr(user, "email", "")).strip().lower() == invitation.email
    if request.method == "POST" and mine:
        if request.POST.get("answer") == "decline":
            invitation_decline(token=token, user=user)  # type: ignore[arg-type]
            messages.info(request, _("Invitation declined."))
            return redirect("web-library")
        membership = invitation_accept(token=token, user=user)  # type: ignore[arg-type]
        tenant_switch(request, membership.tenant.slug)
        messages.success(request, _("You joined %(name)s.") % {"name": membership.tenant.name})
        return redirect("web-books")
    status = 200 if request.method != "POST" else 403
    return render(request, "web/invitation.html", {
        "invitation": invitation, "mine": mine, "here": here,
        "signup": f"{reverse('web-signup')}?next={here}", "login": f"{reverse('web-login')}?next={here}",
    }, status=status)


@require_POST
@actor_required
def switch_tenant(request: HttpRequest) -> HttpResponse:
    if not tenant_switch(request, request.POST.get("tenant", "")):
        messages.error(request, _("You are not a member of that workspace."))
    target = request.POST.get("next") or "/books"
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = "/books"
    return redirect(target)


def _keys_page(request: HttpRequest, *, form: ApiKeyForm | None = None, origins_form: CorsOriginsForm | None = None,
               issued: IssuedKey | None = None, status: int = 200) -> HttpResponse:
    actor = page_actor(request)
    if origins_form is None:
        origins_form = CorsOriginsForm(initial={"origins": "\n".join(tenant_cors_origins(actor.tenant))})
    return render(request, "web/keys.html", {
        "form": form or ApiKeyForm(), "origins_form": origins_form, "issued": issued, "keys": api_keys_of(actor),
    }, status=status)


def _admin_refused(request: HttpRequest) -> HttpResponse | None:
    if page_actor(request).is_admin:
        return None
    return render(request, "web/refused.html", {"error": DomainError(_("Only workspace admins manage API keys."))},
                  status=403)


@actor_required
@refusals_as_pages
def api_keys(request: HttpRequest) -> HttpResponse:
    """Admins create (the key is shown once) and revoke their tenant's API keys."""
    if (refused_page := _admin_refused(request)) is not None:
        return refused_page
    actor = page_actor(request)
    form = ApiKeyForm(request.POST or None)
    issued = None
    if request.method == "POST" and form.is_valid():
        scopes = ["read", "write"] if form.cleaned_data["write"] else ["read"]
        with refusal_on_form(form) as refused:
            issued = api_key_create(tenant=actor.tenant, name=form.cleaned_data["name"], scopes=scopes, user=actor.user)
        if not refused:
            form = ApiKeyForm()
    return _keys_page(request, form=form, issued=issued, status=form_page_status(form))


@require_POST
@actor_required
@refusals_as_pages
def api_key_origins(request: HttpRequest) -> HttpResponse:
    """Admins set the browser origins allowed to call the API with their keys (CORS, P-6)."""
    if (refused_page := _admin_refused(request)) is not None:
        return refused_page
    form = CorsOriginsForm(request.POST)
    if form.is_valid():
        with refusal_on_form(form) as refused:
            tenant_cors_set(tenant=page_actor(request).tenant, origins=form.origin_list())
        if not refused:
            messages.success(request, _("Allowed origins saved."))
            return redirect("web-keys")
        return _keys_page(request, origins_form=form, status=refused.status)
    return _keys_page(request, origins_form=form, status=422)


@require_POST
@actor_required
@refusals_as_pages
def api_key_revoke_page(request: HttpRequest, key_id: int) -> HttpResponse:
    if (refused_page := _admin_refused(request)) is not None:
        return refused_page
    actor = page_actor(request)
    api_key_revoke(tenant=actor.tenant, key_id=key_id)
    messages.success(request, _("Key revoked."))
    return redirect("web-keys")



def _admins_only(request: HttpRequest) -> HttpResponse | None:
    if page_actor(request).is_admin:
        return None
    return render(request, "web/refused.html",
                  {"error": DomainError(_("Only workspace admins manage members."))}, status=403)


@actor_required
@refusals_as_pages
def members(request: HttpRequest) -> HttpResponse:
    """Admins see the members and pending invitations and invite by email (the link is shown once and
    mailed): the same services as ``/api/v1/members`` and ``/api/v1/invitations``."""
    refused_page = _admins_only(request)
    if refused_page is not None:
        return refused_page
    actor = page_actor(request)
    form = InviteForm(request.POST or None)
    issued = None
    if request.method == "POST" and form.is_valid():
        with refusal_on_form(form) as refused:
            issued = invitation_create(
                tenant=actor.tenant, email=form.cleaned_data["email"], role=form.cleaned_data["role"],
                invited_by=actor.user,
                link_for=lambda token: request.build_absolute_uri(reverse("web-invitation", args=[token])),
            )
        if not refused:
            form = InviteForm()
    return render(request, "web/members.html", {
        "form": form, "issued": issued, "members": tenant_memberships(actor.tenant),
        "invitations": list(invitations_pending(actor.tenant)),
    }, status=422 if form.errors else 200)


@require_POST
@actor_required
@refusals_as_pages
def invitation_revoke_page(request: HttpRequest, invitation_id: int) -> HttpResponse:
    refused_page = _admins_only(request)
    if refused_page is not None:
        return refused_page
    invitation_revoke(tenant=page_actor(request).tenant, invitation_id=invitation_id)
    messages.success(request, _("Invitation revoked."))
    return redirect("web-members")


def mail_outbox(request: HttpRequest) -> HttpResponse:
    """The embedded default's mail (sign-up confirmations, invitations, resets), for a browser on this
    machine: without a mail server this is how the links reach the person who asked. Anywhere else
    (real mail, DEBUG off, another machine's client) the page does not exist."""
    address = limits.client_address(request)
    try:
        local = ipaddress.ip_address(address).is_loopback
    except ValueError:
        local = False
    if not getattr(settings, "MAIL_OUTBOX_PAGE", False) or not local:
        raise Http404("No such page.")
    return render(request, "web/mail.html", {"messages_sent": mail_outbox_read(settings.EMAIL_FILE_PATH)})
