"""The import/export/backup API: multipart uploads with the receipt as the response, downloads,
the permission matrix (nothing changes on a denial), hostile input and size caps → 4xx JSON,
nothing written."""

from __future__ import annotations

import io
import json
import zlib
from typing import Any

import pytest
from django.urls import resolve

from books.api.io_views import BookImportView
from books.formats import read_book
from books.formats.card_png import PNG_SIGNATURE
from books.lineages import lineage_get_or_create
from books.models import Book, Profile, Scope
from lore_platform.tenancy.services import api_key_create, membership_set, user_get_or_create
from tests.books.factories import fill, make_book, make_entry
from tests.books.formats.builders import (
    card,
    card_book,
    chara_chunk,
    charx,
    chunk,
    nested,
    png_with,
    st_entry,
    world,
    world_bytes,
)
from tests.books.io_support import entry_rows, tenant_state
from tests.shared_data import require_shared

pytestmark = pytest.mark.django_db

IMPORT = "/api/v1/books/import"


def _file(data: bytes, name: str = "lore.json") -> io.BytesIO:
    upload = io.BytesIO(data)
    upload.name = name
    return upload


def _post(client: Any, path: str, data: bytes, name: str = "lore.json", **fields: Any) -> Any:
    return client.post(path, {"file": _file(data, name), **fields}, format="multipart")


def _error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"].startswith("application/json")
    body = response.json()["error"]
    assert body["code"] and body["message"]
    return body


def _both_tenants(tenant_a: Any, tenant_b: Any) -> tuple[Any, Any]:
    return tenant_state(tenant_a.tenant), tenant_state(tenant_b.tenant)


def _other_member_client(setup: Any) -> Any:
    other = user_get_or_create(email=f"other@{setup.tenant.slug}.test")
    membership_set(tenant=setup.tenant, user=other, role="member")
    return setup.client(api_key_create(tenant=setup.tenant, name="other", scopes=["read", "write"], user=other).secret)


# --- the endpoints -------------------------------------------------------------------------


def test_books_import_is_not_captured_by_the_book_routes():
    assert resolve(IMPORT).func.view_class is BookImportView
    assert resolve("/api/v1/books/12/import").url_name == "book-import-into"
    assert resolve("/api/v1/books/12/export").url_name == "book-export"
    assert resolve("/api/v1/books/12").url_name == "book-detail"


def test_import_a_new_book_answers_the_receipt(tenant_a):
    data = (require_shared("corpus") / "st-worldinfo/sillytavern_eldoria_2024-09.json").read_bytes()
    response = _post(tenant_a.member_client, IMPORT, data, "Eldoria.json", profile="classic")
    assert response.status_code == 201, response.content
    body = response.json()
    book, receipt = body["book"], body["receipt"]
    assert book["title"] == "Eldoria" and book["profile"] == "classic" and book["entry_count"] == 4 and book["can_edit"]
    assert receipt["added"] == 4 and receipt["mode"] == "new" and receipt["format"] == "sillytavern-world-info"
    assert receipt["book"]["id"] == book["id"] and len(receipt["entry_ids"]) == 4
    assert receipt["keys_as"] == "triggers"


def test_profile_defaults_to_the_tenants_and_title_and_scope_are_taken(tenant_a):
    response = _post(
        tenant_a.admin_client, IMPORT, world_bytes(2), title="Typed name", scope="server", profile="server"
    )
    assert response.status_code == 201, response.content
    assert response.json()["book"]["title"] == "Typed name" and response.json()["book"]["scope"] == "server"
    default = _post(tenant_a.member_client, IMPORT, world_bytes(1), "Plain.json")
    assert default.json()["book"]["profile"] == tenant_a.tenant.default_profile


def test_import_a_persona_book_by_lineage(tenant_a):
    lineage = lineage_get_or_create(tenant=tenant_a.tenant, key="Hero")
    response = _post(
        tenant_a.admin_client, IMPORT, world_bytes(2), profile="server", scope="persona", lineage=str(lineage.public_id)
    )
    assert response.status_code == 201, response.content
    assert response.json()["book"]["lineage"] == str(lineage.public_id)
    # The lineage has its book now (S-2).
    assert (
        _error(
            _post(
                tenant_a.admin_client,
                IMPORT,
                world_bytes(1),
                profile="server",
                scope="persona",
                lineage=str(lineage.public_id),
                title="Again",
            ),
            409,
        )["rule"]
        == "S-2"
    )


