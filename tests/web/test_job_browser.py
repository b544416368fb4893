"""The AI job pages in a real browser (issue 16, point 5): split notes on the embedded default (no
model: the deterministic splitter), watch the progress bar finish by itself, review the draft
(untick one, edit another), accept it into a new book and see the receipt and the book. Every
page is checked with axe-core and photographed (var/screenshots/).

The suite runs tasks eagerly; here the task is held when queued so the page is seen waiting,
then the test runs the real task (the worker's part) while the browser keeps polling.
"""
from __future__ import annotations

import re
import time
from typing import Any

import pytest

from jobs import tasks
from tests.jobs import conftest as jobs_fixtures
from tests.web import test_browser
from tests.web.support import PASSWORD, with_password
from tests.web.test_browser import Visitor

pytestmark = pytest.mark.django_db(transaction=True)

# Fixtures shared with the other browser tests and the jobs tests.
browser, no_model = test_browser.browser, jobs_fixtures.no_model

NOTES = """# The Drowned Isles

## Saltmarch
A fishing town on stilts where the tide-priests keep the bells rung every hour.

## The Lamplighters
A guild of lighthouse-keepers who rule the isles from their towers by old charter.

## Tidecaller Mara
The youngest tide-priest of Saltmarch; she claims the sea speaks to her at night.
"""


def sign_in(visitor: Visitor, email: str) -> Any:
    page = visitor.go("/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/books$"))
    return page


def test_split_notes_watch_progress_review_and_accept_into_a_new_book(browser, live_server, tenant_a,
                                                                       tenant_b, no_model, monkeypatch):
    held: list[tuple[Any, ...]] = []
    # The publish path (lore_platform.tasks.task_publish) sends it with apply_async: held for the worker.
    monkeypatch.setattr(tasks.job_run, "apply_async", lambda args=(), **options: held.append(tuple(args)))
    with_password(tenant_a.member)
    ana = Visitor(browser, live_server.url, "en-GB", "jobs")
    page = sign_in(ana, tenant_a.member.email)
    page.get_by_role("link", name="Split text into entries").click()
    page.wait_for_url(re.compile(r"/jobs/split$"))
    assert "No model is configured" in page.get_by_test_id("deterministic").inner_text()
    ana.check("split-start")
    page.get_by_label("Your notes").fill(NOTES)
    page.get_by_role("button", name="Split into entries").click()
    page.wait_for_url(re.compile(r"/jobs/\d+$"))
    job_url = page.url
    bar = page.get_by_role("progressbar")
    assert bar.get_attribute("aria-valuenow") == "0"
    assert "Queued" in page.get_by_test_id("job-state").inner_text()
    ana.check("job-queued")
    # No reload from here on: the marker survives only if the page is never loaded again.
    page.evaluate("() => { window.__stayed = true; }")
    polls: list[str] = []
    page.on("request", lambda r: polls.append(r.url) if "part=job" in r.url else None)
    page.wait_for_timeout(2_500)
    assert polls, "the queued job's page asks for its state by itself"
    assert held, "the job was queued for a worker"
    tasks.job_run.apply(args=held[0])  # the worker's part: the real task body
    page.wait_for_selector('#job[data-state="done"]')
    assert page.evaluate("() => window.__stayed === true") and page.url == job_url
    assert page.get_by_role("progressbar").get_attribute("aria-valuenow") == "100"
    assert "Done" in page.get_by_test_id("job-state").inner_text()
    asked = len(polls)
    page.wait_for_timeout(2_500)
    assert len(polls) == asked, "a finished job stops polling"
    ana.check("job-done-review")
    # Review: untick the guild, rename Mara, accept into a new book.
    page.get_by_label("Keep entry 2").uncheck()
    page.locator("#title-2").fill("Mara the Tidecaller")
    page.locator("#canon-2").check()
    page.get_by_label("New book's title").fill("Drowned Isles")
    page.get_by_role("button", name="Accept the ticked entries").click()
    page.wait_for_url(re.compile(r"/books/\d+$"))
    book_path = re.search(r"/books/\d+", page.url).group(0)
    assert page.locator("h1").inner_text() == "Drowned Isles"
    assert page.get_by_test_id("receipt-added").inner_text() == "Added: 2"
    entries = page.locator("#entries").inner_text()
    assert "Saltmarch" in entries and "Mara the Tidecaller" in entries and "The Lamplighters" not in entries
    ana.check("accepted-book")
    # The job page keeps the receipt and links the book.
    ana.go(job_url.replace(live_server.url, ""))
    assert page.get_by_test_id("accepted-book").get_attribute("href") == book_path
    page = ana.go("/jobs")
    assert "Done" in page.get_by_test_id("jobs").inner_text()
    ana.check("jobs-list")
    page = ana.go("/jobs/generate")
    assert "No model is configured" in page.get_by_test_id("no-model").inner_text()
    ana.check("generate-no-model")
    # Another tenant's person: the job does not exist for them (P-3).
    with_password(tenant_b.member)
    bo = Visitor(browser, live_server.url, "en-GB", "jobs-stranger")
    sign_in(bo, tenant_b.member.email)
    assert bo.page.goto(job_url).status == 404
    ana.context.close()
    bo.context.close()


