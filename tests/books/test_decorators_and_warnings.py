"""`@@` decorators (C-13) and the editor's per-entry warnings (W-11, S-13). DB-free where possible."""
from __future__ import annotations

import pytest

from books import services
from books.decorators import decorators_read
from books.models import Book, Entry, Profile
from books.tokens import estimate_tokens, model_tokenizer
from books.warnings import LONG_ENTRY_TOKENS, entry_warnings, looks_multi_topic
from lore_platform.errors import ValidationFailed
from tests.books.factories import make_book, member_actor


def test_leading_decorators_are_read_and_stripped():
    report = decorators_read("@@probability 50\n@@role assistant\n@@keep\nThe Ember Gate opens at dusk.\n@@order 3")
    assert [(d.name, d.argument, d.known) for d in report.decorators] == [
        ("probability", "50", True),
        ("role", "assistant", True),
        ("keep", None, True),
    ]
    assert report.body == "The Ember Gate opens at dusk.\n@@order 3"  # only leading lines are decorators
    assert report.errors == () and report.warnings == ()


def test_unknown_decorators_are_kept_and_reported():
    report = decorators_read("@@sparkle 3\n@@keep\nLore.")
    assert [d.name for d in report.decorators] == ["sparkle", "keep"]
    assert [(w.kind, w.name) for w in report.warnings] == [("unknown", "sparkle")]
    assert report.errors == ()


@pytest.mark.parametrize(
    "line",
    ["@@probability 101", "@@probability lots", "@@scan_depth -1", "@@role narrator", "@@activate_only_every 0",
     "@@order"],
)
def test_known_decorators_with_bad_arguments_are_errors(line):
    assert decorators_read(f"{line}\nLore.").errors


@pytest.mark.parametrize(
    "line",
    ["@@probability 0", "@@probability 100", "@@scan_depth 8", "@@order -5", "@@priority 7", "@@role system",
     "@@activate_only_after 0", "@@activate_only_every 1", "@@dont_activate_after_match", "@@is_greeting"],
)
def test_known_decorators_accept_good_arguments(line):
    assert decorators_read(f"{line}\nLore.").errors == ()


def test_a_value_given_to_a_flag_or_a_repeat_is_only_a_warning():
    report = decorators_read("@@keep forever\n@@order 1\n@@order 2\nLore.")
    assert report.errors == ()
    assert [w.kind for w in report.warnings] == ["ignored_value", "repeated"]


@pytest.mark.django_db
def test_classic_entry_with_bad_decorator_is_refused(tenant_a):
    book = make_book(tenant_a)
    with pytest.raises(ValidationFailed) as exc_info:
        services.entry_create(actor=member_actor(tenant_a), book=book, content="@@probability 150\nLore")
    assert (exc_info.value.field, exc_info.value.rule) == ("content", "C-13")
    assert not Entry.objects.for_tenant(tenant_a.tenant).exists()


@pytest.mark.django_db
def test_api_shows_decorators_and_warns_about_unknown_ones(tenant_a):
    book = make_book(tenant_a)
    response = tenant_a.member_client.post(
        f"/api/v1/books/{book.pk}/entries", {"content": "@@probability 50\n@@sparkle\nLore"}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert [d["name"] for d in body["decorators"]] == ["probability", "sparkle"]
    assert [(w["code"], w["rule"]) for w in body["warnings"]] == [("unknown_decorator", "C-13")]
    assert body["content"].startswith("@@probability 50\n@@sparkle")  # kept as written


def test_decorators_mean_nothing_in_world_books():
    book = Book(profile=Profile.SMART)
    entry = Entry(title="Gate", content="@@sparkle\n" + "Lore of the gate. " * 3)
    assert [w.code for w in entry_warnings(entry, book=book, book_in_use=False)] == []


# --- warnings ----------------------------------------------------------------------------

def _smart_entry(**fields):
    values = {"title": "Varn", "content": "Varn is a river city.", "usage_count": 0, "enabled": True}
    values.update(fields)
    return Entry(**values)


def _codes(entry, *, profile=Profile.SMART, in_use=False):
    book = Book(profile=profile)
    return [w.code for w in entry_warnings(entry, book=book, book_in_use=in_use, count_tokens=estimate_tokens)]


def test_long_entry_is_flagged_above_800_tokens():
    at_limit = "x" * (LONG_ENTRY_TOKENS * 4)  # ceil(chars / 4) = 800
    assert "long_entry" not in _codes(_smart_entry(content=at_limit))
    assert "long_entry" in _codes(_smart_entry(content=at_limit + "x"))


def test_long_entry_counts_with_the_engine_tokenizer_by_default():
    text = "x" * 3_000
    expected = model_tokenizer(None).count(text) > LONG_ENTRY_TOKENS
    warnings = entry_warnings(_smart_entry(content=text), book=Book(profile=Profile.SMART), book_in_use=False)
    assert ("long_entry" in [w.code for w in warnings]) is expected is True


def test_long_entry_uses_the_given_token_counter():
    entry = _smart_entry(content="word " * 100)
    warnings = entry_warnings(entry, book=Book(profile=Profile.SMART), book_in_use=False, count_tokens=lambda t: 801)
    assert [w.code for w in warnings] == ["long_entry"]


def test_multi_topic_heuristic():
    assert looks_multi_topic("# Varn\nA river city.\n\n# The Salt Guild\nMerchants of salt.")
    assert looks_multi_topic("Varn is a river city on the delta of the Sal.\n---\nThe Salt Guild rules the docks of Varn by night.")
    assert not looks_multi_topic("Appearance:\nTall.\nPersonality:\nKind.")  # sections of one topic
    assert not looks_multi_topic("# Varn\nA river city with one heading.")
    assert "multi_topic" in _codes(_smart_entry(content="## Varn\nCity.\n## Iron Pact\nAn alliance."))


def test_never_surfaced_when_relevant_entry_only_once_the_book_is_used():
    unused = _smart_entry()
    assert "never_surfaced" not in _codes(unused, in_use=False)
    assert "never_surfaced" in _codes(unused, in_use=True)
    assert "never_surfaced" not in _codes(_smart_entry(usage_count=3), in_use=True)
    assert "never_surfaced" not in _codes(_smart_entry(constant=True), in_use=True)  # canon is not "when relevant"
    assert "never_surfaced" not in _codes(_smart_entry(enabled=False), in_use=True)


def test_unresolved_channel_is_flagged_in_any_profile():
    entry = Entry(title="Old memory", content="lore", unresolved_channels=["#general"])
    assert _codes(entry, profile=Profile.SERVER) == ["unresolved_channel"]


@pytest.mark.django_db
def test_entry_listing_shows_warnings(tenant_a):
    book = make_book(tenant_a, profile=Profile.SMART)
    actor = member_actor(tenant_a)
    used = services.entry_create(actor=actor, book=book, title="Varn", content="Varn is a river city of salt.")
    services.entry_create(actor=actor, book=book, title="Gate", content="The Ember Gate opens at dusk, always.")
    services.entry_create(actor=actor, book=book, title="Long", content="y" * 4000)
    services.entries_record_usage(tenant=tenant_a.tenant, entry_ids=[used.pk])
    rows = tenant_a.member_client.get(f"/api/v1/books/{book.pk}/entries").json()["results"]
    codes = {row["title"]: [w["code"] for w in row["warnings"]] for row in rows}
    assert codes == {"Varn": [], "Gate": ["never_surfaced"], "Long": ["long_entry", "never_surfaced"]}
