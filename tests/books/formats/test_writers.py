"""Writers: SillyTavern world info, Character Card V2 JSON/PNG, native (I-6);
and the readers with no sample in the corpus (Agnai, RisuAI, lorebook_v3)."""
from __future__ import annotations

import base64
import json
import zlib

import jsonschema
import pytest

from books.formats import (
    NATIVE_SCHEMA,
    CollectionState,
    ImportedBook,
    ImportedEntry,
    NativeLineage,
    export_book,
    map_for_profile,
    minimal_png,
    read_book,
    read_native,
    write_card_png,
    write_native,
    write_world_info,
)
from books.formats.card_png import iter_chunks
from lore_platform.errors import ValidationFailed

# Every field SillyTavern 1.12 writes for an entry (world-info.js template + uid).
ST_112_FIELDS = {
    "uid", "key", "keysecondary", "comment", "content", "constant", "vectorized", "selective", "selectiveLogic",
    "addMemo", "order", "position", "disable", "excludeRecursion", "preventRecursion", "delayUntilRecursion",
    "probability", "useProbability", "depth", "group", "groupOverride", "groupWeight", "scanDepth", "caseSensitive",
    "matchWholeWords", "useGroupScoring", "automationId", "role", "sticky", "cooldown", "delay", "displayIndex",
}  # fmt: skip


def _tenant_book() -> ImportedBook:
    entries = (
        ImportedEntry(
            title="Saltmere",
            content="A harbour town built on the ribs of old ships.",
            keys=("Saltmere",),
            enabled=False,
            channels=("#harbour", "#lore"),
            unresolved_channels=("#old-docks",),
            placement="before_persona",
            probability=0,
            role="assistant",
        ),
        ImportedEntry(title="Bells", content="Bronze bells ring before a killing tide.", keys=("bell",), position=1),
    )
    collection = CollectionState(
        profile="server",
        scope="persona",
        lineage_key="ysolde@drowned-coast",
        active=False,
        channels=("#roleplay",),
        tags=("coast",),
        visibility="private",
    )
    return ImportedBook(name="Coast", description="d", entries=entries, collection=collection)


def test_world_info_has_sillytavern_fields_and_no_tenant_state() -> None:
    doc = json.loads(write_world_info(_tenant_book()))
    entry = doc["entries"]["0"]
    assert ST_112_FIELDS <= set(entry)
    assert entry["disable"] is True and entry["probability"] == 0 and entry["role"] == 2 and entry["position"] == 0
    text = json.dumps(doc)
    assert "#harbour" not in text and "#roleplay" not in text and "ysolde" not in text  # I-6
    again = read_book(write_world_info(_tenant_book()))
    assert [e.enabled for e in again.entries] == [False, True]
    assert again.entries[0].channels == () and again.collection is None


def test_native_keeps_channels_collection_state_and_lineage() -> None:
    book = _tenant_book()
    data = write_native([book, book], lineages=[NativeLineage(key="ysolde@drowned-coast", characters=("Ysolde",))])
    doc = json.loads(data)
    jsonschema.validate(doc, NATIVE_SCHEMA)
    backup = read_native(doc)
    assert backup.books[0].entries == book.entries
    assert backup.books[0].collection == book.collection
    assert backup.lineages[0].key == "ysolde@drowned-coast"
    # one book imports; a multi-book backup is for the restore service
    assert read_book(write_native([book])).entries == book.entries
    with pytest.raises(ValidationFailed):
        read_book(data)


def test_native_refuses_newer_versions() -> None:
    with pytest.raises(ValidationFailed, match="version 2"):
        read_book(json.dumps({"format": "loreweave-native", "version": 2, "books": []}).encode())


