"""Text that is not text (NUL, an unpaired UTF-16 surrogate) never gets in, and what got in before is repaired.

Issue 26, point 5: ``"extra": {"\\udc00": 1}`` was saved (with a 500), and then
the book's entry list, its native export and the tenant's backup all answered
500. Now every string and key of every JSON body is checked by the parser (400
naming the JSON path, rule P-6) before any service runs; rows stored before are
read repaired (U+FFFD) and ``manage.py text_repair`` writes the repair back.
"""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command

from backup.services import tenant_restore
from books.models import Book, Entry, Profile
from cast.models import Chat, RequestLog
from tests.books.factories import SMART_LORE, admin_actor, make_book, make_entry

pytestmark = pytest.mark.django_db

# PostgreSQL refuses both in text and jsonb, so a bad row can only have been stored on SQLite.
sqlite_only = pytest.mark.skipif(
    settings.DATABASE_IS_POSTGRES, reason="PostgreSQL never stores NUL or a lone surrogate: nothing to repair"
)


def _post_raw(client, url: str, body: str):
    """A body with JSON escapes as a caller writes them (APIClient's encoder could not carry a lone surrogate)."""
    return client.post(url, data=body, content_type="application/json")


FOURTH_MESSAGE_BAD = (
    '{"messages": [{"role": "user", "text": "a"}, {"role": "user", "text": "b"}, '
    '{"role": "user", "text": "c"}, {"role": "user", "text": "\\udfff"}]}'
)


def _entry(raw: str) -> str:
    """An entry body: a valid title and lore, then ``raw`` (members written with JSON escapes)."""
    return json.dumps({"title": "Varn", "content": SMART_LORE})[:-1] + ", " + raw + "}"


def _server_book(setup) -> Book:
    return make_book(setup, owner=None, profile=Profile.SMART, title="Server lore")


def test_a_lone_surrogate_as_a_key_in_extra_is_refused_naming_the_path(tenant_a):
    book = _server_book(tenant_a)
    body = _entry('"extra": {"\\udc00": 1}')
    response = _post_raw(tenant_a.admin_client, f"/api/v1/books/{book.pk}/entries", body)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["code"], error["field"], error["rule"]) == ("invalid_text", "extra.<key>", "P-6")
    assert error["details"] == {"character": "U+DC00", "position": 0, "key": "\\udc00"}
    assert "surrogate" in error["message"]
    assert not Entry.objects.for_tenant(tenant_a.tenant).exists()  # nothing stored
    # The book stays readable, exportable and in the backup.
    assert tenant_a.admin_client.get(f"/api/v1/books/{book.pk}/entries").status_code == 200
    assert tenant_a.admin_client.get("/api/v1/backup").status_code == 200


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("entries", _entry('"extra": {"a": {"b": [1, "x\\u0000y"]}}'), "extra.a.b[1]"),
        ("entries", _entry('"keys": ["ok", "\\ud800"]'), "keys[1]"),
        ("books", '{"title": "Tagged", "tags": ["fine", "bad\\u0000"]}', "tags[1]"),
        ("books", '{"title": "T\\u0000itle"}', "title"),
        ("context", FOURTH_MESSAGE_BAD, "messages[3].text"),
        ("context", '{"messages": [{"role": "user", "text": "hi"}], "channel": {"id": "\\u0000"}}', "channel.id"),
    ],
)
def test_nul_and_lone_surrogates_are_refused_wherever_they_sit(tenant_a, url, body, field):
    book = _server_book(tenant_a)
    path = {"entries": f"/api/v1/books/{book.pk}/entries", "books": "/api/v1/books", "context": "/api/v1/context"}[url]
    books_before = Book.objects.for_tenant(tenant_a.tenant).count()
    response = _post_raw(tenant_a.admin_client, path, body)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["code"], error["field"], error["rule"]) == ("invalid_text", field, "P-6")
    assert not Entry.objects.for_tenant(tenant_a.tenant).exists()
    assert Book.objects.for_tenant(tenant_a.tenant).count() == books_before