def test_review_refusal_and_model_settings_pass_axe(browser, live_server, tenant_a, no_model,
                                                    django_capture_on_commit_callbacks):
    from jobs.services import job_split_start
    from tests.books.factories import member_actor

    job = job_split_start(actor=member_actor(tenant_a), text=NOTES)
    tasks.job_run.apply(args=(tenant_a.tenant.pk, job.pk))
    with_password(tenant_a.admin)
    admin = Visitor(browser, live_server.url, "es-ES", "jobs-admin")
    page = admin.go("/login")
    page.get_by_label("Correo electrónico").fill(tenant_a.admin.email)
    page.get_by_label("Contraseña").fill(PASSWORD)
    page.get_by_role("button", name="Iniciar sesión").click()
    page.wait_for_url(re.compile(r"/books$"))
    page = admin.go(f"/jobs/{job.pk}")
    assert page.locator("h2#review-h").inner_text() == "Revisa el borrador"
    page.locator("#lore-0").fill("corto")
    started = time.monotonic()
    page.get_by_role("button", name="Aceptar las entradas marcadas").click()
    page.wait_for_selector('[data-testid="entry-error"]')
    assert "W-12" in page.get_by_test_id("entry-error").inner_text() and time.monotonic() - started < 60
    admin.check("review-refused")
    page = admin.go("/jobs/model")
    admin.check("model-settings")
    admin.context.close()


# --- `make run`: a real worker on kombu's filesystem broker moves the bar --------------------------

USER = """
from lore_platform.tenancy.services import tenant_create
made = tenant_create(name="Run", admin_email="run@run.test", profile="smart")
made.admin.set_password(PASSWORD)
made.admin.save()
print("USER", made.admin.email)
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_on_the_embedded_default_a_real_worker_finishes_the_job_while_the_page_watches(browser, tmp_path):
    """As `make run` runs it: gunicorn and a separate Celery worker process on the filesystem broker,
    one SQLite file. The page is watched while the job waits for a worker, then the worker starts."""
    import os
    import subprocess
    import sys
    import urllib.request

    from tests.web.test_embedded_worker import REPO, _manage

    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(LOREWEAVE_DATA_DIR=str(tmp_path), CELERY_BROKER_URL="filesystem://", OMP_NUM_THREADS="1",
               LOREWEAVE_LLM_BASE_URL="", LOREWEAVE_LLM_MODEL="", GUNICORN_WORKERS="2", GUNICORN_ACCESS_LOG="off")
    _manage(env, "migrate", "--noinput", "-v0")
    assert "USER" in _manage(env, "shell", "-c", USER.replace("PASSWORD", repr(PASSWORD)))
    port = _free_port()
    web = subprocess.Popen([sys.executable, "-m", "gunicorn", "config.wsgi:application", "--config",
                            "deploy/gunicorn.conf.py", "--bind", f"127.0.0.1:{port}"],
                           cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = None
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/healthz", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, "gunicorn did not start"
                time.sleep(0.5)
        visitor = Visitor(browser, base, "en-GB", "jobs-run")
        page = sign_in(visitor, "run@run.test")
        visitor.go("/jobs/split")
        page.get_by_label("Your notes").fill(NOTES)
        page.get_by_role("button", name="Split into entries").click()
        page.wait_for_url(re.compile(r"/jobs/\d+$"))
        page.evaluate("() => { window.__stayed = true; }")
        page.wait_for_timeout(2_000)
        assert page.get_by_role("progressbar").get_attribute("aria-valuenow") == "0"
        assert "Queued" in page.get_by_test_id("job-state").inner_text()  # no worker yet: it waits
        worker = subprocess.Popen(  # make run's jobs worker: AI jobs have their own queue (issue 33)
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo",
             "--concurrency=1", "-Q", "loreweave.jobs", "--loglevel=WARNING"],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        page.wait_for_selector('#job[data-state="done"]', timeout=120_000)
        assert page.evaluate("() => window.__stayed === true")  # the page was never reloaded
        assert page.get_by_role("progressbar").get_attribute("aria-valuenow") == "100"
        assert page.locator("#title-2").input_value() == "Tidecaller Mara"
        visitor.check("real-worker-done")
        visitor.context.close()
    finally:
        for process in (worker, web):
            if process is not None:
                process.terminate()
                process.wait(timeout=30)
