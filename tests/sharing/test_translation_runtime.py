"""The translation runtime reads real Argos packages and translates offline."""
from __future__ import annotations

import json
import zipfile

import pytest

from lore_platform.errors import ValidationFailed
from sharing.translation import PackageTranslator, TranslationUnavailable, package_install_from_path, sentences_split
from tests.shared_data import require_shared


@pytest.fixture(scope="module")
def toy_translator(tmp_path_factory):
    archive = require_shared("recipes", "translate-en_es-toy.argosmodel")
    packages = tmp_path_factory.mktemp("packages")
    package = package_install_from_path(archive, packages)
    assert package.pair == ("en", "es")
    return PackageTranslator(packages)


@pytest.fixture(scope="module")
def xling():
    return json.loads(require_shared("recipes", "xling-eval.json").read_text(encoding="utf-8"))


def test_toy_package_translates_all_forty_sentences_exactly(toy_translator, xling):
    english = [entry["text_en"] for entry in xling["entries"]]
    spanish = toy_translator.translate(english, source="en", target="es")
    assert spanish == [entry["text_es"] for entry in xling["entries"]]
    assert sum(len(sentences_split(text)) for text in english) == 40


def test_paragraphs_and_empty_texts_keep_their_shape(toy_translator, xling):
    first, second = xling["entries"][0], xling["entries"][1]
    joined = first["text_en"] + "\n\n" + second["text_en"]
    [out, empty] = toy_translator.translate([joined, ""], source="en", target="es")
    assert out == first["text_es"] + "\n\n" + second["text_es"]
    assert empty == ""


def test_missing_pair_is_unavailable(toy_translator):
    assert toy_translator.available_pairs() == {("en", "es")}
    with pytest.raises(TranslationUnavailable):
        toy_translator.translate(["Hola."], source="es", target="fr")


def test_same_language_is_returned_unchanged(toy_translator):
    assert toy_translator.translate(["Anything at all."], source="en", target="en") == ["Anything at all."]


def test_package_with_path_traversal_is_refused(tmp_path):
    archive = tmp_path / "evil.argosmodel"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("pkg/metadata.json", json.dumps({"from_code": "en", "to_code": "es"}))
        bundle.writestr("pkg/../../escape.txt", "x")
    with pytest.raises(ValidationFailed):
        package_install_from_path(archive, tmp_path / "packages")
    assert not (tmp_path / "escape.txt").exists()


def test_not_a_zip_is_refused(tmp_path):
    archive = tmp_path / "broken.argosmodel"
    archive.write_bytes(b"not a zip")
    with pytest.raises(ValidationFailed):
        package_install_from_path(archive, tmp_path / "packages")
