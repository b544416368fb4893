"""Is a draft drawn from its source? (A-2: split keeps the writer's facts and wording, issue 33 point 5.)

Pure functions, no Django. A split entry's lore is *grounded* when most of
its wording is found in the notes: the share of its word trigrams (in
scripts written without spaces, character bigrams) that also occur in the
notes, both normalised (NFKC, case folded, punctuation and whitespace runs
as one space). Aliases must be words or phrases found in the notes and never
the prompt's placeholders. A titled topic of the notes (a heading, a bold or
``Title:`` line) that no entry covers is reported.

:func:`draft_ground` applies all of it to a draft (the split job's model path);
:func:`draft_placeholders` only the placeholder check (generate has no source).
An entry that fails is kept and *flagged* (``entry["flags"]``: the reasons a
person reads in the review); nothing here drops an entry.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from jobs import splitter

# Why 0.5: a split keeps the writer's wording (the prompt asks for it), so a faithful entry shares all its
# grams with the notes, and lore with every sixth word left out still shares ~0.64 (median), while lore that
# is not in the notes shares almost none by chance (``python -m bench.split_bench`` on 15 real books: own
# entries 1.0, none flagged; every sixth word left out 4% flagged; an unrelated book's entries median 0.01,
# 9 in 10 under 0.14, all flagged). Below half, more of the entry is the model's than the writer's: a
# person should look before keeping it.
GROUNDED_MIN = 0.5
WORD_GRAM = 3  # words: three in a row are rarely shared by chance
CJK_GRAM = 2  # a character of a script without spaces is about a morpheme: two make about a word
# The share of a topic's own text found in the draft's lore above which the topic counts as covered
# even when no entry carries its title (the model renamed it).
TOPIC_COVERED_MIN = 0.5

# What the prompt shows as the shape of an answer ("aliases": ["..."]) and words that name the field
# rather than fill it: a weak model copies them.
PLACEHOLDERS = frozenset({"alias", "aliases", "keyword", "keywords", "key", "keys", "title", "lore", "name",
                          "example", "placeholder", "string", "none", "null", "n/a", "na", "tbd", "todo"})

# Scripts written without spaces between words: Han, Hiragana, Katakana, Hangul syllables, Thai, etc.
_NO_SPACE = re.compile(
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f"
    "\u1780-\u17ff\uac00-\ud7af\U00020000-\U0002fa1f]"
)
# Sentence and clause ends: an n-gram never spans two sentences, so lore joined from two places is
# measured sentence by sentence, as the notes are.
_SEGMENT = re.compile(r"[.!?;:\n。！？；：…]+")


@dataclass(frozen=True, kw_only=True)
class Grounding:
    """How much of one entry's lore is in the source: ``share`` of its ``grams`` found there."""

    share: float
    grams: int
    found: int

    @property
    def grounded(self) -> bool:
        return self.share >= GROUNDED_MIN


def normalise(text: str) -> str:
    """NFKC, case folded; every run of punctuation, symbols or whitespace becomes one space."""
    text = unicodedata.normalize("NFKC", text).casefold()
    out = [ch if (ch.isalnum() or ch == "_") else " " for ch in text]
    return re.sub(r"\s+", " ", "".join(out)).strip()


def _tokens(segment: str) -> list[tuple[str, bool]]:
    """(token, written without spaces?) in order: words, and single characters of spaceless scripts."""
    out: list[tuple[str, bool]] = []
    for word in normalise(segment).split(" "):
        if not word:
            continue
        if not _NO_SPACE.search(word):
            out.append((word, False))
            continue
        run = ""
        for ch in word:
            if _NO_SPACE.match(ch):
                if run:
                    out.append((run, False))
                    run = ""
                out.append((ch, True))
            else:
                run += ch
        if run:
            out.append((run, False))
    return out


def grams(text: str) -> list[str]:
    """The text's n-grams, sentence by sentence: word trigrams, character bigrams where no spaces are written.

    A sentence shorter than its n is one gram as a whole, so short lore is measured too.
    """
    out: list[str] = []
    for segment in _SEGMENT.split(text):
        tokens = _tokens(segment)
        if not tokens:
            continue
        # Runs of the same kind of token: a mixed sentence is measured per script.
        runs: list[list[tuple[str, bool]]] = []
        for token in tokens:
            if runs and runs[-1][-1][1] == token[1]:
                runs[-1].append(token)
            else:
                runs.append([token])
        for run in runs:
            n = CJK_GRAM if run[0][1] else WORD_GRAM
            sep = "" if run[0][1] else " "
            words = [t for t, _ in run]
            if len(words) < n:
                out.append(sep.join(words))
                continue
            out.extend(sep.join(words[i : i + n]) for i in range(len(words) - n + 1))
    return out