def test_an_escaped_surrogate_pair_is_text_and_accepted(tenant_a):
    book = _server_book(tenant_a)
    body = '{"title": "Varn \\ud83d\\ude00", "content": "' + SMART_LORE + '", "extra": {"\\ud83d\\ude00": "ok"}}'
    response = _post_raw(tenant_a.admin_client, f"/api/v1/books/{book.pk}/entries", body)
    assert response.status_code == 201, response.content
    entry = Entry.objects.for_tenant(tenant_a.tenant).get()
    assert entry.title == "Varn \U0001f600" and entry.extra == {"\U0001f600": "ok"}


def test_tool_arguments_are_checked_too(tenant_a):
    from cast.living import _arguments
    from lore_platform.errors import ValidationFailed

    with pytest.raises(ValidationFailed) as refused:
        _arguments('{"book": 1, "lore": "a\\udc00"}')
    assert (refused.value.field, refused.value.rule) == ("arguments.lore", "P-6")


def _poison(setup) -> tuple[Book, Entry]:
    """A server book with one good entry and one stored the way the old code stored the poison value."""
    book = _server_book(setup)
    make_entry(book, title="Good", extra={"kept": True})
    bad = make_entry(book, title="Bad")
    # update() writes the JSON as the old code did: SQLite keeps the escape, every read gets the surrogate back.
    Entry.objects.for_tenant(setup.tenant).filter(pk=bad.pk).update(extra={"\udc00": 1, "note": "x\x00y"})
    return book, bad


@sqlite_only
def test_one_bad_row_does_not_fail_the_listing_the_export_or_the_backup(tenant_a, tenant_b):
    book, _bad = _poison(tenant_a)
    client = tenant_a.admin_client
    listing = client.get(f"/api/v1/books/{book.pk}/entries")
    assert listing.status_code == 200, listing.content
    rows = {row["title"]: row for row in listing.json()["results"]}
    assert rows["Good"]["extra"] == {"kept": True}
    assert rows["Bad"]["extra"] == {"\ufffd": 1, "note": "xy"}  # read repaired, as text_repair would write it

    exported = client.get(f"/api/v1/books/{book.pk}/export", {"format": "native"})
    assert exported.status_code == 200, exported.content
    written = json.loads(exported.content.decode("utf-8"))
    extras = {e["title"]: e.get("extra") for e in written["books"][0]["entries"]}
    assert extras["Bad"] == {"\ufffd": 1, "note": "xy"}  # repaired: the file re-imports

    backup = client.get("/api/v1/backup")
    assert backup.status_code == 200, backup.content
    receipt = tenant_restore(actor=admin_actor(tenant_b), data=backup.content)
    assert receipt["entries_restored"] == 2


@sqlite_only
def test_text_repair_finds_and_repairs_rows_stored_before(tenant_a):
    book, bad = _poison(tenant_a)
    Book.objects.for_tenant(tenant_a.tenant).filter(pk=book.pk).update(extra={"k": "\ud800"}, description="d\x00")
    chat = Chat.objects.create(tenant=tenant_a.tenant, channel_id="ch\x00an")
    log = RequestLog.objects.create(tenant=tenant_a.tenant, chat=chat, turn=1, profile="smart",
                                    log=[{"title": "a\x00b", "reason": "matched"}])

    out = StringIO()
    call_command("text_repair", "--dry-run", "--json", stdout=out)
    report = json.loads(out.getvalue())
    counted = {m["model"]: (m["rows"], m["fields"]) for m in report["models"]}
    assert counted["books.Entry"] == (1, {"extra": 1})
    assert counted["books.Book"] == (1, {"description": 1, "extra": 1})
    assert counted["cast.Chat"] == (1, {"channel_id": 1})
    assert counted["cast.RequestLog"] == (1, {"log": 1})
    assert report["dry_run"] is True and report["values"] == 5
    bad.refresh_from_db()
    assert bad.extra == {"\udc00": 1, "note": "x\x00y"}  # a dry run writes nothing

    out = StringIO()
    call_command("text_repair", stdout=out)
    assert "repaired 5 values in 4 rows" in out.getvalue()
    bad.refresh_from_db()
    book.refresh_from_db()
    chat.refresh_from_db()
    assert bad.extra == {"\ufffd": 1, "note": "xy"}
    log.refresh_from_db()
    assert (book.extra, book.description, chat.channel_id) == ({"k": "\ufffd"}, "d", "chan")
    assert log.log == [{"title": "ab", "reason": "matched"}]

    again = StringIO()
    call_command("text_repair", "--json", stdout=again)
    assert json.loads(again.getvalue())["rows"] == 0  # nothing left


