"""The deterministic splitter (A-2 without a model): notes → one entry per topic.

Pure Python, no Django. Recognised, in this order of precedence:

1. Title lines: ``Title: Name`` lines (also ``Name:``, ``Entry:``, ``Topic:``
   and their Spanish, Chinese and Japanese words), then bold-title lines
   (``**Name**`` or ``__Name__`` alone on a line). They cut the notes when the
   notes begin with one, or (without Markdown headings) after a one-paragraph
   introduction: the notes' first title says which kind titles their topics,
   so the lore's own headings or bold lines stay inside the lore.
2. Markdown headings (``#``…``######`` and setext ``===``/``---``): the level
   of the notes' first heading cuts them when it is used more than once (a
   shallower heading inside a topic is the lore's own and stays in it); else
   the shallowest level used more than once (a lone top heading is the
   document's title); deeper headings stay inside their section.
3. Plain-text headings: a short line without end punctuation, alone after a
   blank line and followed by a paragraph (``THE NORTH``, ``The North:``).
4. Inside a section without headings: definition lists (``Term`` then
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
# "Title: Saltmarch" (the label is a field's name, the rest is the title), possibly in bold.
_TITLE_LINE = re.compile(
    r"^[ \t]*(?:\*\*|__)?(?:title|name|entry|topic|t[ií]tulo|nombre|entrada|tema|标题|標題|名称|名稱|条目|條目|"
    r"タイトル|名前|項目)(?:\*\*|__)?[ \t]*[:：][ \t]*(?:\*\*|__)?(?P<title>[^\n]{1,100}?)(?:\*\*|__)?[ \t]*$",
    re.IGNORECASE,
)
# A line that is only a bold name: "**Saltmarch**", "__Saltmarch__", "**Saltmarch:**", "**Saltmarch**:".
_BOLD_LINE = re.compile(r"^[ \t]*(\*\*|__)(?P<title>[^*_\n]{1,100}?)\1[ \t]*[:：]?[ \t]*$")
# A body's first line naming its field ("Content: ...") after a Title: line.
_BODY_LABEL = re.compile(r"^[ \t]*(?:content|lore|text|description|contenido|descripci[oó]n|内容|內容|描述|正文|本文)"
                         r"[ \t]*[:：][ \t]*", re.IGNORECASE)
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


def _title_lines(lines: list[str], headings: dict[int, tuple[int, str, int]]) -> list[tuple[int, str, int]]:
    """Title: lines or bold-title lines that cut the notes (see the module's order), else nothing."""
    fenced = False
    first: int | None = None
    titled: list[tuple[int, str, int]] = []
    bold: list[tuple[int, str, int]] = []
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or not line.strip():
            continue
        if first is None:
            first = i
        m = _TITLE_LINE.match(line)
        if m and not _SENTENCE_END.search(m.group("title").strip()):
            titled.append((i, m.group("title"), 1))
            continue
        m = _BOLD_LINE.match(line)
        if m and not _SENTENCE_END.search(m.group("title").strip().rstrip(":：")):
            bold.append((i, m.group("title"), 1))
    # Bold lines after a blank line are the notes' titles when there are several: a bold line inside the
    # lore (a sub-heading right under a tag or a paragraph) then stays in it.
    spaced = [b for b in bold if b[0] == 0 or not lines[b[0] - 1].strip()]
    bold = spaced if len(spaced) >= 2 else bold
    for found in (titled, bold):
        if len(found) < 2 or first is None:
            continue
        # Before the first title, at most one paragraph (the notes' own introduction); more, and these
        # lines are inside the lore of topics titled some other way.
        preamble = "\n".join(lines[first : found[0][0]]).strip().split("\n")
        if found[0][0] == first or (not headings and all(line.strip() for line in preamble)):
            return found
    return []


def _unlabelled(cut: list[tuple[str | None, str]]) -> list[tuple[str | None, str]]:
    return [(title, _BODY_LABEL.sub("", body, count=1) if title else body) for title, body in cut]


def sections(text: str) -> list[tuple[str | None, str]]:
    """The notes cut at their topics' titles (title lines, Markdown, else plain text): (title | None, body)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    headings = _heading_lines(lines)
    titled = _title_lines(lines, headings)
    if titled:
        return _unlabelled(_cut(lines, titled))
    if headings:
        levels = sorted({level for level, _, _ in headings.values()})
        counts = {lv: sum(1 for level, _, _ in headings.values() if level == lv) for lv in levels}
        first_level = headings[min(headings)][0]
        if counts[first_level] > 1:
            # The notes open with a topic's heading: its level titles the topics, other levels are the lore's.
            return _cut(lines, [(i, title, span) for i, (lv, title, span) in sorted(headings.items())
                                if lv == first_level])
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
