"""Key expressions (K-1): boolean logic over keys, for the keyword profiles.

An entry's ``key_expression``, when set, decides whether the entry's keys
match instead of ``keys`` + ``secondary_keys``/``secondary_logic``.

Grammar (whitespace between tokens is ignored)::

    expression := clause ( "," clause )*        all clauses must hold
    clause     := term ( "OR" term )*
    term       := factor ( "AND" factor )*
    factor     := "NOT" factor | "(" clause ")" | atom
    atom       := phrase | regex | words
    phrase     := '"' characters, with \\" and \\\\ escapes '"'
    regex      := "/" pattern "/" flags           (flags: i m s, and g u y d ignored)
    words      := one or more plain words         ("red dragon" is one key)

* Precedence, tightest first: ``NOT`` > ``AND`` > ``OR`` > ``,``. The comma
  is an AND of lowest precedence, so ``(dragon AND egg) OR hatchling, NOT
  statue`` reads ``((dragon AND egg) OR hatchling) AND NOT statue``.
* Operators are the upper-case words ``AND``, ``OR``, ``NOT`` only: lower-case
  ``and`` is part of a key (``salt and pepper`` is one key). Quote a key to
  use an operator word, a comma, a parenthesis or a leading slash literally.
* Each atom is a key like the entry's keys: the entry's (or book's) case
  sensitivity and whole-word settings apply. A regex atom is a regular
  expression in ``classic``; ``server`` matches it literally, as it does every
  ``/a+/``-shaped key (S-7). A phrase is always literal.
* An expression that holds when no key at all is present (``NOT statue``,
  ``a OR NOT b``) is refused: an entry needs something said to fire; make it
  constant and gate it otherwise.

Errors are :class:`KeyExpressionError` with a 0-based character position.
Parsing happens once per book compile (and when an entry is saved); a turn
only evaluates the tree over the set of atoms the one-pass matcher found.
No Django here.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "KEY_EXPRESSION_RULE",
    "KeyExpression",
    "KeyExpressionError",
    "key_expression_parse",
]

KEY_EXPRESSION_RULE = "K-1"
MAX_EXPRESSION_CHARS = 2_000
MAX_ATOMS = 50
_MAX_NESTING = 32

AtomKind = Literal["words", "phrase", "regex"]
_OPERATORS = ("AND", "OR", "NOT")
_REGEX_FLAGS = frozenset("imsguyd")
_DELIMITERS = frozenset('(),"')


class KeyExpressionError(ValueError):
    """A key expression that does not parse; ``position`` is a 0-based character offset."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} (at position {position})")
        self.message = message
        self.position = position
        self.rule = KEY_EXPRESSION_RULE


@dataclass(frozen=True, slots=True)
class Atom:
    """One key of an expression: ``text`` is the key as the matcher takes it."""

    text: str
    kind: AtomKind
    position: int

    @property
    def regex(self) -> bool:
        return self.kind == "regex"


@dataclass(frozen=True, slots=True)
class _Var:
    atom: int


@dataclass(frozen=True, slots=True)
class _Not:
    operand: Node


@dataclass(frozen=True, slots=True)
class _And:
    operands: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class _Or:
    operands: tuple[Node, ...]


Node = _Var | _Not | _And | _Or


def _evaluate(node: Node, present: Callable[[int], bool]) -> bool:
    if isinstance(node, _Var):
        return present(node.atom)
    if isinstance(node, _Not):
        return not _evaluate(node.operand, present)
    if isinstance(node, _And):
        return all(_evaluate(operand, present) for operand in node.operands)
    return any(_evaluate(operand, present) for operand in node.operands)


def _render(node: Node, atoms: tuple[Atom, ...], parent: int = 0) -> str:
    """Canonical text of a tree (for logs); ``parent`` is the enclosing precedence."""
    if isinstance(node, _Var):
        return _atom_source(atoms[node.atom])
    if isinstance(node, _Not):
        return "NOT " + _render(node.operand, atoms, 3)
    level, word = (2, " AND ") if isinstance(node, _And) else (1, " OR ")
    text = word.join(_render(operand, atoms, level) for operand in node.operands)
    return f"({text})" if parent > level else text


def _atom_source(atom: Atom) -> str:
    if atom.kind == "phrase":
        return '"' + atom.text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return atom.text


