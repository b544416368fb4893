"""Translation for display (P-4): Argos Translate language packages, run offline.

Operators install Argos ``.argosmodel`` packages (a zip holding ``metadata.json``,
a CTranslate2 model and a SentencePiece model). We read those same packages
with the CTranslate2 + SentencePiece runtime that Argos Translate itself drives,
with Argos's decoding settings, which avoids pulling torch, stanza and spaCy
into every worker. Retrieval never sees these translations: they are for
display only.
"""
from __future__ import annotations

import json
import re
import shutil
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from lore_platform.errors import ValidationFailed

# Argos Translate's decoding settings for its CTranslate2 models.
BEAM_SIZE = 4
LENGTH_PENALTY = 0.2
MAX_BATCH_SIZE = 32
MAX_PACKAGE_BYTES = 2 * 1024**3

# A sentence ends at . ! ? (optionally closed by quotes/brackets) followed by space.
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"'”’»)\]]*\s+")


@dataclass(frozen=True, kw_only=True)
class LanguagePackage:
    from_code: str
    to_code: str
    version: str
    path: Path

    @property
    def pair(self) -> tuple[str, str]:
        return (self.from_code, self.to_code)


class TranslationUnavailable(Exception):
    """No installed package translates this language pair."""


def _read_metadata(folder: Path) -> dict[str, Any] | None:
    meta = folder / "metadata.json"
    if not meta.is_file():
        return None
    try:
        data = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if data.get("type", "translate") != "translate" or not data.get("from_code") or not data.get("to_code"):
        return None
    return data


def packages_installed(packages_dir: Path) -> list[LanguagePackage]:
    found: list[LanguagePackage] = []
    if not packages_dir.is_dir():
        return found
    for folder in sorted(packages_dir.iterdir()):
        data = _read_metadata(folder) if folder.is_dir() else None
        if data and (folder / "model").is_dir() and (folder / "sentencepiece.model").is_file():
            found.append(
                LanguagePackage(
                    from_code=str(data["from_code"]),
                    to_code=str(data["to_code"]),
                    version=str(data.get("package_version", "")),
                    path=folder,
                )
            )
    return found


def package_install_from_path(archive: Path, packages_dir: Path) -> LanguagePackage:
    """Unpack an ``.argosmodel`` into ``packages_dir`` (replacing an older copy)."""
    try:
        bundle = zipfile.ZipFile(archive)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ValidationFailed(
            "{file} is not an Argos package (zip).", values={"file": archive.name}, field="package"
        ) from exc
    with bundle:
        names = bundle.namelist()
        roots = {name.split("/", 1)[0] for name in names}
        total = sum(info.file_size for info in bundle.infolist())
        if len(roots) != 1 or total > MAX_PACKAGE_BYTES:
            raise ValidationFailed("An Argos package holds one top-level folder.", field="package")
        for name in names:
            if name.startswith("/") or ".." in Path(name).parts:
                raise ValidationFailed("Unsafe path in package: {path}", values={"path": repr(name)}, field="package")
        packages_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=packages_dir) as staging:
            bundle.extractall(staging)
            folder = Path(staging) / roots.pop()
            data = _read_metadata(folder)
            if data is None:
                raise ValidationFailed("The package has no valid metadata.json.", field="package")
            target = packages_dir / folder.name
            if target.exists():
                shutil.rmtree(target)
            folder.rename(target)
    for package in packages_installed(packages_dir):
        if package.path == target:
            _load_runtime.cache_clear()
            return package
    raise ValidationFailed("The package lacks its model or SentencePiece files.", field="package")


def sentences_split(text: str) -> list[str]:
    return [part for part in _SENTENCE_END.split(text.strip()) if part]


@lru_cache(maxsize=8)
def _load_runtime(model_dir: str) -> tuple[Any, Any, threading.Lock]:
    import ctranslate2
    import sentencepiece

    translator = ctranslate2.Translator(f"{model_dir}/model", device="cpu", inter_threads=1, intra_threads=1)
    tokenizer = sentencepiece.SentencePieceProcessor(model_file=f"{model_dir}/sentencepiece.model")
    return translator, tokenizer, threading.Lock()


class PackageTranslator:
    """Translates with the installed packages of one folder."""

    def __init__(self, packages_dir: Path) -> None:
        self.packages_dir = packages_dir

    def available_pairs(self) -> set[tuple[str, str]]:
        return {package.pair for package in packages_installed(self.packages_dir)}

    def _package(self, source: str, target: str) -> LanguagePackage:
        for package in packages_installed(self.packages_dir):
            if package.pair == (source, target):
                return package
        raise TranslationUnavailable(f"No language package translates {source} → {target}.")

    def translate(self, texts: list[str], *, source: str, target: str) -> list[str]:
        """Translate each text, keeping paragraph breaks; empty texts stay empty."""
        if source == target:
            return list(texts)
        package = self._package(source, target)
        translator, tokenizer, lock = _load_runtime(str(package.path))
        # Translate every sentence of every paragraph in one batch.
        layout: list[list[list[int]]] = []
        pieces: list[list[str]] = []
        for text in texts:
            paragraphs = []
            for paragraph in text.split("\n"):
                indexes = []
                for sentence in sentences_split(paragraph):
                    indexes.append(len(pieces))
                    pieces.append(tokenizer.encode(sentence, out_type=str))
                paragraphs.append(indexes)
            layout.append(paragraphs)
        outputs: list[str] = []
        if pieces:
            with lock:
                results = translator.translate_batch(
                    pieces,
                    beam_size=BEAM_SIZE,
                    num_hypotheses=1,
                    length_penalty=LENGTH_PENALTY,
                    replace_unknowns=True,
                    max_batch_size=MAX_BATCH_SIZE,
                )
            outputs = [tokenizer.decode(result.hypotheses[0]) for result in results]
        return [
            "\n".join(" ".join(outputs[i] for i in paragraph) for paragraph in paragraphs) for paragraphs in layout
        ]
