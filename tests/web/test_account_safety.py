"""Accounts nobody else can take over, and abuse limits (issue 26, points 1 and 2).

Each attack an outside reviewer ran against the old code is replayed here: taking over an invited
address through /signup, adding an existing user to a tenant without their consent, learning at
/signup whether an email has an account, and guessing a password 40 times before the right one.
Time is the limits' own clock (``limits.clock``), moved by the tests: no sleeping.
"""
from __future__ import annotations

import logging
import re

import pytest
from django.core import mail
from django.test import Client

from lore_platform.tenancy import limits
from lore_platform.tenancy.models import Invitation, Membership, SignupRequest, Tenant, User
from tests.web.support import PASSWORD, signed_in, with_password

pytestmark = pytest.mark.django_db

ATTACKER_PASSWORD = "the attacker's own 99 phrase"


@pytest.fixture(autouse=True)
def fast_hasher(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """Make a call as if its request's transaction committed: what it mails after commit is sent."""

    def run(call, *args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return call(*args, **kwargs)

    return run


@pytest.fixture
def clock(monkeypatch):
    now = {"t": 1_800_000_000.0}
    monkeypatch.setattr(limits, "clock", lambda: now["t"])
    return now


def html(response) -> str:
    return response.content.decode()


def invite(setup, email: str, role: str = "member", committed=None) -> str:
    """The admin's invitation link, as the API shows it once (and mails, with ``committed``)."""
    post = (lambda *a, **k: committed(setup.admin_client.post, *a, **k)) if committed else setup.admin_client.post
    response = post("/api/v1/members", {"email": email, "role": role}, format="json")
    assert response.status_code == 201, response.content
    return response.json().get("link", "").removeprefix("http://testserver")


def mailed_link(to: str, path_prefix: str) -> str:
    for message in reversed(mail.outbox):
        if to in message.to:
            found = re.search(rf"http://testserver({re.escape(path_prefix)}\S+)", message.body)
            if found:
                return found.group(1)
    raise AssertionError(f"no {path_prefix} link mailed to {to}")


# --- 1. takeover through /signup after an invitation ---------------------------------------------


def test_signing_up_with_an_invited_email_does_not_take_it_over(tenant_a, committed):
    invite(tenant_a, "victim@alpha.test", role="admin")
    attacker = Client()
    answer = committed(attacker.post, "/signup", {"tenant": "Evil", "email": "victim@alpha.test", "password": ATTACKER_PASSWORD})
    assert answer.status_code == 200 and "Check your email" in html(answer)
    # Not signed in, no account with the attacker's password, nothing of Alpha reachable.
    assert attacker.get("/books").status_code == 302
    assert not Client().login(username="victim@alpha.test", password=ATTACKER_PASSWORD)
    assert not User.objects.filter(email="victim@alpha.test").exists()
    assert not Membership.objects.for_tenant(tenant_a.tenant).filter(user__email="victim@alpha.test").exists()
    assert attacker.post("/tenant", {"tenant": tenant_a.tenant.slug}).status_code == 302
    assert attacker.get("/keys").status_code == 302
    # The link that would create the account went to the address's owner only.
    assert mail.outbox[-1].to == ["victim@alpha.test"]


def test_signing_up_never_sets_a_password_on_an_existing_account(tenant_a, committed):
    """An account without a password (made by the operator's command) stays without one."""
    before = User.objects.get(pk=tenant_a.member.pk).password
    answer = committed(Client().post, "/signup", {"tenant": "Evil", "email": "member@alpha.test", "password": ATTACKER_PASSWORD})
    assert answer.status_code == 200
    assert User.objects.get(pk=tenant_a.member.pk).password == before
    assert not Client().login(username="member@alpha.test", password=ATTACKER_PASSWORD)
    assert not Tenant.objects.filter(name="Evil").exists()
    assert not SignupRequest.objects.filter(email="member@alpha.test").exists()
    # The owner is told someone tried, and how to sign in; no link that creates anything.
    told = mail.outbox[-1]
    assert told.to == ["member@alpha.test"] and "/signup/confirm/" not in told.body and "/login" in told.body


def test_the_invitee_signs_up_confirms_and_joins_by_accepting(tenant_a, committed):
    link = invite(tenant_a, "Newcomer@Alpha.test")
    browser = Client()
    offer = browser.get(link)
    assert offer.status_code == 200 and "Alpha" in html(offer)
    signup_path = re.search(r'href="(/signup\?next=[^"]+)"', html(offer)).group(1)
    sent = committed(browser.post, signup_path, {"tenant": "", "email": "newcomer@alpha.test", "password": PASSWORD,
                                      "next": signup_path.split("next=", 1)[1]})
    assert "Check your email" in html(sent)
    confirm = mailed_link("newcomer@alpha.test", "/signup/confirm/")
    assert browser.get(confirm).status_code == 200  # a page with a button: a mail scanner's fetch uses nothing
    assert not User.objects.filter(email="newcomer@alpha.test").exists()
    back = browser.post(confirm)
    assert back.status_code == 302 and back["Location"] == link
    assert browser.post(confirm).status_code == 404  # used once
    assert not Membership.objects.for_tenant(tenant_a.tenant).filter(user__email="newcomer@alpha.test").exists()
    joined = browser.post(link, {"answer": "accept"})
    assert joined.status_code == 302
    assert Membership.objects.for_tenant(tenant_a.tenant).get(user__email="newcomer@alpha.test").role == "member"
    assert "Alpha" in html(browser.get("/books"))
    assert Client().login(username="newcomer@alpha.test", password=PASSWORD)
    assert browser.get(link).status_code == 404  # single use


# --- 1. nobody is added without accepting --------------------------------------------------------


def test_an_existing_user_is_not_added_without_accepting(tenant_a, tenant_b):
    link = invite(tenant_b, tenant_a.member.email, role="admin")
    victim = signed_in(tenant_a.member)
    assert not Membership.objects.for_tenant(tenant_b.tenant).filter(user=tenant_a.member).exists()
    assert tenant_b.tenant.name not in html(victim.get("/books"))  # not in their workspace switcher
    assert tenant_a.member.email not in {r["email"] for r in tenant_b.admin_client.get("/api/v1/members").json()["results"]}
    # Someone else signed in (here: Beta's admin, who holds the link) cannot accept it for them.
    holder = signed_in(tenant_b.admin)
    assert holder.post(link, {"answer": "accept"}).status_code == 403
    assert "another email address" in html(holder.get(link))
    assert not Membership.objects.for_tenant(tenant_b.tenant).filter(user=tenant_a.member).exists()
    # The owner may decline: the link is dead, nothing joined.
    assert victim.post(link, {"answer": "decline"}).status_code == 302
    assert victim.get(link).status_code == 404
    assert not Membership.objects.for_tenant(tenant_b.tenant).filter(user=tenant_a.member).exists()


def test_a_revoked_or_expired_invitation_cannot_be_accepted(tenant_a, tenant_b):
    from datetime import timedelta

    from django.utils import timezone

    link = invite(tenant_a, "late@alpha.test")
    user = User.objects.create_user(username="late@alpha.test", email="late@alpha.test")
    pending = tenant_a.admin_client.get("/api/v1/invitations").json()["results"]
    assert [row["email"] for row in pending] == ["late@alpha.test"] and "link" not in pending[0]
    # Another tenant cannot see or revoke it (P-3).
    assert tenant_b.admin_client.post(f"/api/v1/invitations/{pending[0]['id']}/revoke").status_code == 404
    assert signed_in(user).get(link).status_code == 200
    revoked = tenant_a.admin_client.post(f"/api/v1/invitations/{pending[0]['id']}/revoke")
    assert revoked.status_code == 200
    assert tenant_a.admin_client.get("/api/v1/invitations").json()["results"] == []
    assert signed_in(user).post(link, {"answer": "accept"}).status_code == 404

    again = invite(tenant_a, "late@alpha.test")
    Invitation.objects.for_tenant(tenant_a.tenant).filter(revoked_at__isnull=True).update(
        expires_at=timezone.now() - timedelta(seconds=1))
    assert signed_in(user).post(again, {"answer": "accept"}).status_code == 404
    assert not Membership.objects.for_tenant(tenant_a.tenant).filter(user=user).exists()


def test_inviting_again_replaces_the_pending_link(tenant_a, committed):
    first = invite(tenant_a, "twice@alpha.test")
    second = invite(tenant_a, "twice@alpha.test", role="admin", committed=committed)
    user = User.objects.create_user(username="twice@alpha.test", email="twice@alpha.test")
    assert signed_in(user).get(first).status_code == 404
    assert signed_in(user).post(second, {"answer": "accept"}).status_code == 302
    assert Membership.objects.for_tenant(tenant_a.tenant).get(user=user).role == "admin"
    # Mailed to the invitee, with the same link the admin was shown.
    assert mailed_link("twice@alpha.test", "/invitations/") == second


# --- 2. /signup, /login: no email enumeration ------------------------------------------------------


def _said(response, email: str) -> str:
    body = html(response).replace(email, "EMAIL")
    body = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", body)
    return re.sub(r'"X-CSRFToken": "[^"]+"', "", body)


def test_signup_answers_the_same_for_an_email_with_an_account_and_without(tenant_a):
    with_password(tenant_a.admin)
    taken = Client().post("/signup", {"tenant": "One", "email": tenant_a.admin.email, "password": PASSWORD})
    fresh = Client().post("/signup", {"tenant": "Two", "email": "nobody@nowhere.test", "password": PASSWORD})
    assert taken.status_code == fresh.status_code == 200
    assert _said(taken, tenant_a.admin.email) == _said(fresh, "nobody@nowhere.test")
    assert "has an account" not in html(taken).replace("If the address has an account already", "")


def test_login_answers_the_same_for_a_wrong_password_and_an_unknown_email(tenant_a, clock):
    with_password(tenant_a.member)
    wrong = Client().post("/login", {"username": tenant_a.member.email, "password": "wrong"})
    unknown = Client().post("/login", {"username": "ghost@alpha.test", "password": "wrong"})
    # A refused sign-in is the form again as a 422 (issue 26 point 7), the same for both.
    assert wrong.status_code == unknown.status_code == 422
    assert _said(wrong, tenant_a.member.email) == _said(unknown, "ghost@alpha.test")


# --- 2. brute force: failed sign-ins lock the account and the address ---------------------------


def test_forty_wrong_passwords_lock_the_account_and_the_right_one_is_refused_until_the_end(
        tenant_a, clock, caplog):
    with_password(tenant_a.member)
    caplog.set_level(logging.INFO, logger="loreweave.security")
    statuses = []
    for n in range(40):
        clock["t"] += 1.2  # 40 tries in 49 s, as the reviewer did
        guess = Client(REMOTE_ADDR=f"198.51.100.{n + 1}")  # from many addresses: the account itself locks
        statuses.append(guess.post("/login", {"username": tenant_a.member.email, "password": f"guess {n}"}).status_code)
    assert statuses[:4] == [422] * 4 and set(statuses[4:]) == {429}
    right = Client(REMOTE_ADDR="203.0.113.7")
    refused = right.post("/login", {"username": tenant_a.member.email, "password": PASSWORD})
    assert refused.status_code == 429
    assert "Too many failed sign-ins" in html(refused)
    assert 0 < int(refused["Retry-After"]) <= 900
    assert right.get("/books").status_code == 302  # not signed in
    assert any("lockout started: login-account" in r.getMessage() for r in caplog.records)
    # Another account is not locked by this one's failures.
    with_password(tenant_a.admin)
    assert Client().post("/login", {"username": tenant_a.admin.email, "password": PASSWORD}).status_code == 302
    # When the lockout ends, the right password works, and the end is logged.
    clock["t"] += 901
    assert right.post("/login", {"username": tenant_a.member.email, "password": PASSWORD}).status_code == 302
    assert any("lockout ended: login-account" in r.getMessage() for r in caplog.records)


def test_one_address_guessing_many_accounts_is_locked_out(tenant_a, clock):
    with_password(tenant_a.member)
    guesser = Client(REMOTE_ADDR="192.0.2.50")
    for n in range(20):
        guesser.post("/login", {"username": f"user{n}@alpha.test", "password": "guess"})
    refused = guesser.post("/login", {"username": tenant_a.member.email, "password": PASSWORD})
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    # JSON for a caller that asks for it.
    as_json = guesser.post("/login", {"username": tenant_a.member.email, "password": PASSWORD},
                           HTTP_ACCEPT="application/json")
    assert as_json.status_code == 429 and as_json.json()["error"]["code"] == "throttled"
    assert as_json.json()["error"]["details"]["retry_after"] > 0
    # Another address is heard.
    assert Client(REMOTE_ADDR="192.0.2.51").post(
        "/login", {"username": tenant_a.member.email, "password": PASSWORD}).status_code == 302


def test_a_right_password_ends_a_run_of_wrong_ones(tenant_a, clock):
    with_password(tenant_a.member)
    for _ in range(3):
        for n in range(4):
            Client().post("/login", {"username": tenant_a.member.email, "password": f"typo {n}"})
        assert Client().post("/login", {"username": tenant_a.member.email, "password": PASSWORD}).status_code == 302


# --- 2. sign-ups per address ----------------------------------------------------------------------


def test_signups_are_limited_per_address(db, clock):
    answers = [Client(REMOTE_ADDR="198.51.100.9").post(
        "/signup", {"tenant": f"Space {n}", "email": f"s{n}@spam.test", "password": PASSWORD}).status_code
        for n in range(7)]
    assert answers[:5] == [200] * 5 and answers[5:] == [429, 429]
    refused = Client(REMOTE_ADDR="198.51.100.9").post(
        "/signup", {"tenant": "More", "email": "more@spam.test", "password": PASSWORD})
    assert refused.status_code == 429 and "Too many sign-ups" in html(refused)
    assert 0 < int(refused["Retry-After"]) <= 3600
    assert SignupRequest.objects.count() == 5
    assert Client(REMOTE_ADDR="198.51.100.10").post(
        "/signup", {"tenant": "Elsewhere", "email": "e@ok.test", "password": PASSWORD}).status_code == 200
    clock["t"] += 3601
    assert Client(REMOTE_ADDR="198.51.100.9").post(
        "/signup", {"tenant": "Later", "email": "later@ok.test", "password": PASSWORD}).status_code == 200


def test_a_forwarded_for_header_is_trusted_only_behind_a_configured_proxy(tenant_a, clock, settings):
    for n in range(20):
        Client(REMOTE_ADDR="192.0.2.60", HTTP_X_FORWARDED_FOR=f"10.9.9.{n}").post(
            "/login", {"username": f"u{n}@alpha.test", "password": "guess"})
    # Without a proxy configured, a client's own X-Forwarded-For does not give it fresh addresses.
    assert Client(REMOTE_ADDR="192.0.2.60", HTTP_X_FORWARDED_FOR="10.9.9.99").post(
        "/login", {"username": "x@alpha.test", "password": "g"}).status_code == 429
    settings.CLIENT_ADDRESS_PROXIES = 1
    assert Client(REMOTE_ADDR="192.0.2.60", HTTP_X_FORWARDED_FOR="spoofed, 10.9.9.99").post(
        "/login", {"username": "x@alpha.test", "password": "g"}).status_code == 422  # refused, not locked


# --- the members page: the same invitations as the API ------------------------------------------


def test_the_members_page_invites_shows_the_link_once_and_revokes(tenant_a, tenant_b, committed):
    admin = signed_in(tenant_a.admin)
    page = html(admin.get("/members"))
    assert "member@alpha.test" in page and "admin@alpha.test" in page
    made = committed(admin.post, "/members", {"email": "Page@Alpha.test", "role": "member"})
    assert made.status_code == 200
    link = re.search(r'data-testid="invitation-link">http://testserver(/invitations/[^<]+)<', html(made)).group(1)
    assert mailed_link("page@alpha.test", "/invitations/") == link
    again = html(admin.get("/members"))
    assert link not in again and "page@alpha.test" in again  # pending, the link shown once
    assert not Membership.objects.for_tenant(tenant_a.tenant).filter(user__email="page@alpha.test").exists()
    # The API lists the same invitation.
    pending = tenant_a.admin_client.get("/api/v1/invitations").json()["results"]
    assert [row["email"] for row in pending] == ["page@alpha.test"]
    invitation_id = pending[0]["id"]
    # Members and other tenants' admins cannot invite or revoke here.
    member = signed_in(tenant_a.member)
    assert member.get("/members").status_code == 403
    assert member.post("/members", {"email": "sneaky@alpha.test", "role": "admin"}).status_code == 403
    assert member.post(f"/members/invitations/{invitation_id}/revoke").status_code == 403
    assert signed_in(tenant_b.admin).post(f"/members/invitations/{invitation_id}/revoke").status_code == 404
    assert Client().get("/members").status_code == 302
    assert Invitation.objects.for_tenant(tenant_a.tenant).filter(revoked_at__isnull=True).count() == 1
    assert not Invitation.objects.for_tenant(tenant_a.tenant).filter(email="sneaky@alpha.test").exists()
    # Inviting a member refuses with the reason, nothing written.
    refused = admin.post("/members", {"email": "member@alpha.test", "role": "admin"})
    assert refused.status_code == 422 and "member already" in html(refused)
    assert admin.post(f"/members/invitations/{invitation_id}/revoke").status_code == 302
    assert admin.get(link).status_code == 404


def test_signed_in_workspace_creation_shares_the_per_address_budget(tenant_a, clock):
    creator = signed_in(tenant_a.admin)
    answers = [creator.post("/signup", {"tenant": f"Extra {n}"}).status_code for n in range(6)]
    assert answers == [302] * 5 + [429]
    assert Tenant.objects.filter(name__startswith="Extra ").count() == 5


def test_the_admin_sign_in_is_limited_too(tenant_a, clock):
    """The password check itself counts: Django's admin sign-in is locked like the pages'."""
    from django.contrib.auth import authenticate

    with_password(tenant_a.admin)
    for n in range(5):
        Client().post("/admin/login/", {"username": tenant_a.admin.email, "password": f"guess {n}"})
    assert authenticate(None, username=tenant_a.admin.email, password=PASSWORD) is None
    assert Client().post("/login", {"username": tenant_a.admin.email, "password": PASSWORD}).status_code == 429
    clock["t"] += 901
    assert authenticate(None, username=tenant_a.admin.email, password=PASSWORD) is not None


def test_an_account_without_a_workspace_lands_on_a_page_not_a_loop(db, committed):
    browser = Client()
    committed(browser.post, "/signup", {"tenant": "", "email": "solo@nowhere.test", "password": PASSWORD})
    confirm = mailed_link("solo@nowhere.test", "/signup/confirm/")
    assert browser.post(confirm)["Location"] == "/books"
    landing = browser.get("/books")
    assert landing.status_code == 200 and "No workspace yet" in html(landing)
    assert browser.post("/signup", {"tenant": "Solo"}).status_code == 302
    assert Membership.objects.for_tenant(Tenant.objects.get(name="Solo")).get().user.email == "solo@nowhere.test"


def test_a_tenant_cannot_mail_invitations_without_end(tenant_a, tenant_b, clock, settings):
    settings.INVITATIONS_PER_TENANT_PER_DAY = 3
    for n in range(3):
        assert invite(tenant_a, f"p{n}@elsewhere.test")
    refused = tenant_a.admin_client.post("/api/v1/members", {"email": "p9@elsewhere.test"}, format="json")
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "throttled"
    assert 0 < int(refused["Retry-After"]) <= 86400
    assert not Invitation.objects.for_tenant(tenant_a.tenant).filter(email="p9@elsewhere.test").exists()
    assert invite(tenant_b, "p9@elsewhere.test")  # another tenant's budget is its own
    clock["t"] += 86401
    assert invite(tenant_a, "p9@elsewhere.test")


# --- password reset: the owner of the address, and nobody else, sets a password ---------------------


def test_password_reset_answers_the_same_for_any_address_and_mails_only_the_owner_a_link(tenant_a, committed):
    with_password(tenant_a.member)
    known = committed(Client().post, "/password-reset", {"email": tenant_a.member.email})
    unknown = committed(Client().post, "/password-reset", {"email": "ghost@nowhere.test"})
    assert known.status_code == unknown.status_code == 200
    assert _said(known, tenant_a.member.email) == _said(unknown, "ghost@nowhere.test")
    ghost_mail = next(m for m in mail.outbox if m.to == ["ghost@nowhere.test"])
    assert "/password-reset/" not in ghost_mail.body and "has no account" in ghost_mail.body
    link = mailed_link(tenant_a.member.email, "/password-reset/")
    browser = Client()
    form_page = browser.get(link, follow=True)
    assert form_page.status_code == 200 and 'name="new_password1"' in html(form_page)
    set_path = form_page.redirect_chain[-1][0]
    done = browser.post(set_path, {"new_password1": "a fresh 55 phrase", "new_password2": "a fresh 55 phrase"})
    assert done.status_code == 302 and done["Location"] == "/login"
    assert Client().login(username=tenant_a.member.email, password="a fresh 55 phrase")
    assert not Client().login(username=tenant_a.member.email, password=PASSWORD)
    # Used once: the same link no longer sets anything.
    again = Client().get(link, follow=True)
    assert 'data-testid="invalid-link"' in html(again)


def test_an_account_made_without_a_password_gets_one_only_through_its_mailbox(tenant_a, committed):
    """The operator's command makes accounts without a password; /signup never gives them one, a reset
    link mailed to the address does."""
    assert not User.objects.get(pk=tenant_a.member.pk).has_usable_password()
    committed(Client().post, "/password-reset", {"email": tenant_a.member.email})
    browser = Client()
    page = browser.get(mailed_link(tenant_a.member.email, "/password-reset/"), follow=True)
    browser.post(page.redirect_chain[-1][0], {"new_password1": PASSWORD, "new_password2": PASSWORD})
    assert Client().login(username=tenant_a.member.email, password=PASSWORD)


def test_password_reset_is_limited_per_address_and_per_mailbox(tenant_a, committed, clock):
    with_password(tenant_a.member)
    sent_before = len(mail.outbox)
    for _ in range(5):
        assert committed(Client(REMOTE_ADDR=f"198.51.100.{_ + 20}").post, "/password-reset",
                         {"email": tenant_a.member.email}).status_code == 200
    # The mailbox gets three; the answer stays the same (it tells nothing).
    assert len([m for m in mail.outbox[sent_before:] if m.to == [tenant_a.member.email]]) == 3
    asker = Client(REMOTE_ADDR="198.51.100.77")
    answers = [asker.post("/password-reset", {"email": f"x{n}@nowhere.test"}).status_code for n in range(6)]
    assert answers == [200] * 5 + [429]
