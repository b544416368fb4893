"""``loreweave inspect`` / ``convert`` as people and scripts run them (subprocess)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from books.formats import read_book
from tests.books.formats.builders import world_bytes
from tests.shared_data import REPO_ROOT, require_shared


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "config.cli", *args],
        cwd=REPO_ROOT,
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )


def error_of(result: subprocess.CompletedProcess[bytes]) -> dict:
    assert result.returncode == 2, result.stderr
    assert b"Traceback" not in result.stderr
    body = json.loads(result.stderr)
    assert set(body) == {"error"} and body["error"]["message"]
    return body["error"]


def test_inspect_prints_the_receipt(tmp_path: Path) -> None:
    corpus = require_shared("corpus")
    result = run("inspect", str(corpus / "st-worldinfo/user_x_world.json"), "--profile", "server")
    assert result.returncode == 0, result.stderr
    receipt = json.loads(result.stdout)
    assert receipt["added"] == 5 and receipt["skipped"] == [] and receipt["profile"] == "server"
    assert receipt["unsupported_counts"]["group"] == 5
    assert receipt["book"]["name"] == "user_x_world"


def test_inspect_reads_stdin_and_defaults_to_classic() -> None:
    result = run("inspect", "-", stdin=world_bytes(3))
    assert result.returncode == 0
    assert json.loads(result.stdout)["profile"] == "classic"


@pytest.mark.parametrize(
    ("relpath", "words"),
    [
        ("malformed-odd/nai_ripple_truncated.lorebook", "not valid JSON"),
        ("malformed-odd/zero_byte_card.json", "empty"),
        ("malformed-odd/nai_extension_but_not_lorebook.lorebook", "no NovelAI lorebook"),
    ],
)
def test_inspect_refuses_with_a_json_error(relpath: str, words: str) -> None:
    error = error_of(run("inspect", str(require_shared("corpus") / relpath)))
    assert words in error["message"] and error["rule"] == "I-1"


def test_inspect_limit_refusals_name_their_rule(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(world_bytes(260))
    assert error_of(run("inspect", str(big), "--profile", "server"))["rule"] == "S-14"
    assert run("inspect", str(big), "--profile", "classic").returncode == 0
    huge = tmp_path / "huge.json"
    huge.write_bytes(world_bytes(501))
    assert error_of(run("inspect", str(huge)))["rule"] == "I-3"


def test_bad_arguments_and_missing_files_are_json_errors(tmp_path: Path) -> None:
    assert error_of(run("inspect", str(tmp_path / "missing.json")))["field"] == "file"
    assert error_of(run("inspect", "x.json", "--profile", "nope"))["code"] == "usage"
    assert error_of(run("convert", "x.json"))["code"] == "usage"


@pytest.mark.parametrize(("to", "out"), [("sillytavern", "out.json"), ("card-v2", "out.json"), ("card-v2", "out.png"),
                                         ("native", "out.json")])  # fmt: skip
def test_convert_writes_a_file_that_imports_the_same(tmp_path: Path, to: str, out: str) -> None:
    source = require_shared("corpus") / "png-chara/user_cronos_mysteria.png"
    target = tmp_path / out
    result = run("convert", str(source), "--to", to, "-o", str(target))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["written"] == str(target) and summary["entries"] == 4
    assert read_book(target.read_bytes()).entries == read_book(source.read_bytes()).entries
    if out.endswith(".png"):
        assert target.read_bytes().startswith(b"\x89PNG")


def test_convert_refusal_writes_nothing(tmp_path: Path) -> None:
    source = tmp_path / "broken.json"
    source.write_bytes(b'{"entries": {"0": ')
    target = tmp_path / "out.json"
    error_of(run("convert", str(source), "--to", "sillytavern", "-o", str(target)))
    assert not target.exists()
    target.write_text("keep me")
    error_of(run("convert", str(source), "--to", "native", "-o", str(target)))
    assert target.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.json", "out.json"]  # no temp files left


@pytest.mark.parametrize("command", ["inspect", "convert"])
def test_text_that_is_not_text_is_refused_by_name(tmp_path: Path, command: str) -> None:
    """A JSON escape can carry a lone UTF-16 surrogate, which no UTF-8 file (or database) can hold."""
    source = tmp_path / "odd.json"
    source.write_bytes(b'{"entries": {"0": {"uid": 0, "key": ["bell"], "content": "a\\udc00b", "comment": "t"}}}')
    target = tmp_path / "out.json"
    args = ["convert", str(source), "--to", "sillytavern", "-o", str(target)] if command == "convert" else [
        "inspect", str(source)]
    error = error_of(run(*args))
    assert (error["field"], error["rule"]) == ("entries.0.content", "I-1")
    assert "surrogate" in error["message"]
    assert not target.exists()


def test_convert_keeps_real_files_fields_and_reads_novelai_scenarios(tmp_path: Path) -> None:
    """Issue 14 §12 on the command line: useGroupScoring false stays false, a string card position
    becomes SillyTavern's integer (flagged by inspect), a .scenario converts like its lorebook."""
    corpus = require_shared("corpus")
    out = tmp_path / "kj.json"
    result = run("convert", str(corpus / "st-worldinfo/kj_xianxia.json"), "--to", "sillytavern", "-o", str(out))
    assert result.returncode == 0, result.stderr
    raw = json.loads((corpus / "st-worldinfo/kj_xianxia.json").read_bytes())["entries"]
    converted = json.loads(out.read_bytes())["entries"]
    assert [e.get("useGroupScoring") for e in raw.values()] == [e["useGroupScoring"] for e in converted.values()]
    assert False in [e["useGroupScoring"] for e in converted.values()]

    card = json.loads((corpus / "card-json/kj_fortune_teller_v3.json").read_bytes())
    for entry in card["data"]["character_book"]["entries"]:
        entry["position"] = "before_char_defs"
        entry["extensions"].pop("position", None)
    card_path = tmp_path / "card.json"
    card_path.write_text(json.dumps(card), encoding="utf-8")
    receipt = json.loads(run("inspect", str(card_path), "--profile", "sillytavern").stdout)
    assert any("before_char_defs" in w for w in receipt["warnings"])
    result = run("convert", str(card_path), "--to", "sillytavern", "-o", str(tmp_path / "card-wi.json"))
    assert result.returncode == 0, result.stderr
    positions = {e["position"] for e in json.loads((tmp_path / "card-wi.json").read_bytes())["entries"].values()}
    assert positions == {1}

    scenario = tmp_path / "ripple.scenario"
    lorebook = json.loads((corpus / "novelai/nai_ripple_v4.lorebook").read_bytes())
    scenario.write_text(json.dumps({"scenarioVersion": 3, "title": "Ripple", "lorebook": lorebook}), encoding="utf-8")
    result = run("convert", str(scenario), "--to", "sillytavern", "-o", str(tmp_path / "ripple.json"))
    assert result.returncode == 0, result.stderr
    assert len(json.loads((tmp_path / "ripple.json").read_bytes())["entries"]) == len(lorebook["entries"])