def test_a_nul_in_a_query_parameter_is_refused_naming_it(tenant_a):
    book = _server_book(tenant_a)
    response = tenant_a.admin_client.get(f"/api/v1/books/{book.pk}/entries?q=sa%00lt")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["code"], error["field"], error["rule"]) == ("invalid_text", "query.q", "P-6")
    assert response["X-Request-Id"]
    assert tenant_a.admin_client.get(f"/api/v1/books/{book.pk}/entries?q=salt").status_code == 200


def _api_views():
    from django.urls import URLPattern, URLResolver, get_resolver

    def walk(patterns, prefix=""):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                view = getattr(pattern.callback, "cls", None) or getattr(pattern.callback, "view_class", None)
                if view is not None and (prefix + str(pattern.pattern)).startswith("api/v1/"):
                    yield prefix + str(pattern.pattern), view

    return list(walk(get_resolver().url_patterns))


def test_every_api_body_goes_through_the_checking_parsers():
    """No endpoint parses JSON past the text check (jobs and living-world actions used DRF's own parser)."""
    from books.api.io_views import CappedMultiPartParser
    from lore_platform.api.parsers import JSONBodyParser

    views = _api_views()
    assert len(views) > 40
    unchecked = sorted(
        {f"{route} {view.__name__}: {parser.__name__}" for route, view in views for parser in view.parser_classes
         if not issubclass(parser, (JSONBodyParser, CappedMultiPartParser))}
    )
    assert unchecked == []


def test_a_nul_in_a_multipart_field_is_refused_naming_it(tenant_a):
    from io import BytesIO

    upload = BytesIO(json.dumps({"entries": {"0": {"uid": 0, "key": ["bell"], "content": SMART_LORE}}}).encode())
    upload.name = "bells.json"
    response = tenant_a.member_client.post(
        "/api/v1/books/import", {"file": upload, "profile": "smart", "title": "Be\x00lls"}, format="multipart"
    )
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["code"], error["field"], error["rule"]) == ("invalid_text", "title", "P-6")
    assert not Book.objects.for_tenant(tenant_a.tenant).exists()


def test_a_job_body_is_checked_too(tenant_a):
    body = '{"description": "A salt city on a delta \\u0000 with its guilds and bells.", "profile": "smart"}'
    response = _post_raw(tenant_a.admin_client, "/api/v1/jobs/generate", body)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["code"], error["field"], error["rule"]) == ("invalid_text", "description", "P-6")


def test_the_services_refuse_it_too_whatever_door_it_came_by(tenant_a):
    """Pages, accepted drafts and tool calls reach the services without the API's parser: they check it."""
    from books.services.book_write import book_update
    from books.services.entry_write import entry_create
    from lore_platform.errors import ValidationFailed

    book = _server_book(tenant_a)
    actor = admin_actor(tenant_a)
    cases = [
        (lambda: entry_create(actor=actor, book=book, title="Varn", content=SMART_LORE, extra={"a": ["\udc00"]}),
         "extra.a[0]"),
        (lambda: entry_create(actor=actor, book=book, title="Va\x00rn", content=SMART_LORE), "title"),
        (lambda: entry_create(actor=actor, book=book, title="Varn", content=SMART_LORE, keys=["ok", "b\x00"]),
         "keys[1]"),
        (lambda: book_update(actor=actor, book=book, tags=["\ud800"]), "tags[0]"),
    ]
    for call, field in cases:
        with pytest.raises(ValidationFailed) as refused:
            call()
        assert (refused.value.field, refused.value.rule) == (field, "P-6")
    assert not Entry.objects.for_tenant(tenant_a.tenant).exists()
    book.refresh_from_db()
    assert book.tags == []
