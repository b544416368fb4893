"""`@@` decorators (C-13) as the editor sees them: validate, show, warn.

``decorators_read`` is the one adapter between books and the engine's pure
parser, ``retrieval.engine.decorators.decorators_parse``: the editor and the
live selection read decorators with the same code. The editor's policy on top:

- a known decorator with an unusable value (``@@probability 150``) is an
  *error*: the editor refuses the content (400, rule C-13), because the engine
  would silently ignore it;
- unknown decorators, repeats, values given to flags and conflicts are
  *warnings*: the content is kept as written and the listing reports them.
"""
from __future__ import annotations

from dataclasses import dataclass

from retrieval.engine.decorators import decorators_parse


@dataclass(frozen=True, kw_only=True)
class Decorator:
    name: str
    argument: str | None
    known: bool
    line: int  # 1-based line number in the content


@dataclass(frozen=True, kw_only=True)
class DecoratorProblem:
    line: int
    name: str
    kind: str  # the engine's kind: unknown, invalid, repeated, ignored_value, conflict
    message: str


@dataclass(frozen=True, kw_only=True)
class DecoratorReport:
    # Applied and unknown decorator lines, in line order.
    decorators: tuple[Decorator, ...]
    # Known decorators with an unusable value: the editor refuses them.
    errors: tuple[DecoratorProblem, ...]
    # Everything else worth telling: unknown decorators above all (kept, never sent to the model).
    warnings: tuple[DecoratorProblem, ...]
    # The content as the model sees it (decorator block removed).
    body: str


def decorators_read(content: str) -> DecoratorReport:
    """Parse the leading ``@@`` block of ``content``. Pure; never raises."""
    parsed = decorators_parse(content)
    shown = [Decorator(name=d.name, argument=d.value, known=True, line=d.line) for d in parsed.decorators]
    shown += [Decorator(name=d.name, argument=d.value, known=False, line=d.line) for d in parsed.unknown]
    problems = [
        DecoratorProblem(line=w.line, name=w.name, kind=w.kind, message=w.message) for w in parsed.warnings
    ]
    return DecoratorReport(
        decorators=tuple(sorted(shown, key=lambda d: d.line)),
        errors=tuple(p for p in problems if p.kind == "invalid"),
        warnings=tuple(p for p in problems if p.kind != "invalid"),
        body=parsed.text,
    )
