"""The pages in a real browser (issue 15): the scripted journey of the "done when", each page
checked with axe-core and photographed (var/screenshots/, kept by CI)."""
from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.web.browser import (
    AXE,
    CHROMIUM,
    CHROMIUM_ARGS,
    CspWatchedBrowser,
    axe_violations,
    shot,
)
from tests.web.support import PASSWORD, world_info

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM) or not AXE.exists():
        pytest.fail(f"browser tests need {CHROMIUM} and {AXE}: run scripts/setup.sh (as root)")
    # Playwright's sync API runs an event loop in this thread, where the tests' own ORM calls run
    # too; only while these tests run (later tests' subprocesses must not inherit it).
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield CspWatchedBrowser(launched)  # a CSP violation fails the test (tests/web/conftest.py)
            launched.close()
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


class Visitor:
    """One person in one browser context: every page visited is checked with axe and photographed."""

    def __init__(self, browser: Any, base: str, locale: str, name: str) -> None:
        self.context = browser.new_context(locale=locale, viewport={"width": 1280, "height": 900})
        # A loaded 2-core CI machine (and the embedder's first load) can take longer than 30 s.
        self.context.set_default_timeout(90_000)
        self.context.set_default_navigation_timeout(90_000)
        self.page = self.context.new_page()
        self.base = base
        self.name = name
        self.steps = 0
        self.page.on("pageerror", lambda exc: pytest.fail(f"JavaScript error on {self.page.url}: {exc}"))

    def go(self, path: str) -> Any:
        self.page.goto(self.base + path)
        return self.page

    def check(self, step: str) -> None:
        self.steps += 1
        shot(self.page, f"{self.name}-{self.steps:02d}-{step}")
        blocking = axe_violations(self.page)
        assert not blocking, f"{step}: {blocking}"


def confirmation_link(address: str) -> str:
    """The path of the sign-up confirmation link mailed to ``address`` (the test outbox)."""
    from django.core import mail

    for message in reversed(mail.outbox):
        found = re.search(r"https?://[^/\s]+(/signup/confirm/\S+)", message.body)
        if address in message.to and found:
            return found.group(1)
    raise AssertionError(f"no confirmation link mailed to {address}")


