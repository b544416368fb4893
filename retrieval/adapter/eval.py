"""``loreweave eval-retrieval DATASET.json [MORE.json ...]``: measure semantic retrieval.

Reads labelled sets in the format of ``shared/recipes/xling-eval.json``::

    {"entries": [{"id", "title", "text_en", "text_es"}, ...],
     "queries": [{"target", "query_en", "query_es"}, ...],
     "directions": {"es->en": "...", ...}}          # query language -> entry language

Several files are merged into one gallery (a harder test: more distractors);
entry ids must be unique across them. For each direction every query is ranked
against all entries in the entry language, embedded exactly as the indexer embeds
them (``entry_passage_text``). Prints JSON: overall ``top1``/``top3``/``top5`` (the
mean over directions), the same per direction, and each direction's misses
(queries whose target is not first). No database, no Django.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.engine.embeddings import Embedder, entry_passage_text

DEFAULT_DIRECTIONS = {"es->en": "", "en->es": "", "en->en": "", "es->es": ""}
CUTOFFS = (1, 3, 5)


class DatasetError(ValueError):
    pass


@dataclass(frozen=True, kw_only=True)
class Dataset:
    entries: list[dict[str, Any]]
    queries: list[dict[str, Any]]
    directions: list[tuple[str, str]]  # (query language, entry language)


def dataset_load(paths: Sequence[Path]) -> Dataset:
    """Read and merge labelled sets; raises ``DatasetError`` on anything malformed."""
    entries: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    directions: dict[str, None] = {}
    for path in paths:
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise DatasetError(f"{path}: {exc}") from exc
        if not isinstance(raw, dict) or not isinstance(raw.get("entries"), list) or not isinstance(
            raw.get("queries"), list
        ):
            raise DatasetError(f"{path}: expected an object with 'entries' and 'queries' lists")
        entries.extend(raw["entries"])
        queries.extend(raw["queries"])
        for name in raw.get("directions") or DEFAULT_DIRECTIONS:
            directions.setdefault(name)
    parsed: list[tuple[str, str]] = []
    for name in directions:
        source, sep, target = name.partition("->")
        if not sep or not source or not target:
            raise DatasetError(f"direction {name!r} is not QUERY_LANG->ENTRY_LANG")
        parsed.append((source.strip(), target.strip()))
    ids = [entry.get("id") for entry in entries]
    if len(set(ids)) != len(ids) or None in ids:
        raise DatasetError("entry ids must be present and unique across datasets")
    known = set(ids)
    for query in queries:
        if query.get("target") not in known:
            raise DatasetError(f"query target {query.get('target')!r} is not an entry id")
    for source, target in parsed:
        for entry in entries:
            if not entry.get(f"text_{target}"):
                raise DatasetError(f"entry {entry['id']!r} has no text_{target}")
        for query in queries:
            if not query.get(f"query_{source}"):
                raise DatasetError(f"query for {query['target']!r} has no query_{source}")
    if not entries or not queries:
        raise DatasetError("no entries or no queries")
    return Dataset(entries=entries, queries=queries, directions=parsed)


def retrieval_evaluate(dataset: Dataset, embedder: Embedder) -> dict[str, Any]:
    """Top-k accuracy per direction and overall (mean over directions)."""
    ids = [entry["id"] for entry in dataset.entries]
    position = {entry_id: i for i, entry_id in enumerate(ids)}
    targets = np.array([position[q["target"]] for q in dataset.queries])
    passages: dict[str, np.ndarray] = {}
    query_vectors: dict[str, np.ndarray] = {}
    per_direction: dict[str, dict[str, Any]] = {}
    for source, target in dataset.directions:
        if target not in passages:
            texts = [entry_passage_text(e.get("title", ""), e[f"text_{target}"]) for e in dataset.entries]
            passages[target] = np.vstack(embedder.embed_passages(texts))
        if source not in query_vectors:
            query_vectors[source] = np.vstack(embedder.embed_queries([q[f"query_{source}"] for q in dataset.queries]))
        scores = query_vectors[source] @ passages[target].T
        target_scores = scores[np.arange(len(targets)), targets]
        # Rank = 1 + entries scoring strictly higher than the target (ties favour the target).
        ranks = 1 + (scores > target_scores[:, None]).sum(axis=1)
        result: dict[str, Any] = {f"top{k}": round(float((ranks <= k).mean()), 4) for k in CUTOFFS}
        result["queries"] = len(targets)
        result["misses"] = [
            {
                "target": dataset.queries[i]["target"],
                "query": dataset.queries[i][f"query_{source}"],
                "rank": int(ranks[i]),
                "got": ids[int(np.argmax(scores[i]))],
            }
            for i in np.flatnonzero(ranks > 1)
        ]
        per_direction[f"{source}->{target}"] = result
    overall = {
        f"top{k}": round(float(np.mean([d[f"top{k}"] for d in per_direction.values()])), 4) for k in CUTOFFS
    }
    return {
        "model": embedder.name,
        "dimension": embedder.dimension,
        "entries": len(ids),
        "queries": len(targets),
        **overall,
        "directions": per_direction,
    }


def eval_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="loreweave eval-retrieval",
        description="Score cross-lingual retrieval on labelled sets (xling-eval.json format); prints JSON.",
    )
    parser.add_argument("datasets", nargs="+", type=Path, help="labelled set(s); several are merged into one gallery")
    parser.add_argument("--model", default=None, help="embedder name (default: the configured one)")
    parser.add_argument("--no-misses", action="store_true", help="leave out the per-direction misses")
    args = parser.parse_args(argv)

    from retrieval.adapter.embedders import UnknownEmbedder, embedder_get

    try:
        dataset = dataset_load(args.datasets)
        embedder = embedder_get(args.model)
    except (DatasetError, UnknownEmbedder) as exc:
        sys.stderr.write(f"loreweave eval-retrieval: {exc}\n")
        return 2
    started = time.perf_counter()
    report = retrieval_evaluate(dataset, embedder)
    report["datasets"] = [str(p) for p in args.datasets]
    report["seconds"] = round(time.perf_counter() - started, 3)
    if args.no_misses:
        for direction in report["directions"].values():
            direction.pop("misses", None)
    sys.stdout.write(json.dumps(report, ensure_ascii=False, indent=2) + "\n")
    return 0