def test_a_card_without_a_book_answers_200_and_writes_nothing(tenant_a):
    before = tenant_state(tenant_a.tenant)
    response = _post(tenant_a.member_client, IMPORT, json.dumps(card(None)).encode(), "card.json")
    assert response.status_code == 200
    assert response.json()["book"] is None and response.json()["receipt"]["changes_nothing"] is True
    assert tenant_state(tenant_a.tenant) == before


def test_an_existing_name_is_409(tenant_a):
    make_book(tenant_a, title="Taken")
    before = tenant_state(tenant_a.tenant)
    body = _error(_post(tenant_a.member_client, IMPORT, world_bytes(1), title="taken"), 409)
    assert body["rule"] == "I-2" and body["field"] == "title"
    assert tenant_state(tenant_a.tenant) == before


def test_import_into_append_and_replace(tenant_a):
    book = make_book(tenant_a)
    path = f"/api/v1/books/{book.pk}/import"
    first = _post(tenant_a.member_client, path, world_bytes(3))
    assert first.status_code == 200, first.content
    assert first.json()["receipt"]["added"] == 3 and first.json()["receipt"]["mode"] == "append"
    again = _post(tenant_a.member_client, path, world_bytes(4))
    assert again.json()["receipt"]["added"] == 1 and again.json()["receipt"]["skipped_count"] == 3
    replaced = _post(tenant_a.member_client, path, world_bytes(2), mode="replace")
    assert replaced.json()["receipt"]["replaced"] == 4 and replaced.json()["book"]["entry_count"] == 2
    assert _error(_post(tenant_a.member_client, path, world_bytes(1), mode="merge"), 400)["field"] == "mode"


@pytest.mark.parametrize(
    "to, content_type, suffix",
    [
        ("sillytavern", "application/json", ".json"),
        ("card-v2", "application/json", ".card.json"),
        ("card-v2-png", "image/png", ".png"),
        ("native", "application/json", ".loreweave.json"),
    ],
)
def test_export_downloads(tenant_a, tenant_b, to, content_type, suffix):
    book = make_book(tenant_a, title="Harbour")
    make_entry(book, title="Docks", content="The docks open at dawn and close at dusk.", enabled=False)
    response = tenant_a.member_client.get(f"/api/v1/books/{book.pk}/export", {"format": to})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith(content_type)
    assert response["Content-Disposition"] == f'attachment; filename="Harbour{suffix}"'
    payload = response.content
    if to == "card-v2-png":
        assert payload.startswith(PNG_SIGNATURE)
    imported = read_book(payload)
    assert [e.title for e in imported.entries] == ["Docks"] and imported.entries[0].enabled is False
    # …and the download imports again, in another tenant, with its name.
    again = _post(tenant_b.member_client, IMPORT, payload, f"Harbour{suffix}", profile="classic")
    assert again.status_code == 201 and again.json()["book"]["title"] == "Harbour"


def test_export_format_defaults_and_refusals(tenant_a):
    book = make_book(tenant_a)
    make_entry(book)
    assert tenant_a.member_client.get(f"/api/v1/books/{book.pk}/export")["Content-Disposition"].endswith('.json"')
    assert (
        _error(tenant_a.member_client.get(f"/api/v1/books/{book.pk}/export", {"format": "docx"}), 400)["field"]
        == "format"
    )
    assert _error(tenant_a.member_client.get("/api/v1/books/999999/export"), 404)


def test_import_limits_are_shown(tenant_a, settings):
    body = tenant_a.member_client.get("/api/v1/import-limits").json()
    assert body["limits"]["max_json_bytes"] == 2 * 1024 * 1024 and body["limits"]["max_import_batch"] == 500
    assert body["entry_caps"] == {"smart_book": 2000, "server_persona": 250, "server_wide": 250, "import_batch": 500}
    assert set(body["export_formats"]) == {"sillytavern", "card-v2", "card-v2-png", "native"}
    settings.LOREWEAVE_IMPORT_LIMITS = {"max_png_bytes": 1234}
    shown = tenant_a.member_client.get("/api/v1/import-limits").json()
    assert shown["limits"]["max_png_bytes"] == 1234
    assert shown["max_upload_bytes"] >= max(shown["limits"]["max_json_bytes"], shown["limits"]["max_charx_bytes"])
    assert _error(tenant_a.client(None).get("/api/v1/import-limits"), 401)


