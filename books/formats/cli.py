"""``loreweave inspect`` and ``loreweave convert`` — no database, no Django setup.

    loreweave inspect FILE [--profile classic|server|smart|sillytavern] [--scope S] [--name NAME]
        Prints the receipt JSON of importing FILE into a new book of the
        profile (default classic) and exits 0. Nothing is written anywhere.

    loreweave convert FILE --to sillytavern|card-v2|native -o OUT [--png] [--image PNG]
        Writes FILE as SillyTavern world info, a Character Card V2 (PNG when
        OUT ends in .png or with --png; JSON otherwise) or the native format,
        prints a JSON summary and exits 0. ``-o -`` writes to stdout.

FILE may be ``-`` for stdin. A refused file (or bad arguments) prints
``{"error": {"code", "message", "field", "rule", "details"}}`` on stderr and
exits 2 without writing anything; an unexpected failure prints the same shape
with code ``internal`` and exits 1. Never a traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

from lore_platform.errors import DomainError, ValidationFailed

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_REFUSED = 2
CONVERT_TARGETS = ("sillytavern", "card-v2", "native")


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def _emit(stream: Any, payload: dict[str, Any]) -> None:
    text = json.dumps(payload, ensure_ascii=False, indent=2) + "\n"
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        buffer.write(text.encode("utf-8"))
        buffer.flush()
    else:
        stream.write(text)
        stream.flush()


def _error(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **extra}}


def _read_input(path: str) -> tuple[bytes, str | None]:
    from books.formats.limits import current_limits

    limits = current_limits()
    # Read one byte past the largest accepted file, so an oversize file is
    # refused by size without being read whole.
    cap = max(limits.max_json_bytes, limits.max_png_bytes, limits.max_charx_bytes) + 1
    if path == "-":
        return sys.stdin.buffer.read(cap), None
    file = Path(path)
    try:
        if file.is_dir():
            raise ValidationFailed(f"{path} is a directory, not a file", field="file", rule="I-1")
        with file.open("rb") as handle:
            return handle.read(cap), file.name
    except FileNotFoundError:
        raise ValidationFailed(f"{path}: no such file", field="file", rule="I-1") from None
    except PermissionError:
        raise ValidationFailed(f"{path}: permission denied", field="file", rule="I-1") from None
    except OSError as exc:
        raise ValidationFailed(f"{path}: cannot read ({exc.strerror or exc})", field="file", rule="I-1") from None


def _run(body: Any, argv: list[str]) -> int:
    try:
        return int(body(argv))
    except _UsageError as exc:
        _emit(sys.stderr, _error("usage", str(exc)))
        return EXIT_REFUSED
    except DomainError as exc:
        _emit(sys.stderr, {"error": exc.as_dict()})
        return EXIT_REFUSED
    except KeyboardInterrupt:
        _emit(sys.stderr, _error("interrupted", "interrupted"))
        return EXIT_INTERNAL
    except Exception as exc:  # the contract: never a traceback
        _emit(sys.stderr, _error("internal", f"unexpected {type(exc).__name__}: {exc}"))
        return EXIT_INTERNAL


def _inspect(argv: list[str]) -> int:
    from books.formats.mapping import plan_import
    from books.formats.model import PROFILES, SCOPES

    parser = _Parser(prog="loreweave inspect", description="Print the receipt of importing FILE (nothing is written).")
    parser.add_argument("file", metavar="FILE", help="the file to read, or - for stdin")
    parser.add_argument("--profile", choices=PROFILES, default="classic", help="profile of the new book")
    parser.add_argument("--scope", choices=SCOPES, default="personal", help="scope of the new book (server profile)")
    parser.add_argument("--name", help="book name (default: the name in the file, then the file name)")
    args = parser.parse_args(argv)
    data, filename = _read_input(args.file)
    plan = plan_import(data, profile=args.profile, filename=filename, name=args.name, scope=args.scope)
    _emit(sys.stdout, plan.receipt)
    return EXIT_OK


def _write_atomically(out: str, payload: bytes) -> None:
    target = Path(out)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, temp = tempfile.mkstemp(prefix=".loreweave-", dir=directory)
    except OSError as exc:
        raise ValidationFailed(f"{out}: cannot write ({exc.strerror or exc})", field="output", rule="I-6") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.replace(temp, target)
    except OSError as exc:
        Path(temp).unlink(missing_ok=True)
        raise ValidationFailed(f"{out}: cannot write ({exc.strerror or exc})", field="output", rule="I-6") from None


def _convert(argv: list[str]) -> int:
    from books.formats import export_book, read_book
    from books.formats.model import book_text_check

    parser = _Parser(prog="loreweave convert", description="Convert FILE to another lore format.")
    parser.add_argument("file", metavar="FILE", help="the file to read, or - for stdin")
    parser.add_argument("--to", required=True, choices=CONVERT_TARGETS, help="target format")
    parser.add_argument("-o", "--output", required=True, metavar="OUT", help="output path, or - for stdout")
    parser.add_argument("--png", action="store_true", help="card-v2 as a PNG (default when OUT ends in .png)")
    parser.add_argument("--image", metavar="PNG", help="card-v2 PNG: use this picture")
    args = parser.parse_args(argv)
    data, filename = _read_input(args.file)
    book = read_book(data, filename=filename)
    # What no file can hold is refused by name, as an import refuses it (I-1).
    book_text_check(book)
    target = args.to
    if target == "card-v2" and (args.png or args.image or args.output.lower().endswith(".png")):
        target = "card-v2-png"
    image = None
    if args.image:
        image, _ = _read_input(args.image)
    payload = export_book(book, target, image=image)
    if args.output == "-":
        sys.stdout.buffer.write(payload)
        sys.stdout.buffer.flush()
        return EXIT_OK
    _write_atomically(args.output, payload)
    summary: dict[str, Any] = {
        "written": args.output,
        "format": target,
        "bytes": len(payload),
        "source_format": book.source_format,
        "book": book.name,
        "entries": len(book.entries),
        "warnings": list(book.notes),
    }
    if book.card_without_book:
        summary["card_without_book"] = True
    _emit(sys.stdout, summary)
    return EXIT_OK


def inspect_main(argv: list[str]) -> int:
    return _run(_inspect, argv)


def convert_main(argv: list[str]) -> int:
    return _run(_convert, argv)
