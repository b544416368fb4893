"""The embedded default's mail page (issue 26 point 1): with no mail server, a person signing up on this
machine finds the confirmation link at /mail; nobody else, and no production server, has the page."""
from __future__ import annotations

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

PASSWORD = "a long pass phrase 42"


@pytest.fixture
def file_mail(settings, tmp_path):
    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    settings.EMAIL_FILE_PATH = str(tmp_path / "mail")
    settings.MAIL_OUTBOX_PAGE = True
    settings.CLIENT_ADDRESS_PROXIES = 0
    return settings


def test_a_sign_up_on_this_machine_is_finished_from_the_mail_page(file_mail, django_capture_on_commit_callbacks):
    browser = Client(REMOTE_ADDR="127.0.0.1")
    with django_capture_on_commit_callbacks(execute=True):
        sent = browser.post("/signup", {"tenant": "Offline", "email": "new@offline.test", "password": PASSWORD})
    assert sent.status_code == 200 and 'href="/mail"' in sent.content.decode()
    page = browser.get("/mail")
    assert page.status_code == 200
    body = page.content.decode()
    assert "new@offline.test" in body
    link = re.search(r'href="(http://testserver/signup/confirm/[^"]+)"', body)
    assert link, body[-2000:]
    confirm = browser.get(link.group(1).removeprefix("http://testserver"))
    assert confirm.status_code == 200  # the confirmation page: its button creates the account


def test_the_mail_page_is_for_this_machine_only(file_mail, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        Client(REMOTE_ADDR="127.0.0.1").post("/signup", {"email": "a@offline.test", "password": PASSWORD})
    assert Client(REMOTE_ADDR="192.0.2.7").get("/mail").status_code == 404
    # Behind the local proxy the client is the forwarded address, not the proxy's.
    file_mail.CLIENT_ADDRESS_PROXIES = 1
    assert Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="192.0.2.7").get("/mail").status_code == 404
    assert Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="127.0.0.1").get("/mail").status_code == 200


def test_no_mail_page_with_a_mail_server_or_in_production(file_mail):
    file_mail.MAIL_OUTBOX_PAGE = False
    assert Client(REMOTE_ADDR="127.0.0.1").get("/mail").status_code == 404
