"""A book managed on the pages: settings, delete with confirmation, the trash and Restore (issue 28, point 1)."""
from __future__ import annotations

import pytest

from books.models import Book
from tests.books.factories import fill, make_book
from tests.sharing.helpers import shared_book
from tests.web.support import signed_in

pytestmark = pytest.mark.django_db


def test_settings_page_saves_title_description_tags_language_and_scan_settings(tenant_a):
    book = make_book(tenant_a, title="dal_main_11.3.3", profile="classic")
    shared_book(tenant_a, title="Open", entries=10, tags=["sky islands", "whales"])
    client = signed_in(tenant_a.member)
    page = client.get(f"/books/{book.pk}/settings")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'value="dal_main_11.3.3"' in html
    assert '<option value="sky islands">' in html  # a suggestion from the library's tags
    assert "living_world" not in html  # a classic book has no living world (L-1)

    saved = client.post(f"/books/{book.pk}/settings", {
        "title": "Dal, the main book", "description": "The river kingdoms.", "tags": "rivers, kingdoms, rivers",
        "language": "zh", "scan_depth": "4", "token_budget": "", "whole_words": "on",
    })
    assert saved.status_code == 302
    book.refresh_from_db()
    assert (book.title, book.description, book.tags, book.language) == (
        "Dal, the main book", "The river kingdoms.", ["rivers", "kingdoms"], "zh")
    assert (book.scan_depth, book.token_budget, book.recursive, book.whole_words) == (4, None, False, True)
    assert "Dal, the main book" in client.get("/books").content.decode()


def test_settings_refusals_name_the_field_and_change_nothing(tenant_a, tenant_b):
    book = make_book(tenant_a, title="Varn", profile="classic")
    client = signed_in(tenant_a.member)
    refused = client.post(f"/books/{book.pk}/settings", {"title": "Varn", "scan_depth": "-3"})
    assert refused.status_code in (400, 422)
    assert 'id="id_scan_depth-error"' in refused.content.decode()
    book.refresh_from_db()
    assert (book.scan_depth, book.version) == (None, 1)
    # Another tenant's book, and a reader who may not edit: no page.
    assert signed_in(tenant_b.admin).get(f"/books/{book.pk}/settings").status_code == 404
    assert signed_in(tenant_b.admin).post(f"/books/{book.pk}/delete").status_code == 404


def test_living_world_toggle_only_where_allowed(tenant_a):
    world = make_book(tenant_a, title="World", profile="smart")
    client = signed_in(tenant_a.member)
    assert 'name="living_world"' in client.get(f"/books/{world.pk}/settings").content.decode()
    client.post(f"/books/{world.pk}/settings", {"title": "World", "living_world": "on"})
    world.refresh_from_db()
    assert world.living_world is True


def test_delete_asks_then_moves_to_the_trash_and_restore_brings_it_back(tenant_a):
    book = make_book(tenant_a, title="Varn")
    fill(book, 3)
    client = signed_in(tenant_a.member)
    ask = client.get(f"/books/{book.pk}/delete")
    assert ask.status_code == 200 and "30" in ask.content.decode()
    assert Book.objects.for_tenant(tenant_a.tenant).filter(pk=book.pk).exists()  # asking deletes nothing

    gone = client.post(f"/books/{book.pk}/delete", follow=True)
    assert gone.status_code == 200
    assert "Varn" not in [r for r in gone.content.decode().split("<tbody>")[1].split("</tbody>")[:1]][0]
    assert client.get(f"/books/{book.pk}").status_code == 404

    trash = client.get("/books/trash").content.decode()
    assert "Varn" in trash and f"/books/{book.pk}/restore" in trash
    back = client.post(f"/books/{book.pk}/restore")
    assert back.status_code == 302 and back["Location"] == f"/books/{book.pk}"
    assert client.get(f"/books/{book.pk}").status_code == 200
    assert "Varn" not in client.get("/books/trash").content.decode()


def test_a_public_book_under_ten_entries_comes_back_private_and_says_so(tenant_a):
    book = shared_book(tenant_a, title="Salt", entries=10)
    client = signed_in(tenant_a.member)
    client.post(f"/books/{book.pk}/delete")
    from books.models import Entry

    Entry.objects.for_tenant(tenant_a.tenant).filter(book_id=book.pk).order_by("id").first().delete()
    page = client.post(f"/books/{book.pk}/restore", {"was": "public"}, follow=True).content.decode()
    assert "came back private" in page
    assert Book.objects.for_tenant(tenant_a.tenant).get(pk=book.pk).visibility == "private"


@pytest.mark.parametrize(("path", "upload_name", "title"), [
    # World info: its own `name`, else `originalData.name`, before the file name.
    ("st-worldinfo/chub_hybrid_far_domain.json", "main_far-domain-124141b397b7_world_info.json", "The Far Domain"),
    ("st-worldinfo/user_eu4_originalData.json", "export (3).json", "EU4"),
    # A card: its book's name (else the card's data.name).
    ("card-json/fixture_tavernkit_full_v2.json", "aurora.json", "Oracle's Lore"),
    # Nothing inside names it: the file name, without its extension.
    ("st-worldinfo/dal_arcs_1.1.0.json", "dal_arcs_1.1.0.json", "dal_arcs_1.1.0"),
])
def test_an_imported_book_takes_the_files_own_name_before_the_file_name(tenant_a, path, upload_name, title):
    import io

    from tests.shared_data import require_shared

    data = require_shared("corpus", *path.split("/")).read_bytes()
    upload = io.BytesIO(data)
    upload.name = upload_name
    client = signed_in(tenant_a.member)
    response = client.post("/books", {"action": "import", "file": upload, "profile": "classic", "title": "",
                                      "language": "en"})
    assert response.status_code == 302, response.content.decode()[:2000]
    book = Book.objects.for_tenant(tenant_a.tenant).get()
    assert book.title == title


def test_the_new_pages_speak_spanish(tenant_a):
    book = make_book(tenant_a, title="Varn")
    client = signed_in(tenant_a.member)
    client.cookies["django_language"] = "es"
    assert "Ajustes de Varn" in client.get(f"/books/{book.pk}/settings", HTTP_ACCEPT_LANGUAGE="es").content.decode()
    assert "Mover a la papelera" in client.get(f"/books/{book.pk}/delete", HTTP_ACCEPT_LANGUAGE="es").content.decode()
    client.post(f"/books/{book.pk}/delete", HTTP_ACCEPT_LANGUAGE="es")
    trash = client.get("/books/trash", HTTP_ACCEPT_LANGUAGE="es").content.decode()
    assert "Libros en la papelera" in trash and "Restaurar" in trash
