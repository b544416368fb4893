"""Every place that spells an entry agrees with ``books.fields`` (one definition, with its defaults).

The engine value and the engine loader may not import ``books`` (and are
another team's code), so these tests are their check: a new model column, a
drifted default or a field the loader forgets fails here.
"""
from __future__ import annotations

from dataclasses import MISSING, fields

import pytest

from books.api.serializers import EntryIn
from books.fields import (
    DEFAULT_PRIORITY,
    ENTRY_DEFAULTS,
    ENTRY_FIELD,
    ENTRY_FIELDS,
    ENTRY_FILE_FIELDS,
    ENTRY_LORE_FIELDS,
)
from books.formats.model import ImportedEntry
from books.models import Entry
from retrieval.adapter.loading import engine_entry
from retrieval.engine import values as ev
from retrieval.engine.cases import books_from_case

# Structure, not fields of the lore: the row id and who it belongs to.
STRUCTURAL = {"id", "tenant", "book"}
# Engine-only fields: derived by the loader from the definition's fields.
ENGINE_DERIVED = {"id": None, "canon": "constant", "aliases": "keys"}


def _engine_value(name: str, value: object) -> object:
    return tuple(value) if ENTRY_FIELD[name].type is list else value


def test_every_model_column_is_in_the_definition_and_back() -> None:
    columns = {f.name for f in Entry._meta.concrete_fields} | {f.name for f in Entry._meta.many_to_many}
    columns = {name.removesuffix("_id") if name in {"tenant_id", "book_id"} else name for name in columns}
    assert columns - STRUCTURAL == {f.name for f in ENTRY_FIELDS}


@pytest.mark.parametrize("item", ENTRY_FIELDS, ids=lambda f: f.name)
def test_model_defaults_are_the_definition(item) -> None:
    column = Entry._meta.get_field(item.name)
    if item.name in ("created_at", "updated_at"):
        return  # stamped when written
    if item.type in (list, dict):
        assert column.default() == ({} if item.type is dict else [])
        return
    assert column.null == item.nullable
    expected = item.default
    assert (None if not column.has_default() else column.default) == expected
    if item.choices:
        assert tuple(value for value, _ in column.choices) == item.choices


def test_import_model_fields_and_defaults_are_the_definition() -> None:
    assert tuple(f.name for f in fields(ImportedEntry)) == ENTRY_FILE_FIELDS
    blank = ImportedEntry()
    for name in ENTRY_FILE_FIELDS:
        expected = {} if name == "extra" else ENTRY_DEFAULTS[name]
        assert getattr(blank, name) == expected, name


def test_engine_value_defaults_are_the_definition() -> None:
    for item in fields(ev.Entry):
        if item.name in ENGINE_DERIVED:
            continue
        assert item.name in ENTRY_LORE_FIELDS or item.name == "channels", f"engine field {item.name} is not defined"
        assert item.default is not MISSING, item.name
        assert item.default == _engine_value(item.name, ENTRY_DEFAULTS[item.name]), item.name
    assert ev.Entry(id="x").priority == DEFAULT_PRIORITY


def test_engine_case_reader_defaults_are_the_definition() -> None:
    (book,) = books_from_case([{"name": "B", "entries": [{"id": "e"}]}])
    assert book.entries[0] == ev.Entry(id="e")


def test_engine_loader_gives_the_definitions_defaults_for_a_fresh_entry() -> None:
    value = engine_entry(Entry(pk=7))
    for item in fields(ev.Entry):
        if item.name in ENGINE_DERIVED:
            continue
        assert getattr(value, item.name) == _engine_value(item.name, ENTRY_DEFAULTS[item.name]), item.name


def test_engine_loader_carries_every_lore_field_the_engine_reads() -> None:
    changed = {
        "title": "T", "content": "C", "keys": ["k"], "secondary_keys": ["s"], "secondary_logic": "not_all",
        "constant": True, "enabled": False, "order": 7, "priority": 3, "probability": 40, "scan_depth": 2,
        "case_sensitive": True, "whole_words": False, "role": "assistant", "placement": "before_persona",
        "channels": ["c1"], "key_expression": "a AND b",
    }
    engine_names = {f.name for f in fields(ev.Entry)} - set(ENGINE_DERIVED)
    assert engine_names == set(changed)
    for name, value in changed.items():
        assert value != ENTRY_DEFAULTS[name], name
    value = engine_entry(Entry(pk=7, **changed))
    for name, expected in changed.items():
        assert getattr(value, name) == _engine_value(name, expected), name
    assert (value.canon, value.aliases) == (True, ("k",))


def test_api_input_names_every_editable_field_with_its_documented_help() -> None:
    editable = set(ENTRY_LORE_FIELDS) | {"channels", "extra"}
    inputs = EntryIn().fields
    assert set(inputs) - {"canon"} == editable
    for name in editable:
        assert inputs[name].help_text, name
        assert ENTRY_FIELD[name].doc in inputs[name].help_text
    assert "Default 10." in inputs["priority"].help_text