def test_backup_and_restore_endpoints(tenant_a, tenant_b):
    server = make_book(tenant_a, owner=None, profile=Profile.SERVER, title="Rules", channels=["42"])
    make_entry(server, content="Rules apply in channel 42 only.")
    response = tenant_a.admin_client.get("/api/v1/backup")
    assert response.status_code == 200 and response["Content-Disposition"].startswith(
        'attachment; filename="loreweave-backup-alpha-'
    )
    restored = _post(tenant_b.admin_client, "/api/v1/backup/restore", response.content, "backup.json")
    assert restored.status_code == 201, restored.content
    assert restored.json()["books_restored"] == 1 and restored.json()["entries_restored"] == 1
    assert Book.objects.for_tenant(tenant_b.tenant).get(title="Rules").channels == ["42"]
    # Again: the name is taken, nothing is written.
    before = tenant_state(tenant_b.tenant)
    assert (
        _error(_post(tenant_b.admin_client, "/api/v1/backup/restore", response.content, "backup.json"), 409)["rule"]
        == "I-2"
    )
    assert tenant_state(tenant_b.tenant) == before


def test_openapi_schema_lists_the_endpoints(client):
    paths = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    for path in (
        "/api/v1/books/import",
        "/api/v1/books/{book_id}/import",
        "/api/v1/books/{book_id}/export",
        "/api/v1/backup",
        "/api/v1/backup/restore",
        "/api/v1/import-limits",
    ):
        assert path in paths, path
    assert "multipart/form-data" in paths["/api/v1/books/import"]["post"]["requestBody"]["content"]


# --- the permission matrix ------------------------------------------------------------------


def _calls(book: Book) -> list[tuple[str, str, str, dict[str, Any], bool]]:
    """(name, method, path, multipart fields, is_write) for every endpoint on one book."""
    return [
        (
            "import new",
            "post",
            IMPORT,
            {"file": _file(world_bytes(1)), "title": "New by matrix", "profile": book.profile, "scope": book.scope},
            True,
        ),
        ("import into", "post", f"/api/v1/books/{book.pk}/import", {"file": _file(world_bytes(2))}, True),
        (
            "replace",
            "post",
            f"/api/v1/books/{book.pk}/import",
            {"file": _file(world_bytes(1)), "mode": "replace"},
            True,
        ),
        ("export", "get", f"/api/v1/books/{book.pk}/export", {"format": "native"}, False),
    ]


def _run(client: Any, book: Book) -> dict[str, int]:
    codes = {}
    for name, method, path, fields, _ in _calls(book):
        response = client.get(path, fields) if method == "get" else client.post(path, fields, format="multipart")
        codes[name] = response.status_code
        if response.status_code >= 400:
            _error(response, response.status_code)
    return codes


@pytest.fixture
def personal_book(tenant_a):
    book = make_book(tenant_a, owner="member", title="Member's")
    make_entry(book)
    return book


@pytest.fixture
def server_book(tenant_a):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER, scope=Scope.SERVER, title="Server")
    make_entry(book, content="Server lore that every member reads.")
    return book


@pytest.mark.parametrize(
    "who, expected",
    [
        ("anon", {"import new": 401, "import into": 401, "replace": 401, "export": 401}),
        ("other tenant", {"import new": 201, "import into": 404, "replace": 404, "export": 404}),
        ("other member", {"import new": 201, "import into": 404, "replace": 404, "export": 404}),
        ("admin", {"import new": 201, "import into": 404, "replace": 404, "export": 404}),
        ("read key", {"import new": 403, "import into": 403, "replace": 403, "export": 200}),
    ],
)
def test_matrix_on_a_personal_book_denials_change_nothing(tenant_a, tenant_b, personal_book, who, expected):
    client = {
        "anon": tenant_a.client(None),
        "other tenant": tenant_b.member_client,
        "other member": _other_member_client(tenant_a),
        "admin": tenant_a.admin_client,
        "read key": tenant_a.read_client,
    }[who]
    target_before = (
        entry_rows(personal_book),
        Book.objects.for_tenant(tenant_a.tenant).get(pk=personal_book.pk).version,
    )
    codes = _run(client, personal_book)
    assert codes == expected
    assert (
        entry_rows(personal_book),
        Book.objects.for_tenant(tenant_a.tenant).get(pk=personal_book.pk).version,
    ) == target_before
    if expected["import new"] != 201:
        assert not Book.objects.unscoped().filter(title="New by matrix").exists()


def test_matrix_on_a_personal_book_owner(tenant_a, personal_book):
    assert _run(tenant_a.member_client, personal_book) == {
        "import new": 201,
        "import into": 200,
        "replace": 200,
        "export": 200,
    }


