"""Tables in a terminal of 80 columns (a pipe, a small window), whatever the language: no phrase broken.

rich wraps a table's title to the width of the table, so a table of three narrow columns broke its own title
mid-phrase (``Context vectors Z = weights`` / ``· V``). :func:`titled_table` makes the table at least as wide as its
title (rich measures it in terminal cells, a CJK character two), up to the terminal's width; a title longer than the
terminal wraps there, between words. What the tables hold is laid out by their makers: a column that must stay whole
is ``no_wrap``, and a table too wide for the terminal drops its least needed columns (``attnlab bench``).
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text


def titled_table(title: str, **options: Any) -> Table:
    """A rich :class:`~rich.table.Table` titled ``title`` (rich markup), left-justified, never narrower than its
    title; ``options`` are the table's."""
    options.setdefault("title_justify", "left")
    width = cell_len(Text.from_markup(title).plain)
    return Table(title=title, min_width=max(width, options.pop("min_width", 0) or 0), **options)
