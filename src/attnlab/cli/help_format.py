"""Help pages laid out in terminal cells, so that Chinese help lines up and wraps like English help.

click measures text in characters, but a CJK character takes two columns of a terminal: a translated option
list (``--checkpoint 目录``) pushes its descriptions out of line, and Chinese sentences, which have no spaces to
break at, run past the right edge. :class:`CellHelpFormatter` is click's formatter measuring with
:func:`rich.cells.cell_len` and breaking lines between any two CJK characters (never before a closing mark such
as ``，`` or ``）``, never after an opening one such as ``（``); it also writes a heading's colon through the
catalog (``Options:``, ``选项：``), the full-width colon Chinese uses, as in ``用法：``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import click
from rich.cells import cell_len

from attnlab.data.words import CJK_CLASS
from attnlab.i18n import _, tr

CLOSING = "，。、；：？！）」』】》〉”’・ー…,.;:?!)]}"  # a line never starts with one of these
OPENING = "（「『【《〈“‘([{"  # nor ends with one of these
_CHUNK = re.compile(f"\\s+|[{CJK_CLASS}]|[^\\s{CJK_CLASS}]+")


def chunks(text: str) -> list[str]:
    """``text`` cut where a line may break: at spaces (kept as chunks of their own) and between CJK characters,
    closing marks held to what they close and opening marks to what they open."""
    out: list[str] = []
    for piece in _CHUNK.findall(text):
        if out and not piece.isspace() and not out[-1].isspace() and (piece[0] in CLOSING or out[-1][-1] in OPENING):
            out[-1] += piece
        else:
            out.append(piece)
    return out


def _fit(text: str, cells: int) -> str:
    """The longest start of ``text`` at most ``cells`` wide (one character at least, so that wrapping ends)."""
    end = 1
    while end < len(text) and cell_len(text[: end + 1]) <= cells:
        end += 1
    return text[:end]


def wrap(text: str, width: int, initial_indent: str = "", subsequent_indent: str = "") -> list[str]:
    """``text`` as lines at most ``width`` cells wide (a chunk wider than a whole line is cut by cells)."""
    lines: list[str] = []
    indent, line = initial_indent, ""
    for chunk in chunks(text):
        if chunk.isspace():
            line += chunk if line else ""
            continue
        if line and cell_len(indent + line + chunk) > width:
            lines.append(indent + line.rstrip())
            indent, line = subsequent_indent, ""
        while line == "" and cell_len(indent + chunk) > width and len(chunk) > 1:
            cut = _fit(chunk, width - cell_len(indent))
            lines.append(indent + cut)
            indent, chunk = subsequent_indent, chunk[len(cut):]
        line += chunk
    return [*lines, indent + line.rstrip()] if line or not lines else lines


def wrap_paragraphs(text: str, width: int, indent: str = "") -> str:
    """click's paragraphs: split at empty lines, each rewrapped at the indent of its first line, except those that
    start with a ``\\b`` line, which keep their lines as written."""
    out = []
    for paragraph in re.split(r"\n(?:[ \t]*\n)+", text.expandtabs().strip("\n")):
        lines = paragraph.split("\n")
        if lines[0].strip() == "\b":
            out.append("\n".join(indent + line for line in lines[1:]))
        else:
            extra = indent + " " * (len(lines[0]) - len(lines[0].lstrip()))
            out.append("\n".join(wrap(" ".join(line.strip() for line in lines), width, extra, extra)))
    return "\n\n".join(out)


class CellHelpFormatter(click.HelpFormatter):
    """click's help formatter, measuring in terminal cells; headings end in the catalog's colon."""

    def write_heading(self, heading: str) -> None:
        self.write(" " * self.current_indent + tr("{heading}:", heading=heading) + "\n")

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        if prefix is None:  # a full-width colon (用法：) carries its own space
            usage = _("Usage:")
            prefix = usage if cell_len(usage[-1:]) == 2 else usage + " "
        head = " " * self.current_indent + prefix + prog
        if not args:
            self.write(head + "\n")
            return
        hang = " " * (cell_len(head) + 1)
        if self.width - cell_len(hang) < 20:  # too long a prefix: the arguments go below it
            self.write(head + "\n")
            hang = " " * (self.current_indent + 4)
            self.write("\n".join(wrap(args, self.width, hang, hang)) + "\n")
            return
        self.write("\n".join(wrap(args, self.width, head + " ", hang)) + "\n")

    def write_text(self, text: str) -> None:
        self.write(wrap_paragraphs(text, self.width, " " * self.current_indent) + "\n")

    def write_dl(self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        rows = list(rows)
        first_col = min(max((cell_len(row[0]) for row in rows), default=0), col_max) + col_spacing
        margin = " " * (self.current_indent + first_col)
        for term, *rest in rows:
            text = rest[0] if rest else ""
            self.write(" " * self.current_indent + term)
            if not text:
                self.write("\n")
                continue
            if cell_len(term) <= first_col - col_spacing:
                self.write(" " * (first_col - cell_len(term)))
            else:
                self.write("\n" + margin)
            lines = wrap_paragraphs(text, max(self.width - first_col - 2, 10)).split("\n")
            self.write(lines[0] + "\n" + "".join(f"{margin}{line}\n" if line else "\n" for line in lines[1:]))


class CellContext(click.Context):
    """A click context whose help is laid out by :class:`CellHelpFormatter`."""

    formatter_class = CellHelpFormatter
