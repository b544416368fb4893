"""Sign-up, sign-in/out, the tenant switcher and the admins' API keys page (issue 15, point 1)."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.views import LoginView
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from lore_platform.errors import DomainError
from lore_platform.tenancy.selectors import tenant_cors_origins
from lore_platform.tenancy.services import (
    IssuedKey,
    api_key_create,
    api_key_revoke,
    tenant_cors_set,
    tenant_create,
)
from web.forms import ApiKeyForm, CorsOriginsForm, SignInForm, SignUpForm
from web.refusals import refusal_on_form
from web.selectors import api_keys_of
from web.session import actor_required, tenant_switch
from web.views.common import refusals_as_pages


class SignInView(LoginView):
    template_name = "web/login.html"
    authentication_form = SignInForm
    redirect_authenticated_user = True


def signup(request: HttpRequest) -> HttpResponse:
    """A new workspace (tenant) with its first admin, signed in at once."""
    form = SignUpForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        with refusal_on_form(form) as refused, transaction.atomic():
            created = tenant_create(name=data["tenant"], admin_email=data["email"], profile="smart")
            if created.admin.has_usable_password():
                # An existing user keeps their password: joining a workspace never resets it.
                raise DomainError(_("That email has an account already: sign in first."), field="email")
            created.admin.set_password(data["password"])
            created.admin.save(update_fields=["password"])
        if not refused:
            login(request, created.admin, backend="django.contrib.auth.backends.ModelBackend")
            return redirect("web-books")
    return render(request, "web/signup.html", {"form": form})


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
    actor = request.actor  # type: ignore[attr-defined]
    if origins_form is None:
        origins_form = CorsOriginsForm(initial={"origins": "\n".join(tenant_cors_origins(actor.tenant))})
    return render(request, "web/keys.html", {
        "form": form or ApiKeyForm(), "origins_form": origins_form, "issued": issued, "keys": api_keys_of(actor),
    }, status=status)


def _admin_refused(request: HttpRequest) -> HttpResponse | None:
    if request.actor.is_admin:  # type: ignore[attr-defined]
        return None
    return render(request, "web/refused.html", {"error": DomainError(_("Only workspace admins manage API keys."))},
                  status=403)


@actor_required
@refusals_as_pages
def api_keys(request: HttpRequest) -> HttpResponse:
    """Admins create (the key is shown once) and revoke their tenant's API keys."""
    if (refused_page := _admin_refused(request)) is not None:
        return refused_page
    actor = request.actor  # type: ignore[attr-defined]
    form = ApiKeyForm(request.POST or None)
    issued = None
    status = 200
    if request.method == "POST" and form.is_valid():
        scopes = ["read", "write"] if form.cleaned_data["write"] else ["read"]
        with refusal_on_form(form) as refused:
            issued = api_key_create(tenant=actor.tenant, name=form.cleaned_data["name"], scopes=scopes, user=actor.user)
        status = refused.status
        if not refused:
            form = ApiKeyForm()
    return _keys_page(request, form=form, issued=issued, status=status)


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
            tenant_cors_set(tenant=request.actor.tenant, origins=form.origin_list())  # type: ignore[attr-defined]
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
    actor = request.actor  # type: ignore[attr-defined]
    api_key_revoke(tenant=actor.tenant, key_id=key_id)
    messages.success(request, _("Key revoked."))
    return redirect("web-keys")
