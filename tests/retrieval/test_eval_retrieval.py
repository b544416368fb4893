"""``loreweave eval-retrieval``: retrieval quality is measured with the real model."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from config.cli import main
from retrieval.adapter.eval import DatasetError, dataset_load
from tests.shared_data import require_shared

REPO = Path(__file__).resolve().parents[2]
EXTRA = REPO / "retrieval" / "eval_data" / "loreweave-xling-extra.json"
MIN_TOP3 = 0.85


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    code = main(["eval-retrieval", *args])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def _assert_quality(report: dict) -> None:
    assert report["model"] == "use-multilingual-v3"
    assert set(report["directions"]) == {"es->en", "en->es", "en->en", "es->es"}
    for key in ("top1", "top3", "top5"):
        mean = sum(d[key] for d in report["directions"].values()) / len(report["directions"])
        assert report[key] == pytest.approx(mean, abs=1e-4)
    for direction, scores in report["directions"].items():
        assert scores["top1"] <= scores["top3"] <= scores["top5"] <= 1.0
        assert scores["top3"] >= MIN_TOP3, (direction, scores)
    assert report["top3"] >= MIN_TOP3


def test_shared_cross_lingual_set(capsys):
    report = _run(capsys, str(require_shared("recipes", "xling-eval.json")))
    assert report["entries"] == 20 and report["queries"] == 20
    _assert_quality(report)


def test_our_extra_set(capsys):
    report = _run(capsys, str(EXTRA))
    assert report["entries"] >= 30
    _assert_quality(report)


def test_both_sets_as_one_gallery(capsys):
    report = _run(capsys, str(require_shared("recipes", "xling-eval.json")), str(EXTRA), "--no-misses")
    extra_entries = len(json.loads(EXTRA.read_text())["entries"])
    assert report["entries"] == 20 + extra_entries  # one gallery: more distractors for every query
    assert "misses" not in report["directions"]["es->en"]
    _assert_quality(report)


def test_extra_set_has_the_shared_format():
    shared = json.loads(require_shared("recipes", "xling-eval.json").read_text())
    extra = json.loads(EXTRA.read_text())
    assert set(extra) == set(shared)
    assert extra["directions"] == shared["directions"]
    for entry in extra["entries"]:
        assert set(entry) == set(shared["entries"][0])
    for query in extra["queries"]:
        assert set(query) == set(shared["queries"][0])
    assert {e["id"] for e in extra["entries"]}.isdisjoint({e["id"] for e in shared["entries"]})


def test_malformed_dataset_is_refused(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"entries": [{"id": "a", "text_en": "x", "text_es": "y"}], "queries": [{"target": "b"}]}))
    assert main(["eval-retrieval", str(bad)]) == 2
    assert "not an entry id" in capsys.readouterr().err
    with pytest.raises(DatasetError):
        dataset_load([tmp_path / "missing.json"])
