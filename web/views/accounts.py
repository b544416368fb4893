"""Sign-up, sign-in/out, the tenant switcher and the admins' API keys page (issue 15, point 1)."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from lore_platform.errors import DomainError
from lore_platform.tenancy.services import api_key_create, api_key_revoke, tenant_create
from web.forms import ApiKeyForm, SignInForm, SignUpForm
from web.refusals import FORM_REFUSED_STATUS, form_page_status, refusal_on_form
from web.selectors import api_keys_of
from web.session import actor_required, tenant_switch
from web.views.common import refusals_as_pages


class SignInView(LoginView):
    template_name = "web/login.html"
    authentication_form = SignInForm
    redirect_authenticated_user = True

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        # A refused sign-in is no success (issue 26, point 7): the form again, as a 422.
        response = super().form_invalid(form)
        response.status_code = FORM_REFUSED_STATUS
        return response


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
    return render(request, "web/signup.html", {"form": form}, status=form_page_status(form))


@require_POST
@actor_required
def switch_tenant(request: HttpRequest) -> HttpResponse:
    if not tenant_switch(request, request.POST.get("tenant", "")):
        messages.error(request, _("You are not a member of that workspace."))
    target = request.POST.get("next") or "/books"
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = "/books"
    return redirect(target)


@actor_required
@refusals_as_pages
def api_keys(request: HttpRequest) -> HttpResponse:
    """Admins create (the key is shown once) and revoke their tenant's API keys."""
    actor = request.actor  # type: ignore[attr-defined]
    if not actor.is_admin:
        return render(request, "web/refused.html", {"error": DomainError(_("Only workspace admins manage API keys."))},
                      status=403)
    form = ApiKeyForm(request.POST or None)
    issued = None
    if request.method == "POST" and form.is_valid():
        scopes = ["read", "write"] if form.cleaned_data["write"] else ["read"]
        with refusal_on_form(form) as refused:
            issued = api_key_create(tenant=actor.tenant, name=form.cleaned_data["name"], scopes=scopes, user=actor.user)
        if not refused:
            form = ApiKeyForm()
    return render(request, "web/keys.html", {"form": form, "issued": issued, "keys": api_keys_of(actor)},
                  status=form_page_status(form))


@require_POST
@actor_required
@refusals_as_pages
def api_key_revoke_page(request: HttpRequest, key_id: int) -> HttpResponse:
    actor = request.actor  # type: ignore[attr-defined]
    if not actor.is_admin:
        return render(request, "web/refused.html", {"error": DomainError(_("Only workspace admins manage API keys."))},
                      status=403)
    api_key_revoke(tenant=actor.tenant, key_id=key_id)
    messages.success(request, _("Key revoked."))
    return redirect("web-keys")