@dataclass(frozen=True)
class Source:
    """The notes, prepared once for many checks."""

    text: str
    flat: str  # normalised, with a space at each end so phrases match at word boundaries
    bare: str  # normalised without spaces: a spaceless script's phrase matches across the notes' line breaks
    grams: frozenset[str]

    @classmethod
    def of(cls, text: str) -> Source:
        flat = normalise(text)
        return cls(text=text, flat=f" {flat} ", bare=flat.replace(" ", ""), grams=frozenset(grams(text)))

    def has_phrase(self, phrase: str) -> bool:
        """Whether ``phrase`` occurs in the notes as whole words (any place in a spaceless script)."""
        flat = normalise(phrase)
        if not flat:
            return False
        if _NO_SPACE.search(flat):
            return flat in self.flat or flat.replace(" ", "") in self.bare
        return f" {flat} " in self.flat


def _short(gram: str) -> bool:
    if _NO_SPACE.search(gram):
        return len(gram) < CJK_GRAM
    return gram.count(" ") < WORD_GRAM - 1


def grounding(lore: str, source: Source) -> Grounding:
    """The share of ``lore``'s n-grams that occur in the source (1.0 for lore with no words at all)."""
    own = grams(lore)
    if not own:
        return Grounding(share=1.0, grams=0, found=0)
    # A whole sentence shorter than a gram is looked up as a phrase (it may sit inside a longer one).
    found = sum(1 for g in own if g in source.grams or (_short(g) and source.has_phrase(g)))
    return Grounding(share=round(found / len(own), 4), grams=len(own), found=found)


def is_placeholder(text: str) -> bool:
    """The prompt's ``...``/``…``, a field's own name (``alias``, ``keyword``), or nothing at all."""
    stripped = unicodedata.normalize("NFKC", text).strip()
    if not normalise(stripped):  # empty, or only punctuation: "...", "…", "-", "?"
        return True
    return stripped.casefold().strip(" .…:;,-_\"'") in PLACEHOLDERS


def topics(text: str) -> list[tuple[str, str]]:
    """The notes' titled topics: (title, its text) for headings, bold-title and ``Title:`` lines."""
    return [(title, body) for title, body in splitter.sections(text) if title]


def _flag(entry: dict[str, Any], reason: str) -> None:
    entry["flags"] = [*entry.get("flags", []), reason]


def _aliases_kept(entry: dict[str, Any], keep: Any) -> list[str]:
    """Drops the aliases ``keep`` refuses from ``entry``; answers the dropped ones."""
    dropped = [a for a in entry.get("aliases", []) if not keep(a)]
    if dropped:
        entry["aliases"] = [a for a in entry.get("aliases", []) if keep(a)]
    return dropped


def _said(entry: dict[str, Any]) -> str:
    return repr(str(entry.get("title", ""))[:40])


def draft_placeholders(entries: Sequence[dict[str, Any]]) -> list[str]:
    """Placeholder aliases are removed and a placeholder title is flagged; answers the warnings (in place)."""
    warnings: list[str] = []
    for entry in entries:
        dropped = _aliases_kept(entry, lambda a: not is_placeholder(a))
        if dropped:
            warnings.append(f"entry {_said(entry)}: the placeholder alias(es) {', '.join(map(repr, dropped))} "
                            "were removed")
        if is_placeholder(str(entry.get("title", ""))):
            _flag(entry, "its title is a placeholder, not a name")
            warnings.append(f"entry {_said(entry)}: its title is a placeholder")
    return warnings


def _covered(title: str, body: str, entries: Iterable[dict[str, Any]], lore: Source) -> bool:
    key = normalise(title)
    for entry in entries:
        names = [normalise(str(entry.get("title", ""))), *(normalise(a) for a in entry.get("aliases", []))]
        if any(key and name and (key == name or key in name or name in key) for name in names):
            return True
    return bool(body.strip()) and grounding(body, lore).share >= TOPIC_COVERED_MIN


def draft_ground(entries: Sequence[dict[str, Any]], notes: str) -> list[str]:
    """Checks a split draft against its notes, in place; answers the warnings for the job.

    - lore with less than :data:`GROUNDED_MIN` of its wording in the notes: the entry is flagged;
    - aliases that are placeholders or not found in the notes: removed;
    - a titled topic of the notes that no entry covers: a warning.
    """
    source = Source.of(notes)
    warnings = draft_placeholders(entries)
    for entry in entries:
        measured = grounding(str(entry.get("lore", "")), source)
        if not measured.grounded:
            percent = int(measured.share * 100)
            _flag(entry, f"only {percent}% of its lore is worded as in the notes (at least "
                         f"{int(GROUNDED_MIN * 100)}% expected): it may be invented")
            warnings.append(f"entry {_said(entry)}: only {percent}% of its lore is found in the notes; "
                            "it is flagged for review")
        dropped = _aliases_kept(entry, source.has_phrase)
        if dropped:
            warnings.append(f"entry {_said(entry)}: the alias(es) {', '.join(map(repr, dropped))} are not in "
                            "the notes and were removed")
    lore = Source.of("\n".join(str(e.get("lore", "")) for e in entries))
    for title, body in topics(notes):
        if not _covered(title, body, entries, lore):
            warnings.append(f"the notes' topic {title[:60]!r} is in no entry")
    return warnings