@dataclass(frozen=True, slots=True)
class KeyExpression:
    """A parsed expression: distinct atoms (first-use order) and the tree over their indices."""

    source: str
    atoms: tuple[Atom, ...]
    tree: Node
    # Atoms under an even number of NOTs: a key whose presence can make the expression true.
    positive: tuple[int, ...]
    # The canonical text (for request logs), rendered once at parse: turns only read it.
    text: str

    def evaluate(self, present: Callable[[int], bool]) -> bool:
        """True when the expression holds; ``present(i)`` says whether atom ``i`` was found."""
        return _evaluate(self.tree, present)

    def canonical(self) -> str:
        return self.text

    def nearest_keys(self) -> tuple[tuple[str, ...], tuple[str, ...], str]:
        """The nearest keys / secondary keys / secondary logic for formats without expressions.

        Keys: the positive keys of the first AND group (``a OR b`` stays two keys; in ``(a AND b)
        OR c`` the group is ``a AND b``: key ``a``). Secondary keys: the group's other plain keys
        (``and_all``) or, failing that, the keys it must not see (``not_any``). An approximation,
        named in the export receipt; the expression itself rides along for the round trip.
        """
        factors: list[Node] = list(self.tree.operands) if isinstance(self.tree, _And) else [self.tree]
        first = factors[0]
        keys: list[int]
        if isinstance(first, _Or) and all(isinstance(branch, _Var) for branch in first.operands):
            keys = [branch.atom for branch in first.operands if isinstance(branch, _Var)]
            rest = factors[1:]
        else:
            if isinstance(first, _Or):
                group = first.operands[0]
                head: list[Node] = list(group.operands) if isinstance(group, _And) else [group]
                factors = head + factors[1:]
            singles = [f.atom for f in factors if isinstance(f, _Var)]
            if singles:
                keys = singles[:1]
                rest = [f for f in factors if not (isinstance(f, _Var) and f.atom == keys[0])]
            else:
                keys = [i for i in _atoms_of(factors[0]) if i in self.positive] or list(self.positive[:1])
                rest = factors[1:]
        also = [f.atom for f in rest if isinstance(f, _Var)]
        negated = [f.operand.atom for f in rest if isinstance(f, _Not) and isinstance(f.operand, _Var)]

        def texts(indices: list[int]) -> tuple[str, ...]:
            return tuple(dict.fromkeys(self.atoms[i].text for i in indices))

        if also:
            return texts(keys), texts(also), "and_all"
        if negated:
            return texts(keys), texts(negated), "not_any"
        return texts(keys), (), "and_any"


def _atoms_of(node: Node) -> list[int]:
    if isinstance(node, _Var):
        return [node.atom]
    if isinstance(node, _Not):
        return _atoms_of(node.operand)
    return [i for operand in node.operands for i in _atoms_of(operand)]


def _positive(node: Node, negated: bool, into: list[int]) -> None:
    if isinstance(node, _Var):
        if not negated and node.atom not in into:
            into.append(node.atom)
    elif isinstance(node, _Not):
        _positive(node.operand, not negated, into)
    else:
        for operand in node.operands:
            _positive(operand, negated, into)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: Literal["(", ")", ",", "AND", "OR", "NOT", "word", "phrase", "regex", "end"]
    text: str
    start: int
    end: int


