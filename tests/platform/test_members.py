"""Members (S-1): admins invite, re-role and remove members and issue keys acting as them.

Permission matrix for every member endpoint: anonymous (401), another tenant's admin
(404, P-3), a member (403), an admin's read-only key (403 on writes) and the admin;
a denied call changes no membership and no key.
"""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from lore_platform.tenancy.models import ApiKey, Invitation, Membership, User
from lore_platform.tenancy.services import api_key_create

pytestmark = pytest.mark.django_db


def _state(tenant):
    members = sorted(Membership.objects.for_tenant(tenant).values_list("user__email", "role"))
    keys = sorted(ApiKey.objects.for_tenant(tenant).values_list("prefix", "user_id", "revoked_at"))
    invitations = sorted(Invitation.objects.for_tenant(tenant).values_list("email", "role", "revoked_at"))
    return members, keys, invitations


def accepted(link: str, email: str) -> Client:
    """The invitee, signed in as the invited email's owner, accepts; their browser."""
    user = User.objects.filter(email=email).first() or User.objects.create_user(username=email, email=email)
    browser = Client()
    browser.force_login(user)
    response = browser.post(link.removeprefix("http://testserver"), {"answer": "accept"})
    assert response.status_code == 302, response.content[:300]
    return browser


def _member_id(setup):
    return Membership.objects.for_tenant(setup.tenant).get(user=setup.member).pk


def _requests(setup):
    m = f"/api/v1/members/{_member_id(setup)}"
    return [
        ("list", "get", "/api/v1/members", None, False),
        ("add", "post", "/api/v1/members", {"email": "new@alpha.test"}, True),
        ("role", "patch", m, {"role": "admin"}, True),
        ("key", "post", f"{m}/api-keys", {"name": "bot", "scopes": ["read"]}, True),
        ("remove", "delete", m, None, True),
    ]


def _call(client, method, path, body):
    if method == "get":
        return client.get(path)
    return getattr(client, method)(path, body, format="json")


@pytest.mark.parametrize("caller", ["anonymous", "other tenant", "member", "admin read key"])
def test_member_endpoints_deny_and_change_nothing(tenant_a, tenant_b, anon_client, caller):
    read_admin = api_key_create(tenant=tenant_a.tenant, name="ro", scopes=["read"], user=tenant_a.admin).secret
    client, read, write = {
        "anonymous": (anon_client, 401, 401),
        "other tenant": (tenant_b.admin_client, 200, 404),
        "member": (tenant_a.member_client, 403, 403),
        "admin read key": (tenant_a.client(read_admin), 200, 403),
    }[caller]
    for name, method, path, body, is_write in _requests(tenant_a):
        before = _state(tenant_a.tenant)
        response = _call(client, method, path, body)
        expected = write if is_write else read
        if caller == "other tenant" and name == "add":
            expected = 201  # adds to its *own* tenant: nothing of Alpha changes
        assert response.status_code == expected, (name, response.status_code, response.content[:200])
        if expected >= 400:
            assert "error" in response.json()
        if name == "list" and expected == 200:
            emails = {row["email"] for row in response.json()["results"]}
            assert "member@alpha.test" not in emails or caller != "other tenant"
        assert _state(tenant_a.tenant) == before, name


