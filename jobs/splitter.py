"""The deterministic splitter (A-2 without a model): notes → one entry per topic.

Pure Python, no Django. Recognised, in this order of precedence:

1. Markdown headings (``#``…``######`` and setext ``===``/``---``): the
   shallowest level used more than once cuts the notes (a lone top heading is
   the document's title); deeper headings stay inside their section.
2. Plain-text headings: a short line without end punctuation, alone after a
   blank line and followed by a paragraph (``THE NORTH``, ``The North:``).
3. Inside a section without headings: definition lists (``Term`` then
   ``: text``), ``Name: text`` / ``Name — text`` lines (also as bullets), a
   line ending in ``:`` heading a bullet group, else blank-line paragraphs.

Titles are noun phrases: the heading or name as written (markup removed),
else the first capitalised run or the first words of a paragraph's first
sentence. ``sections`` gives the same cuts for chunking notes for a model.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

TITLE_MAX = 100
TITLE_MIN = 2
CONTENT_MIN = 20
CONTENT_MAX = 20_000

_ATX = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_SETEXT = re.compile(r"^(=+|-+)[ \t]*$")
_BULLET = re.compile(r"^[ \t]*(?:[-*+•]|\d+[.)])[ \t]+(.*)$")
_DEF = re.compile(r"^[ \t]*:[ \t]+(.+)$")
# "Name: text", "Name — text", "Name – text", "Name - text"; the name is short and starts a line.
_NAMED = re.compile(r"^(?:\*\*|__)?(?P<name>[^\s:—–][^:—–\n]{0,79}?)(?:\*\*|__)?[ \t]*(?::|[ \t][—–-])[ \t]+(?P<text>\S.*)$")
_END_PUNCT = re.compile(r"[.!?,;…)\]\"”»]$")
_SENTENCE_END = re.compile(r"[.!?,;…。！？，；]$")
_MARKUP = re.compile(r"[*_`]+")
_STOP = frozenset(
    "a an the this that these those it its is are was were be been of in on at to for from by with and or but "
    "as into over under there here they their them he she his her we our you your i my el la los las un una de "
    "del y en".split()
)


@dataclass(frozen=True, kw_only=True)
class SplitEntry:
    title: str
    content: str


def _clean_title(text: str) -> str:
    title = _MARKUP.sub("", text).strip().strip(":—–-").strip()
    title = re.sub(r"\s+", " ", title)
    if len(title) > TITLE_MAX:
        cut = title[:TITLE_MAX].rsplit(" ", 1)[0]
        title = cut or title[:TITLE_MAX]
    return title


def _heading_lines(lines: list[str]) -> dict[int, tuple[int, str, int]]:
    """Line index → (level, title, lines the heading spans) for Markdown headings, outside code fences."""
    found: dict[int, tuple[int, str, int]] = {}
    fenced = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        m = _ATX.match(line)
        if m:
            found[i] = (len(m.group(1)), m.group(2), 1)
            continue
        if (
            i + 1 < len(lines)
            and _SETEXT.match(lines[i + 1])
            and line.strip()
            and not _BULLET.match(line)
            and (i == 0 or not lines[i - 1].strip())
            and len(line.strip()) <= TITLE_MAX
        ):
            found[i] = (1 if lines[i + 1].lstrip().startswith("=") else 2, line.strip(), 2)
    return found


def _is_plain_heading(lines: list[str], i: int) -> bool:
    line = lines[i].strip()
    if not line or len(line) > 60 or len(line.split()) > 8:
        return False
    if _BULLET.match(lines[i]) or _DEF.match(lines[i]) or _NAMED.match(line):
        return False
    body = line[:-1] if line.endswith(":") else line
    # Not lower-case first: capitals, digits, symbols and scripts without case (CJK) all head a section.
    if not body or _SENTENCE_END.search(body) or body[0].islower():
        return False
    before_blank = i == 0 or not lines[i - 1].strip()
    after = lines[i + 1].strip() if i + 1 < len(lines) else ""
    # A paragraph follows directly: a heading names it. A lone short line between blank lines does too
    # when it ends with ":" or is all capitals.
    if before_blank and after and not _is_heading_like(after):
        return True
    return before_blank and (line.endswith(":") or body.isupper()) and i + 1 < len(lines)


def _is_heading_like(line: str) -> bool:
    return bool(_ATX.match(line))


def _cut(lines: list[str], starts: list[tuple[int, str, int]]) -> list[tuple[str | None, str]]:
    """(title or None for a preamble, body text) for each section starting at ``starts``."""
    out: list[tuple[str | None, str]] = []
    first = starts[0][0] if starts else len(lines)
    preamble = "\n".join(lines[:first]).strip()
    if preamble:
        out.append((None, preamble))
    for n, (index, title, span) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        out.append((title, "\n".join(lines[index + span : end]).strip()))
    return out


def sections(text: str) -> list[tuple[str | None, str]]:
    """The notes cut at their top-level headings (Markdown, else plain text): (title | None, body)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    headings = _heading_lines(lines)
    if headings:
        levels = sorted({level for level, _, _ in headings.values()})
        counts = {lv: sum(1 for level, _, _ in headings.values() if level == lv) for lv in levels}
        level = next((lv for lv in levels if counts[lv] > 1), levels[0])
        starts = [(i, title, span) for i, (lv, title, span) in sorted(headings.items()) if lv == level]
        # Shallower headings (a document or part title) name no topic: they are dropped, not merged into one.
        kept = [line for i, line in enumerate(lines) if not (i in headings and headings[i][0] < level)]
        if len(kept) != len(lines):
            return sections("\n".join(kept))
        return _cut(lines, starts)
    plain = [(i, lines[i].strip(), 1) for i in range(len(lines)) if _is_plain_heading(lines, i)]
    if len(plain) >= 2:
        return _cut(lines, plain)
    return [(None, text.strip())] if text.strip() else []