def test_card_png_is_a_valid_png_with_a_chara_chunk() -> None:
    data = write_card_png(_tenant_book())
    chunks = iter_chunks(data)  # refuses anything malformed
    kinds = [kind for kind, _, _ in chunks]
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds
    text = [data[s : s + n] for kind, s, n in chunks if kind == b"tEXt"]
    assert len(text) == 1 and text[0].startswith(b"chara\x00")
    card = json.loads(base64.b64decode(text[0].split(b"\x00", 1)[1]))
    assert card["spec"] == "chara_card_v2" and card["spec_version"] == "2.0"
    book = card["data"]["character_book"]
    assert book["entries"][0]["enabled"] is False and book["entries"][0]["comment"] == "Saltmere"


def test_minimal_png_decodes() -> None:
    data = minimal_png(3, 2)
    chunks = {kind: data[s : s + n] for kind, s, n in iter_chunks(data)}
    assert len(zlib.decompress(chunks[b"IDAT"])) == 2 * (1 + 3 * 3)


def test_card_png_reuses_a_given_image_and_drops_old_card_chunks() -> None:
    first = write_card_png(ImportedBook(name="Old", entries=(ImportedEntry(content="old lore entry"),)))
    second = write_card_png(_tenant_book(), image=first)
    assert second.count(b"tEXtchara") == 1
    assert read_book(second).name == "Coast"


def test_card_json_keeps_the_source_card() -> None:
    source = {
        "spec": "chara_card_v3",
        "spec_version": "3.0",
        "data": {
            "name": "Amy",
            "first_mes": "Hello!",
            "extensions": {"talkativeness": "0.5"},
            "character_book": {"entries": [{"keys": ["a"], "content": "Amy's lore entry", "extensions": {}}]},
        },
    }
    card = json.loads(export_book(read_book(json.dumps(source).encode()), "card-v2"))
    assert card["spec"] == "chara_card_v2" and card["data"]["name"] == "Amy" and card["data"]["first_mes"] == "Hello!"
    assert card["data"]["extensions"] == {"talkativeness": "0.5"}


def test_agnai_memory_book() -> None:
    doc = {
        "kind": "memory",
        "_id": "abc",
        "name": "Agnai book",
        "description": "memories",
        "userId": "u1",
        "entries": [
            {"name": "Tavern", "entry": "The tavern is loud.", "keywords": ["tavern", "inn"], "priority": 2, "weight": 7,
             "enabled": False},
        ],
    }  # fmt: skip
    book = read_book(json.dumps(doc).encode())
    entry = book.entries[0]
    assert book.source_format == "agnai-memory-book" and book.name == "Agnai book"
    assert (entry.title, entry.keys, entry.priority, entry.order, entry.enabled) == ("Tavern", ("tavern", "inn"), 2, 7, False)
    assert read_book(export_book(book, "sillytavern")).entries == book.entries


def test_risu_lorebook() -> None:
    doc = {
        "type": "risu",
        "ver": 1,
        "data": [
            {"key": "dragon, wyrm", "secondkey": "", "insertorder": 150, "comment": "Dragons", "content": "@@depth 2\nDragons nest.",
             "mode": "normal", "alwaysActive": False, "selective": False, "useRegex": False, "activationPercent": 40},
            {"key": "", "comment": "Folder", "content": "", "mode": "folder"},
        ],
    }  # fmt: skip
    book = read_book(json.dumps(doc).encode())
    first = book.entries[0]
    assert first.keys == ("dragon", "wyrm") and first.order == 150 and first.probability == 40
    receipt = map_for_profile(book, "classic")[1]
    assert receipt["skipped"][0]["reason"] == "empty content"
    assert receipt["unsupported"][0]["settings"] == ["decorator:@@depth"]


def test_lorebook_v3_standalone() -> None:
    doc = {"spec": "lorebook_v3", "data": {"name": "Standalone", "entries": [
        {"keys": ["x"], "content": "V3 lore entry", "use_regex": False, "constant": True, "enabled": True,
         "insertion_order": 3, "extensions": {}}]}}  # fmt: skip
    book = read_book(json.dumps(doc).encode())
    assert book.name == "Standalone" and book.entries[0].constant and book.entries[0].order == 3