@pytest.mark.parametrize(
    "who, expected",
    [
        ("member", {"import new": 403, "import into": 403, "replace": 403, "export": 403}),
        ("read key", {"import new": 403, "import into": 403, "replace": 403, "export": 403}),
        ("other tenant admin", {"import new": 201, "import into": 404, "replace": 404, "export": 404}),
    ],
)
def test_matrix_on_a_server_book_denials_change_nothing(tenant_a, tenant_b, server_book, who, expected):
    """S-1: server-wide books are imported into and exported by tenant admins only."""
    client = {
        "member": tenant_a.member_client,
        "read key": tenant_a.read_client,
        "other tenant admin": tenant_b.admin_client,
    }[who]
    before = tenant_state(tenant_a.tenant)
    assert _run(client, server_book) == expected
    assert tenant_state(tenant_a.tenant) == before


def test_matrix_on_a_server_book_admin(tenant_a, server_book):
    assert _run(tenant_a.admin_client, server_book) == {
        "import new": 201,
        "import into": 200,
        "replace": 200,
        "export": 200,
    }


@pytest.mark.parametrize(
    "who, backup, restore",
    [
        ("anon", 401, 401),
        ("member", 403, 403),
        ("read key", 403, 403),
        ("admin", 200, 201),
    ],
)
def test_matrix_backup_and_restore(tenant_a, tenant_b, who, backup, restore):
    make_book(tenant_b, owner=None, profile=Profile.SERVER, title="From B")
    data = tenant_b.admin_client.get("/api/v1/backup").content
    client = {
        "anon": tenant_a.client(None),
        "member": tenant_a.member_client,
        "read key": tenant_a.read_client,
        "admin": tenant_a.admin_client,
    }[who]
    before = tenant_state(tenant_a.tenant)
    assert client.get("/api/v1/backup").status_code == backup
    response = _post(client, "/api/v1/backup/restore", data, "backup.json")
    assert response.status_code == restore, response.content
    if restore != 201:
        _error(response, restore)
        assert tenant_state(tenant_a.tenant) == before


# --- hostile input: 4xx JSON, nothing written ----------------------------------------------------


def _huge_png_chunk() -> bytes:
    return png_with(b"\x7f\xff\xff\xff" + b"tEXt" + b"chara\x00AAAA")


def _corrupt_png_chunk() -> bytes:
    return png_with(chunk(b"tEXt", b"chara\x00" + b"eyJzcGVjIjogImNoYXJhX2NhcmRfdjIifQ==", crc=1234))


def _ztxt_bomb() -> bytes:
    return png_with(chunk(b"zTXt", b"chara\x00\x00" + zlib.compress(b"A" * (40 * 1024 * 1024), 9)))


def _charx_bomb() -> bytes:
    return charx({"card.json": '{"spec": "chara_card_v3", "data": {"name": "' + " " * (6 * 1024 * 1024) + '"}}'})


def _charx_traversal() -> bytes:
    return charx({"card.json": json.dumps(card(card_book(1), spec="chara_card_v3")), "../../evil.json": b"x"})


