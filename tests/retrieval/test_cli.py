"""``loreweave assemble``: result JSON on stdout, JSON errors on stderr, never a traceback."""
from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import retrieval.adapter.cli as cli
from retrieval.adapter.cli import assemble_main
from tests.shared_data import REPO_ROOT

CASE: dict[str, Any] = {
    "name": "cli_smoke",
    "profile": "classic",
    "books": [
        {
            "name": "Puertos",
            "settings": {"scan_depth": 2, "token_budget": 1000, "recursive": False},
            "entries": [
                {"id": "p1", "title": "Faro", "keys": ["faro"], "order": 200, "content": "El faro se enciende."},
                {"id": "p2", "title": "Ámbar", "keys": ["ámbar"], "content": "El bosque de ámbar."},
            ],
        }
    ],
    "chat": [{"role": "assistant", "name": "Kael", "text": "Hola."}, {"role": "user", "name": "Ana", "text": "¿Ves el faro?"}],
    "names": {"user": "Ana", "char": "Kael"},
    "model": {"tokenizer": "ceil-chars-4", "input_window": 8192},
    "channel": None,
    "seed": 1,
}


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrieval.adapter.cli", "assemble", *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=REPO_ROOT,
        timeout=60,
    )


def in_process(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = assemble_main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def error_of(err: str) -> str:
    assert "Traceback" not in err
    payload = json.loads(err)
    assert isinstance(payload["error"], str) and payload["error"]
    return str(payload["error"])


def test_case_file_prints_the_result_json(tmp_path: Path) -> None:
    path = tmp_path / "case.json"
    path.write_text(json.dumps(CASE, ensure_ascii=False), encoding="utf-8")
    done = run_cli(str(path))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [i["entry"] for i in result["injections"]] == ["p1"]
    assert {r["entry"]: r["outcome"] for r in result["log"]} == {"p1": "injected", "p2": "not_matched"}
    assert result["state"] == {} and result["world_index"] == []


def test_case_on_stdin() -> None:
    done = run_cli("-", stdin=json.dumps(CASE))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["injections"][0]["content"] == "El faro se enciende."


def test_multi_turn_case_returns_one_result_per_turn(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    case = {k: v for k, v in CASE.items() if k != "chat"}
    case["turns"] = [{"chat": CASE["chat"]}, {"chat": [*CASE["chat"], {"role": "user", "text": "Nada."}]}]
    path = tmp_path / "turns.json"
    path.write_text(json.dumps(case), encoding="utf-8")
    code, out, _ = in_process([str(path)], capsys)
    assert code == 0
    assert [[i["entry"] for i in turn["injections"]] for turn in json.loads(out)["turns"]] == [["p1"], ["p1"]]


def test_missing_file_exits_2_with_a_json_error() -> None:
    done = run_cli("/nonexistent/case.json")
    assert done.returncode == 2 and done.stdout == ""
    assert "cannot read" in error_of(done.stderr)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "unrecognised case"),
        ('{"name": "x"}', "unrecognised case"),
        ('{"profile": "mystery", "books": [], "chat": []}', "profile"),
        ('{"profile": "classic", "books": {}, "chat": []}', "books"),
        ('{"profile": "classic", "books": [{"name": "B", "entries": [{"keys": ["x"]}]}], "chat": []}', "books[0].entries[0].id"),
        ('{"profile": "classic", "books": [], "chat": [{"role": "narrator", "text": "x"}]}', "chat[0].role"),
        ('{"profile": "classic", "books": [], "chat": [], "model": {"tokenizer": "gemma"}}', "model.tokenizer"),
        ('{"profile": "classic", "books": [{"name": "B", "entries": [{"id": "e", "probability": 300}]}], "chat": []}', "probability"),
    ],
)
def test_unreadable_cases_exit_2_naming_the_problem(text: str, message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    code, out, err = in_process([str(path)], capsys)
    assert code == 2 and out == ""
    assert message in error_of(err)


def test_bad_stdin_through_the_real_process_has_no_traceback() -> None:
    done = run_cli("-", stdin='{"profile": "classic", "books": "nope"}')
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "books" in error_of(done.stderr)


def test_wrong_arguments_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = in_process([], capsys)
    assert code == 2 and "exactly one argument" in error_of(err)
    code, out, _ = in_process(["--help"], capsys)
    assert code == 0 and "loreweave assemble" in out


SILLYTAVERN_CASE = {
    "settings": {"world_info_depth": 2, "world_info_budget": 25},
    "max_context": 4096,
    "entries": [],
    "chat": [],
}


def test_sillytavern_cases_go_to_the_sillytavern_profile(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = types.ModuleType("retrieval.engine.sillytavern")
    fake.run_case = lambda case: {"turns": [{"activated_uids": [], "seen": sorted(case)}]}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "retrieval.engine.sillytavern", fake)
    path = tmp_path / "st.case.json"
    path.write_text(json.dumps(SILLYTAVERN_CASE), encoding="utf-8")
    code, out, _ = in_process([str(path)], capsys)
    assert code == 0 and json.loads(out)["turns"][0]["seen"] == sorted(SILLYTAVERN_CASE)


def test_missing_sillytavern_profile_exits_2_with_a_json_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "_sillytavern_runner", lambda: None)
    path = tmp_path / "st.case.json"
    path.write_text(json.dumps(SILLYTAVERN_CASE), encoding="utf-8")
    code, out, err = in_process([str(path)], capsys)
    assert code == 2 and out == "" and "sillytavern" in error_of(err)


def test_engine_failure_exits_1_with_a_json_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retrieval.engine.cases as cases

    def broken(case: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(cases, "run_case", broken)
    path = tmp_path / "case.json"
    path.write_text(json.dumps(CASE), encoding="utf-8")
    code, out, err = in_process([str(path)], capsys)
    assert code == 1 and out == "" and "engine failure: RuntimeError: boom" == error_of(err)


def test_loreweave_command_dispatches_assemble(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    platform_cli = pytest.importorskip("config.cli")
    path = tmp_path / "case.json"
    path.write_text(json.dumps(CASE), encoding="utf-8")
    assert platform_cli.main(["assemble", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["injections"][0]["entry"] == "p1"
