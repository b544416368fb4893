"""The ``loreweave`` command.

Subcommands are imported lazily, on first use, so ``loreweave --help`` and the
engine commands (``assemble``, ``eval-retrieval``) start without Django.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module

USAGE = """usage: loreweave COMMAND [ARGS]   (loreweave COMMAND --help for its arguments)

commands:
  assemble CASE.json|-       run one conformance case through the retrieval engine; prints the result JSON
  inspect FILE|-             print the receipt of importing FILE into a new book (nothing is written)
  convert FILE|- --to FORMAT -o OUT|-
                             convert a lore file to another format (SillyTavern world info, cards, native …)
  eval-retrieval DATASET.json [MORE.json ...]
                             score cross-lingual retrieval on labelled sets; prints JSON

Exit codes: 0 done, 1 internal/engine failure, 2 unusable input or arguments (errors are JSON on stderr,
except eval-retrieval's one-line message).
"""

COMMANDS: dict[str, str] = {
    "assemble": "retrieval.adapter.cli:assemble_main",
    "inspect": "books.formats.cli:inspect_main",
    "convert": "books.formats.cli:convert_main",
    "eval-retrieval": "retrieval.adapter.eval:eval_main",
}


def _load(target: str) -> Callable[[list[str]], int]:
    module_name, _, attribute = target.partition(":")
    return getattr(import_module(module_name), attribute)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help", "help"}:
        sys.stdout.write(USAGE)
        return 0
    command, rest = args[0], args[1:]
    target = COMMANDS.get(command)
    if target is None:
        sys.stderr.write(f"loreweave: unknown command {command!r}\n{USAGE}")
        return 2
    return _load(target)(rest)


if __name__ == "__main__":
    raise SystemExit(main())