HOSTILE = {
    "malformed json": (b"{ invalid", 400, "I-1", "not valid JSON"),
    "truncated json": (b'{"entries": {"0": {"content": ', 400, "I-1", "truncated"),
    "invalid utf-8": (b'{"entries": {"0": {"content": "caf\xe9"}}}', 400, "I-1", "UTF-8"),
    "empty file": (b"", 400, "I-1", "empty"),
    "corrupt png chunk": (_corrupt_png_chunk(), 400, "I-1", "CRC"),
    "huge png chunk": (_huge_png_chunk(), 400, "I-1", "claims"),
    "png ztxt bomb": (_ztxt_bomb(), 413, "I-3", "bomb"),
    "charx bomb": (_charx_bomb(), 413, "I-3", "card.json"),
    "charx path traversal": (_charx_traversal(), 400, "I-1", "unsafe path"),
    "truncated charx": (charx({"card.json": json.dumps(card(card_book(1)))})[:60], 400, "I-1", "CHARX"),
    "deep nesting": (nested(101).encode(), 400, "I-3", "nested"),
    "bracket bomb": (b'{"entries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "I-3", "nested"),
    "10,000-entry book": (
        json.dumps({"entries": {str(i): {"content": "x"} for i in range(10_000)}}).encode(),
        422,
        "I-3",
        "10,000",
    ),
    "duplicate uid keys": (
        b'{"entries": {"0": {"uid": 0, "content": "a"}, "0": {"uid": 0, "content": "b"}}}',
        400,
        "I-1",
        "duplicate",
    ),
    "duplicate uids": (json.dumps({"entries": {"0": st_entry(3), "1": st_entry(3)}}).encode(), 400, "I-1", "uid 3"),
    "nul character": (json.dumps(world([st_entry(0, content="a\u0000b")])).encode(), 400, "I-1", "NUL"),
    "lone surrogate": (b'{"entries": {"0": {"content": "a\\ud800b"}}}', 400, "I-1", "surrogate"),
    "not a lorebook": (json.dumps({"title": "x", "summary": "y"}).encode(), 400, "I-1", "not a lorebook"),
    "nan": (b'{"entries": {"0": {"content": "x", "order": NaN}}}', 400, "I-1", "NaN"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_upload_is_refused_with_json_and_nothing_written(tenant_a, tenant_b, case):
    data, status, rule, words = HOSTILE[case]
    book = make_book(tenant_a, title="Target")
    make_entry(book)
    before = _both_tenants(tenant_a, tenant_b)
    for path, fields in ((IMPORT, {"profile": "classic"}), (f"/api/v1/books/{book.pk}/import", {"mode": "replace"})):
        body = _error(_post(tenant_a.member_client, path, data, "hostile.json", **fields), status)
        assert body["rule"] == rule, body
        assert words in body["message"], body
    assert _both_tenants(tenant_a, tenant_b) == before


def test_hostile_backup_is_refused_with_json_and_nothing_written(tenant_a):
    before = tenant_state(tenant_a.tenant)
    for data in (
        b"{ invalid",
        b'{"entries": {}}',
        b"[" * 50_000,
        json.dumps(
            {"format": "loreweave-native", "version": 1, "books": [{"title": "x", "entries": [{"content": "\u0000"}]}]}
        ).encode(),
    ):
        _error(_post(tenant_a.admin_client, "/api/v1/backup/restore", data, "backup.json"), 400)
    assert tenant_state(tenant_a.tenant) == before


# --- size caps, parsers and forms -------------------------------------------------------------------


def test_an_upload_larger_than_every_limit_is_413_before_parsing(tenant_a, settings):
    settings.LOREWEAVE_IMPORT_LIMITS = {"max_json_bytes": 1000, "max_png_bytes": 1000, "max_charx_bytes": 1000}
    book = make_book(tenant_a)
    before = tenant_state(tenant_a.tenant)
    big = world_bytes(3) + b" " * (80 * 1024)
    for path in (IMPORT, f"/api/v1/books/{book.pk}/import"):
        body = _error(_post(tenant_a.member_client, path, big), 413)
        assert body["rule"] == "I-3" and body["details"]["limit"] < len(big)
    assert tenant_state(tenant_a.tenant) == before


def test_a_json_file_over_2_mb_is_413_and_one_at_2_mb_imports(tenant_a):
    body = world_bytes(3)
    exact = body + b" " * (2 * 1024 * 1024 - len(body))
    before = tenant_state(tenant_a.tenant)
    error = _error(_post(tenant_a.member_client, IMPORT, exact + b" "), 413)
    assert error["rule"] == "I-3" and error["details"]["limit"] == 2 * 1024 * 1024
    assert tenant_state(tenant_a.tenant) == before
    assert _post(tenant_a.member_client, IMPORT, exact).status_code == 201


def test_card_size_limit_is_a_host_setting_through_the_api(tenant_a, settings):
    png = png_with(chara_chunk(card(card_book(2))))
    settings.LOREWEAVE_IMPORT_LIMITS = {"max_png_bytes": len(png) - 1}
    before = tenant_state(tenant_a.tenant)
    assert _error(_post(tenant_a.member_client, IMPORT, png, "card.png"), 413)["details"]["limit"] == len(png) - 1
    assert tenant_state(tenant_a.tenant) == before
    settings.LOREWEAVE_IMPORT_LIMITS = {"max_png_bytes": len(png)}
    assert _post(tenant_a.member_client, IMPORT, png, "card.png").status_code == 201


def test_entry_caps_through_the_api(tenant_a):
    book = make_book(tenant_a, owner=None, profile=Profile.SERVER, title="Pool")
    fill(book, 249)
    before = tenant_state(tenant_a.tenant)
    body = _error(_post(tenant_a.admin_client, f"/api/v1/books/{book.pk}/import", world_bytes(2)), 422)
    assert body["rule"] == "S-14" and body["details"]["limit"] == 250
    assert tenant_state(tenant_a.tenant) == before
    assert _post(tenant_a.admin_client, f"/api/v1/books/{book.pk}/import", world_bytes(1)).status_code == 200


def test_not_multipart_or_no_file_is_a_clear_4xx(tenant_a):
    assert _error(tenant_a.member_client.post(IMPORT, {"profile": "classic"}, format="json"), 415)
    body = _error(tenant_a.member_client.post(IMPORT, {"profile": "classic"}, format="multipart"), 400)
    assert body["field"] == "file"
    assert _error(_post(tenant_a.member_client, IMPORT, world_bytes(1), profile="wizard"), 400)["field"] == "profile"
