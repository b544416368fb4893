"""The shared corpus, read in place (never copied), and what MANIFEST.md says of each file."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tests.shared_data import shared_dir


@dataclass(frozen=True)
class CorpusFile:
    relpath: str
    format: str
    entries: int | None  # None: MANIFEST predicts a refusal ("-")


def corpus_root() -> Path | None:
    root = shared_dir()
    path = root / "corpus" if root else None
    return path if path and path.is_dir() else None


def corpus_files() -> list[str]:
    """Every file in the corpus (MANIFEST.md aside), as paths relative to it."""
    root = corpus_root()
    if root is None:
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != "MANIFEST.md")


@lru_cache(maxsize=1)
def manifest() -> dict[str, CorpusFile]:
    root = corpus_root()
    if root is None:
        return {}
    rows: dict[str, CorpusFile] = {}
    for line in (root / "MANIFEST.md").read_text(encoding="utf-8").splitlines():
        if not line.startswith("| "):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not (root / cells[0]).is_file():
            continue
        counts = re.findall(r"book entries=(\d+)", cells[2])
        if counts:
            entries: int | None = int(counts[-1])  # the chunk a reader uses (ccv3 when present)
        elif cells[2] == "-":
            entries = None
        else:
            entries = int(cells[2])
        rows[cells[0]] = CorpusFile(relpath=cells[0], format=cells[1], entries=entries)
    return rows


def predicted_refusal(row: CorpusFile) -> str:
    """The words our refusal must contain, from the MANIFEST's format column."""
    fmt = row.format
    if fmt.startswith("invalid JSON"):
        detail = re.search(r"\(([^)]*)\)", fmt)
        return detail.group(1) if detail else "not valid JSON"
    if fmt.startswith("0-byte"):
        return "empty"
    if fmt.startswith("JSON object"):
        return "not a lorebook"
    raise AssertionError(f"no predicted refusal for {row.relpath}: {fmt}")


# The four pairs MANIFEST.md names: the same book as a world file and in a card.
ROUND_TRIP_PAIRS = (
    ("st-worldinfo/sillytavern_eldoria_2024-09.json", "png-ccv3/sillytavern_seraphina_2024-09.png"),
    ("st-worldinfo/user_mysteria.json", "png-chara/user_cronos_mysteria.png"),
    ("st-worldinfo/kj_80s_hongkong.json", "card-json/kj_luk_wing_lung_v3.json"),
    ("st-worldinfo/kj_xianxia.json", "card-json/kj_fortune_teller_v3.json"),
)