def test_admin_invites_changes_and_removes_a_member(tenant_a):
    admin = tenant_a.admin_client
    invited = admin.post("/api/v1/members", {"email": "Nuevo@Alpha.test"}, format="json")
    assert invited.status_code == 201, invited.content
    assert invited.json()["email"] == "nuevo@alpha.test" and invited.json()["role"] == "member"
    # An invitation, not a member: nobody joined and no account was made for the address.
    assert invited.json()["link"].startswith("http://testserver/invitations/")
    assert not User.objects.filter(email="nuevo@alpha.test").exists()
    assert "nuevo@alpha.test" not in {row["email"] for row in admin.get("/api/v1/members").json()["results"]}
    accepted(invited.json()["link"], "nuevo@alpha.test")
    again = admin.post("/api/v1/members", {"email": "nuevo@alpha.test", "role": "admin"}, format="json")
    assert again.status_code == 409 and again.json()["error"]["field"] == "email"

    rows = admin.get("/api/v1/members").json()["results"]
    member_id = next(row["id"] for row in rows if row["email"] == "nuevo@alpha.test")
    key = admin.post(f"/api/v1/members/{member_id}/api-keys", {"name": "bot", "scopes": ["read", "write"]},
                     format="json")
    assert key.status_code == 201
    as_member = tenant_a.client(key.json()["key"])
    # The key acts as the member, not as the admin who created it.
    assert as_member.get("/api/v1/tenant").json()["role"] == "member"
    assert as_member.get("/api/v1/tenant").json()["user_email"] == "nuevo@alpha.test"
    assert as_member.get("/api/v1/members").status_code == 403

    promoted = admin.patch(f"/api/v1/members/{member_id}", {"role": "admin"}, format="json")
    assert promoted.status_code == 200 and promoted.json()["role"] == "admin"
    assert as_member.get("/api/v1/tenant").json()["role"] == "admin"
    assert as_member.get("/api/v1/members").status_code == 200

    assert admin.delete(f"/api/v1/members/{member_id}").status_code == 204
    # Removed: the member's keys stop working at once.
    assert as_member.get("/api/v1/tenant").status_code == 401
    listing = admin.get("/api/v1/members").json()["results"]
    assert "nuevo@alpha.test" not in {row["email"] for row in listing}


def test_member_key_cannot_edit_server_wide_lore(make_tenant):
    setup = make_tenant("Gamma", profile="server")
    member_id = Membership.objects.for_tenant(setup.tenant).get(user=setup.member).pk
    key = setup.admin_client.post(f"/api/v1/members/{member_id}/api-keys", {"name": "b", "scopes": ["write"]},
                                  format="json").json()["key"]
    body = {"title": "Server lore", "profile": "server", "scope": "server"}
    assert setup.client(key).post("/api/v1/books", body, format="json").status_code == 403
    assert setup.admin_client.post("/api/v1/books", body, format="json").status_code == 201


def test_the_last_admin_stays(tenant_a):
    admin_id = Membership.objects.for_tenant(tenant_a.tenant).get(user=tenant_a.admin).pk
    demoted = tenant_a.admin_client.patch(f"/api/v1/members/{admin_id}", {"role": "member"}, format="json")
    assert demoted.status_code == 409 and demoted.json()["error"]["rule"] == "S-1"
    assert tenant_a.admin_client.delete(f"/api/v1/members/{admin_id}").status_code == 409
    assert Membership.objects.for_tenant(tenant_a.tenant).get(pk=admin_id).role == "admin"
    # With a second admin, the first may step down.
    tenant_a.admin_client.patch(f"/api/v1/members/{_member_id(tenant_a)}", {"role": "admin"}, format="json")
    assert tenant_a.admin_client.patch(f"/api/v1/members/{admin_id}", {"role": "member"},
                                       format="json").status_code == 200


def test_tenant_member_add_command(tenant_a):
    """The operator's command adds at once (the operator runs the server); tenant admins only invite."""
    out = StringIO()
    call_command("tenant_member_add", tenant_a.tenant.slug, "ops2@alpha.test", "--key", "write", "--json", stdout=out)
    printed = json.loads(out.getvalue())
    assert printed["role"] == "member"
    caller = tenant_a.client(printed["api_key"]).get("/api/v1/tenant").json()
    assert caller["role"] == "member" and caller["scopes"] == ["read", "write"]
    call_command("tenant_member_add", tenant_a.tenant.slug, "boss@alpha.test", "--role", "admin", stdout=StringIO())
    roles = dict(Membership.objects.for_tenant(tenant_a.tenant).values_list("user__email", "role"))
    assert roles["boss@alpha.test"] == "admin"
    with pytest.raises(CommandError, match="member already"):
        call_command("tenant_member_add", tenant_a.tenant.slug, "boss@alpha.test", stdout=StringIO())
    with pytest.raises(CommandError, match="No tenant"):
        call_command("tenant_member_add", "nope", "x@y.test", stdout=StringIO())
