"""``loreweave assemble CASE.json`` / ``loreweave assemble -`` (case on stdin).

Reads one case, runs it through the engine and prints the result JSON on
stdout (exit 0). Native cases (they name a ``profile``) go to
:func:`retrieval.engine.cases.run_case`; SillyTavern cases (top-level
``entries`` and ``world_info_*`` settings) go to
``retrieval.engine.sillytavern.run_case``. A case that cannot be read exits 2
with ``{"error": ...}`` on stderr; an engine failure exits 1 the same way.
Never a traceback: callers parse stderr too.

No Django is imported: the command starts in a fraction of a second.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any

USAGE = (
    "usage: loreweave assemble CASE.json | loreweave assemble -   (case JSON on stdin)\n"
    "\n"
    "Runs one case through the retrieval engine and prints the result JSON on stdout.\n"
    "A native case names a 'profile' (classic, server, smart); a SillyTavern case has\n"
    "top-level 'entries' and 'world_info_*' settings.\n"
    "Exit 0 = result printed; 2 = the case cannot be read (not a file, not UTF-8 JSON,\n"
    "not a case); 1 = the engine failed. Errors are one JSON object on stderr.\n"
)
EXIT_OK = 0
EXIT_ENGINE = 1
EXIT_UNREADABLE = 2


def _emit_error(message: str, *, code: int, **extra: Any) -> int:
    payload = {"error": message, **extra}
    sys.stderr.write(json.dumps(payload, ensure_ascii=False) + "\n")
    return code


def _read_case(source: str) -> Any:
    if source == "-":
        stdin_buffer = getattr(sys.stdin, "buffer", None)
        raw = stdin_buffer.read() if stdin_buffer is not None else sys.stdin.read().encode("utf-8")
    else:
        raw = Path(source).read_bytes()
    return json.loads(raw.decode("utf-8-sig"))


def _sillytavern_runner() -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    try:
        module = import_module("retrieval.engine.sillytavern")
    except ModuleNotFoundError as error:
        if error.name and "retrieval.engine.sillytavern".startswith(error.name):
            return None
        raise
    runner = getattr(module, "run_case", None)
    return runner if callable(runner) else None


def assemble_main(argv: list[str]) -> int:
    """Run ``assemble`` with the arguments after the subcommand; returns the exit code."""
    if len(argv) == 1 and argv[0] in {"-h", "--help"}:
        sys.stdout.write(USAGE)
        return EXIT_OK
    if len(argv) != 1:
        return _emit_error("expected exactly one argument: a case file or '-' for stdin", code=EXIT_UNREADABLE)
    source = argv[0]
    try:
        case = _read_case(source)
    except OSError as error:
        return _emit_error(f"cannot read {source}: {error.strerror or error}", code=EXIT_UNREADABLE)
    except UnicodeDecodeError as error:
        return _emit_error(f"case is not UTF-8 text: {error.reason}", code=EXIT_UNREADABLE)
    except json.JSONDecodeError as error:
        return _emit_error(
            f"case is not valid JSON: {error.msg}", code=EXIT_UNREADABLE, line=error.lineno, column=error.colno
        )

    from retrieval.engine.cases import CaseError, case_kind, run_case

    kind = case_kind(case)
    try:
        if kind == "native":
            result = run_case(case)
        elif kind == "sillytavern":
            runner = _sillytavern_runner()
            if runner is None:
                return _emit_error("the sillytavern profile is not available in this engine yet", code=EXIT_UNREADABLE)
            result = runner(case)
        else:
            return _emit_error(
                "unrecognised case: a native case has 'profile'; a SillyTavern case has 'entries' and "
                "'world_info_*' settings",
                code=EXIT_UNREADABLE,
            )
    except CaseError as error:
        return _emit_error(str(error), code=EXIT_UNREADABLE)
    except (KeyError, TypeError, ValueError) as error:
        # Shape problems the profile's reader did not name itself.
        return _emit_error(f"case cannot be read: {type(error).__name__}: {error}", code=EXIT_UNREADABLE)
    except Exception as error:  # noqa: BLE001 - the contract is JSON on stderr, never a traceback
        return _emit_error(f"engine failure: {type(error).__name__}: {error}", code=EXIT_ENGINE)

    text = json.dumps(result, ensure_ascii=False) + "\n"
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is not None:
        sys.stdout.flush()
        buffer.write(text.encode("utf-8"))  # UTF-8 whatever the locale says
        buffer.flush()
    else:
        sys.stdout.write(text)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "assemble":
        sys.stderr.write(USAGE)
        return EXIT_UNREADABLE
    return assemble_main(args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