def _paragraphs(body: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n[ \t]*\n", body) if p.strip()]


def _named(line: str) -> tuple[str, str] | None:
    m = _NAMED.match(line.strip())
    if not m:
        return None
    name = m.group("name").strip()
    words = name.split()
    if not words or len(words) > 6 or not (name[0].isupper() or name[0].isdigit() or not name[0].isascii()):
        return None
    if _END_PUNCT.search(name) or name.lower().startswith(("http", "www")):
        return None
    return name, m.group("text").strip()


def noun_phrase(text: str) -> str:
    """A short title for untitled text: its first capitalised run, else its first content words."""
    sentence = re.split(r"(?<=[.!?])\s|\n", _MARKUP.sub("", text.strip()), maxsplit=1)[0]
    words = re.findall(r"[\w'’-]+", sentence)
    run: list[str] = []
    for n, word in enumerate(words):
        capital = word[:1].isupper()
        if capital and (n > 0 or word.lower() not in _STOP):
            run.append(word)
        elif run and word.lower() in {"of", "de", "del", "the"} and n + 1 < len(words) and words[n + 1][:1].isupper():
            run.append(word)
        elif run:
            break
        if len(run) >= 5:
            break
    if run and len(" ".join(run)) >= TITLE_MIN:
        return _clean_title(" ".join(run))
    content = [w for w in words if w.lower() not in _STOP][:4]
    title = " ".join(content) or sentence[:40]
    return _clean_title(title[:1].upper() + title[1:])


def _split_untitled(body: str) -> list[tuple[str, str]]:
    """A section without headings: named lines, definition lists, bullet groups, else paragraphs."""
    lines = [line for line in body.split("\n")]
    entries: list[tuple[str, str]] = []
    # Definition lists and named lines, possibly as bullets.
    named_at: dict[int, tuple[str, str]] = {}
    for i, line in enumerate(lines):
        bullet = _BULLET.match(line)
        candidate = _named(bullet.group(1) if bullet else line)
        if candidate:
            named_at[i] = candidate
        elif i + 1 < len(lines) and line.strip() and _DEF.match(lines[i + 1]) and not _DEF.match(line):
            named_at[i] = (line.strip(), "")
    if len(named_at) >= 2:
        current: list[str] | None = None
        title = ""
        lead: list[str] = []
        for i, line in enumerate(lines):
            if i in named_at:
                if current is not None:
                    entries.append((title, "\n".join(current).strip()))
                title, first = named_at[i]
                current = [first] if first else []
            elif current is None:
                lead.append(line)
            else:
                d = _DEF.match(line)
                current.append(d.group(1) if d else line)
        if current is not None:
            entries.append((title, "\n".join(current).strip()))
        head = "\n".join(lead).strip()
        return ([(noun_phrase(head), head)] if head else []) + entries
    # Paragraphs; a line ending in ":" keeps its bullet group with it.
    for paragraph in _paragraphs(body):
        first, _, rest = paragraph.partition("\n")
        if first.rstrip().endswith(":") and rest and _BULLET.match(rest.split("\n", 1)[0]):
            entries.append((_clean_title(first), rest.strip()))
        else:
            entries.append((noun_phrase(paragraph), paragraph))
    return entries


def split_text(text: str) -> list[SplitEntry]:
    """One entry per topic of ``text``, in order; every entry fits W-12 (short ones join their neighbour)."""
    raw: list[tuple[str, str]] = []
    for title, body in sections(text):
        if title is None:
            raw.extend(_split_untitled(body))
        elif body:
            raw.append((_clean_title(title), body))
    merged: list[list[str]] = []
    for title, content in raw:
        title = _clean_title(title) or noun_phrase(content)
        content = content.strip()
        if merged and (len(content) < CONTENT_MIN or len(title) < TITLE_MIN):
            merged[-1][1] = f"{merged[-1][1]}\n\n{title}: {content}".strip()
            continue
        merged.append([title, content])
    if merged and len(merged[0][1]) < CONTENT_MIN and len(merged) > 1:
        title, content = merged.pop(0)
        merged[0][1] = f"{title}: {content}\n\n{merged[0][1]}"
    out: list[SplitEntry] = []
    for title, content in merged:
        for n, part in enumerate(_content_parts(content)):
            out.append(SplitEntry(title=title if n == 0 else _clean_title(f"{title} ({n + 1})"), content=part))
    return [e for e in out if len(e.content) >= CONTENT_MIN and len(e.title) >= TITLE_MIN]


def _content_parts(content: str) -> list[str]:
    """Content over the W-12 maximum, cut at paragraph breaks (else hard) into parts that fit."""
    if len(content) <= CONTENT_MAX:
        return [content]
    parts: list[str] = []
    current = ""
    for paragraph in _paragraphs(content):
        while len(paragraph) > CONTENT_MAX:
            parts.append(paragraph[:CONTENT_MAX])
            paragraph = paragraph[CONTENT_MAX:]
        if current and len(current) + 2 + len(paragraph) > CONTENT_MAX:
            parts.append(current)
            current = paragraph
        else:
            current = f"{current}\n\n{paragraph}" if current else paragraph
    if current:
        parts.append(current)
    return parts