def _tokens(source: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(source)
    while i < n:
        ch = source[i]
        if ch.isspace():
            i += 1
        elif ch in "(),":
            tokens.append(_Token(ch, ch, i, i + 1))  # type: ignore[arg-type]
            i += 1
        elif ch == '"':
            j, chars = i + 1, []
            while j < n and source[j] != '"':
                if source[j] == "\\" and j + 1 < n:
                    j += 1
                chars.append(source[j])
                j += 1
            if j >= n:
                raise KeyExpressionError("unterminated quoted phrase", i)
            if not "".join(chars).strip():
                raise KeyExpressionError("empty quoted phrase", i)
            tokens.append(_Token("phrase", "".join(chars), i, j + 1))
            i = j + 1
        elif ch == "/":
            j, in_class = i + 1, False
            while j < n:
                c = source[j]
                if c == "\\":
                    j += 2
                    continue
                if c == "[":
                    in_class = True
                elif c == "]":
                    in_class = False
                elif c == "/" and not in_class:
                    break
                j += 1
            if j >= n:
                raise KeyExpressionError('unterminated regex: end it with "/" (or quote a key that starts with "/")', i)
            if j == i + 1:
                raise KeyExpressionError("empty regex", i)
            k = j + 1
            while k < n and source[k].isalpha():
                if source[k] not in _REGEX_FLAGS:
                    raise KeyExpressionError(f"unknown regex flag {source[k]!r}", k)
                k += 1
            if k < n and not (source[k].isspace() or source[k] in "),"):
                raise KeyExpressionError("a regex must be followed by a space, an operator, ')' or ','", k)
            tokens.append(_Token("regex", source[i:k], i, k))
            i = k
        else:
            j = i
            while j < n and not source[j].isspace() and source[j] not in _DELIMITERS:
                j += 1
            word = source[i:j]
            kind = word if word in _OPERATORS else "word"
            tokens.append(_Token(kind, word, i, j))  # type: ignore[arg-type]
            i = j
    tokens.append(_Token("end", "", n, n))
    return tokens


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens = _tokens(source)
        self.at = 0
        self.atoms: list[Atom] = []
        self.depth = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.at]

    def take(self) -> _Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def expression(self) -> Node:
        clauses = [self.clause()]
        while self.token.kind == ",":
            self.take()
            clauses.append(self.clause())
        if self.token.kind != "end":
            raise self.unexpected("',', 'AND', 'OR' or the end")
        return clauses[0] if len(clauses) == 1 else _And(tuple(clauses))

    def clause(self) -> Node:
        terms = [self.term()]
        while self.token.kind == "OR":
            self.take()
            terms.append(self.term())
        return terms[0] if len(terms) == 1 else _Or(tuple(terms))

    def term(self) -> Node:
        factors = [self.factor()]
        while self.token.kind == "AND":
            self.take()
            factors.append(self.factor())
        return factors[0] if len(factors) == 1 else _And(tuple(factors))

    def factor(self) -> Node:
        token = self.token
        if token.kind == "NOT":
            self.take()
            return _Not(self.nested(self.factor))
        if token.kind == "(":
            self.take()
            inner = self.nested(self.clause)
            if self.token.kind != ")":
                if self.token.kind == "end":
                    raise KeyExpressionError("missing ')' for the '(' here", token.start)
                raise self.unexpected("')'")
            self.take()
            return inner
        if token.kind == "phrase":
            self.take()
            return self.atom(token.text, "phrase", token.start)
        if token.kind == "regex":
            self.take()
            return self.atom(token.text, "regex", token.start)
        if token.kind == "word":
            first = self.take()
            last = first
            while self.token.kind == "word":
                last = self.take()
            return self.atom(self.source[first.start:last.end], "words", first.start)
        raise self.unexpected("a key, '(' or 'NOT'")

    def nested(self, parse: Callable[[], Node]) -> Node:
        self.depth += 1
        if self.depth > _MAX_NESTING:
            raise KeyExpressionError(f"nested more than {_MAX_NESTING} levels deep", self.token.start)
        try:
            return parse()
        finally:
            self.depth -= 1

    def atom(self, text: str, kind: AtomKind, position: int) -> _Var:
        for index, known in enumerate(self.atoms):
            if known.text == text and known.regex == (kind == "regex"):
                return _Var(index)
        if len(self.atoms) >= MAX_ATOMS:
            raise KeyExpressionError(f"more than {MAX_ATOMS} distinct keys", position)
        self.atoms.append(Atom(text=text, kind=kind, position=position))
        return _Var(len(self.atoms) - 1)

    def unexpected(self, wanted: str) -> KeyExpressionError:
        token = self.token
        found = "the end" if token.kind == "end" else repr(token.text)
        return KeyExpressionError(f"expected {wanted}, found {found}", token.start)


def key_expression_parse(source: str) -> KeyExpression:
    """Parse ``source``; raises :class:`KeyExpressionError` (with a position) when it is not valid."""
    if len(source) > MAX_EXPRESSION_CHARS:
        raise KeyExpressionError(f"longer than {MAX_EXPRESSION_CHARS} characters", MAX_EXPRESSION_CHARS)
    if not source.strip():
        raise KeyExpressionError("empty expression", 0)
    parser = _Parser(source)
    tree = parser.expression()
    atoms = tuple(parser.atoms)
    if _evaluate(tree, lambda _atom: False):
        raise KeyExpressionError(
            "the expression holds when no key is present (only NOTs on this side of an OR): "
            "it needs a key that must be said",
            0,
        )
    positive: list[int] = []
    _positive(tree, False, positive)
    return KeyExpression(
        source=source, atoms=atoms, tree=tree, positive=tuple(positive), text=_render(tree, atoms)
    )