def test_journey_from_sign_up_to_a_chat_preview_in_another_tenant(browser, live_server, tmp_path):
    base = live_server.url
    # --- the author: a Spanish speaker --------------------------------------------------
    ana = Visitor(browser, base, "es-ES", "author")
    page = ana.go("/signup")
    assert page.locator("h1").inner_text() == "Crear un espacio"
    ana.check("signup")
    page.get_by_label("Nombre del espacio").fill("Cartógrafos")
    page.get_by_label("Correo electrónico").fill("ana@cartografos.test")
    page.get_by_label("Contraseña").fill(PASSWORD)
    page.get_by_role("button", name="Registrarse").click()
    page.wait_for_selector('[data-testid="signup-sent"]')
    ana.check("signup-sent")
    # The account exists once the link mailed to the address is used (issue 26).
    page = ana.go(confirmation_link("ana@cartografos.test"))
    page.get_by_role("button", name="Confirmar e iniciar sesión").click()
    page.wait_for_url(re.compile(r"/books$"))
    ana.check("my-books")
    page.locator("#create-h").locator("..").get_by_label("Título").fill("Mundo de Varn")
    page.locator("#create-h").locator("..").get_by_label("Idioma").fill("es")
    page.get_by_role("button", name="Crear", exact=True).click()
    page.wait_for_url(re.compile(r"/books/\d+$"))
    book_path = re.search(r"/books/\d+", page.url).group(0)
    source = tmp_path / "varn.json"
    source.write_bytes(world_info())
    page.locator("#into-h").locator("..").get_by_label("Archivo").set_input_files(str(source))
    page.locator("#into-h").locator("..").get_by_role("button", name="Importar").click()
    page.wait_for_selector("#receipt-h")
    assert page.get_by_test_id("receipt-added").inner_text() == "Añadidas: 12"
    assert "Omitidas: 2" in page.locator(".receipt").inner_text()
    ana.check("import-receipt")
    # Reorder: the last place goes to the top of the list.
    last = page.locator("tr[data-entry]").last
    moved_title = last.locator("td").nth(2).inner_text()
    last.get_by_role("button", name=re.compile("arriba del todo")).click()
    page.wait_for_load_state()
    assert page.locator("tr[data-entry]").first.locator("td").nth(2).inner_text() == moved_title
    # Drag it back down onto the third row: it takes that place (static/web/editor.js).
    with page.expect_navigation():
        page.locator("tr[data-entry]").first.drag_to(page.locator("tr[data-entry]").nth(2))
    assert page.locator("tr[data-entry]").nth(2).locator("td").nth(2).inner_text() == moved_title
    ana.check("editor-reordered")
    # Preview (htmx: the result replaces its box, the page stays).
    page.get_by_role("link", name="Vista previa").first.click()
    page.get_by_label("Mensaje de prueba").fill("Vamos al Bosque de Lira esta noche")
    page.get_by_label("Modelo").select_option("gpt-4o")
    page.get_by_role("button", name="Vista previa", exact=True).last.click()
    page.wait_for_selector('[data-testid="included"]')
    included = page.get_by_test_id("included").inner_text()
    assert "Bosque de Lira" in included and "Varn" in included  # matched by name; canon always
    ana.check("preview")
    # Publish.
    ana.go(book_path)
    page.get_by_label("Visibilidad").select_option("public")
    page.locator("#share-h").locator("..").get_by_role("button", name="Guardar").first.click()
    page.wait_for_selector(".msg")
    assert "Visibilidad guardada" in page.locator(".messages").inner_text()
    ana.check("published")

    # --- the reader: another tenant, in English -----------------------------------------
    bo = Visitor(browser, base, "en-GB", "reader")
    page = bo.go("/signup")
    page.get_by_label("Workspace name").fill("Harbor Games")
    page.get_by_label("Email").fill("bo@harbor.test")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign up").click()
    page.wait_for_selector('[data-testid="signup-sent"]')
    page = bo.go(confirmation_link("bo@harbor.test"))
    page.get_by_role("button", name="Confirm and sign in").click()
    page.wait_for_url(re.compile(r"/books$"))
    bo.go("/characters")
    page.get_by_label("Name").fill("Captain Mira")
    page.get_by_role("button", name="Create").click()
    bo.check("characters")
    page = bo.go("/library")
    page.get_by_label("Search", exact=True).fill("a river city trading salt and iron, singing forests")
    page.get_by_label("meaning").check()
    page.get_by_role("button", name="Search").click()
    page.wait_for_selector(".card.book")
    assert page.locator(".card.book h2").first.inner_text() == "Mundo de Varn"
    bo.check("library-meaning-search")
    page.locator(".card.book h2 a").first.click()
    library_path = re.search(r"/library/\d+", page.url).group(0)
    assert "Shown in its original language" in page.locator("main").inner_text()
    bo.check("library-book")
    page.get_by_role("button", name="Copy to my library").click()
    page.wait_for_url(re.compile(r"/books/\d+$"))
    assert page.locator("h1").inner_text() == "Mundo de Varn"
    assert "12 entries" in page.locator("#entries").inner_text()
    bo.check("copied")
    bo.go(library_path)
    page.get_by_label("Attach to").select_option(label="Captain Mira (character)")
    page.get_by_role("button", name="Attach").click()
    page.wait_for_url(re.compile(r"/characters$"))
    assert "Mundo de Varn" in page.locator("main").inner_text()
    page.get_by_role("link", name="Preview a chat").click()
    page.get_by_label("Sample message").fill("We sail to Varn and the Bosque de Lira")
    page.get_by_label("Profile").select_option("smart")
    page.get_by_role("button", name="Preview", exact=True).last.click()
    page.wait_for_selector('[data-testid="included"]')
    assert "Bosque de Lira" in page.get_by_test_id("included").inner_text()
    bo.check("chat-preview")
    # The author's book page is hers: in another tenant it does not exist (P-3), public or not.
    assert bo.page.goto(base + book_path).status == 404
    ana.context.close()
    bo.context.close()


def test_sign_in_keys_and_library_pages_pass_axe(browser, live_server, tenant_a):
    from tests.web.support import with_password

    with_password(tenant_a.admin)
    visitor = Visitor(browser, live_server.url, "en-GB", "pages")
    page = visitor.go("/library")
    visitor.check("library-empty")
    page = visitor.go("/login")
    visitor.check("login")
    page.get_by_label("Email").fill(tenant_a.admin.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/books$"))
    page = visitor.go("/keys")
    page.get_by_label("Key name").fill("bot")
    page.get_by_role("button", name="Create key").click()
    assert page.get_by_test_id("new-key").inner_text().startswith("lw_")
    visitor.check("api-keys")
    page.get_by_role("button", name="Revoke bot").click()
    assert "Key revoked." in page.locator(".messages").inner_text()
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(re.compile(r"/library$"))
    assert page.get_by_role("link", name="Sign in").count() == 1
    visitor.context.close()
