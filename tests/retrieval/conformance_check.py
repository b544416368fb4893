"""Checks an engine result against a native case's ``expected`` block.

Knows every ``expected`` key of ``conformance/README.md`` and reports an
unknown one as a failure, so a new kind of check can never pass silently. One
function per key; profiles share them (smart cases use the same checker).

    problems = expected_problems(result, case["expected"])
    assert not problems, "\\n".join(problems)
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Result = Mapping[str, Any]
Check = Callable[[Result, Any], list[str]]


def _injected_ids(result: Result) -> list[str]:
    return [str(item["entry"]) for item in result.get("injections", [])]


def _injections_by_id(result: Result) -> dict[str, Mapping[str, Any]]:
    return {str(item["entry"]): item for item in result.get("injections", [])}


def _outcomes(result: Result) -> dict[str, str]:
    return {str(row["entry"]): str(row["outcome"]) for row in result.get("log", [])}


def check_injected(result: Result, expected: list[str]) -> list[str]:
    got = _injected_ids(result)
    return [] if got == list(expected) else [f"injected: expected {expected} in this order, got {got}"]


def check_slots(result: Result, expected: Mapping[str, list[str]]) -> list[str]:
    problems = []
    for slot, ids in expected.items():
        got = [str(item["entry"]) for item in result.get("injections", []) if item.get("slot") == slot]
        if got != list(ids):
            problems.append(f"slots[{slot}]: expected {ids} in this order, got {got}")
    return problems


def check_includes(result: Result, expected: list[str]) -> list[str]:
    got = set(_injected_ids(result))
    missing = [entry for entry in expected if entry not in got]
    return [f"includes: {missing} not injected (injected: {sorted(got)})"] if missing else []


def check_absent(result: Result, expected: list[str]) -> list[str]:
    got = set(_injected_ids(result))
    present = [entry for entry in expected if entry in got]
    return [f"absent: {present} were injected"] if present else []


def check_outcomes(result: Result, expected: Mapping[str, str]) -> list[str]:
    got = _outcomes(result)
    return [
        f"outcomes[{entry}]: expected {outcome!r}, got {got.get(entry)!r}"
        for entry, outcome in expected.items()
        if got.get(entry) != outcome
    ]


def check_content(result: Result, expected: Mapping[str, str]) -> list[str]:
    by_id = _injections_by_id(result)
    problems = []
    for entry, text in expected.items():
        if entry not in by_id:
            problems.append(f"content[{entry}]: not injected")
        elif by_id[entry].get("content") != text:
            problems.append(f"content[{entry}]: expected {text!r}, got {by_id[entry].get('content')!r}")
    return problems


def check_roles(result: Result, expected: Mapping[str, str]) -> list[str]:
    by_id = _injections_by_id(result)
    problems = []
    for entry, role in expected.items():
        if entry not in by_id:
            problems.append(f"roles[{entry}]: not injected")
        elif by_id[entry].get("role") != role:
            problems.append(f"roles[{entry}]: expected {role!r}, got {by_id[entry].get('role')!r}")
    return problems


def check_world_index(result: Result, expected: list[str]) -> list[str]:
    got = [str(line["entry"]) for line in result.get("world_index", [])]
    return [] if got == list(expected) else [f"world_index: expected {expected} in this order, got {got}"]


def check_max_per_slot(result: Result, expected: Mapping[str, int]) -> list[str]:
    problems = []
    for slot, limit in expected.items():
        count = sum(1 for item in result.get("injections", []) if item.get("slot") == slot)
        if count > limit:
            problems.append(f"max_per_slot[{slot}]: {count} injections, at most {limit} allowed")
    return problems


def check_max_tokens(result: Result, expected: Mapping[str, int]) -> list[str]:
    problems = []
    for slot, limit in expected.items():
        total = sum(int(item.get("tokens", 0)) for item in result.get("injections", []) if item.get("slot") == slot)
        if total > limit:
            problems.append(f"max_tokens[{slot}]: {total} tokens, at most {limit} allowed")
    return problems


def check_max_world_index(result: Result, expected: int) -> list[str]:
    count = len(result.get("world_index", []))
    return [f"max_world_index: {count} lines, at most {expected} allowed"] if count > expected else []


CHECKS: dict[str, Check] = {
    "injected": check_injected,
    "slots": check_slots,
    "includes": check_includes,
    "absent": check_absent,
    "outcomes": check_outcomes,
    "content": check_content,
    "world_index": check_world_index,
    "roles": check_roles,
    "max_per_slot": check_max_per_slot,
    "max_tokens": check_max_tokens,
    "max_world_index": check_max_world_index,
}


def expected_problems(result: Result, expected: Mapping[str, Any]) -> list[str]:
    """Every way ``result`` misses ``expected``; an unknown ``expected`` key is a problem too.

    A multi-turn case (``expected.turns``) needs ``result.turns`` with one
    result per expected turn; problems are prefixed with the turn number.
    """
    if "turns" in expected:
        problems = [f"unknown expected key {key!r}" for key in expected if key != "turns"]
        turns = result.get("turns")
        if not isinstance(turns, list):
            return [*problems, "turns: the case has several turns but the result has no 'turns' list"]
        if len(turns) != len(expected["turns"]):
            problems.append(f"turns: expected {len(expected['turns'])} results, got {len(turns)}")
        for number, (got, want) in enumerate(zip(turns, expected["turns"], strict=False)):
            problems.extend(f"turn {number + 1}: {problem}" for problem in expected_problems(got, want))
        return problems
    problems = []
    for key, value in expected.items():
        check = CHECKS.get(key)
        if check is None:
            problems.append(f"unknown expected key {key!r}: the checker does not know how to verify it")
            continue
        problems.extend(check(result, value))
    return problems


def assert_conformance(result: Result, expected: Mapping[str, Any], *, name: str = "") -> None:
    problems = expected_problems(result, expected)
    if problems:
        header = f"{name}: " if name else ""
        raise AssertionError(header + "\n  ".join(["result does not conform", *problems]))
