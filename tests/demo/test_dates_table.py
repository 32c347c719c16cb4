"""The demo's table of translations stays in columns when a row holds wide (CJK) characters."""

import unicodedata

import pytest
from rich.console import Console

from attnlab.demo.dates import Snapshot, example_pairs, translations_table, verdict
from attnlab.generation.translation import Translation


def cells(text: str) -> int:
    """Terminal columns, from the Unicode database (wide and full-width characters take two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


@pytest.mark.parametrize("width", [80, 180])  # at 80 columns each verdict under its translation, never wrapped
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_row_puts_each_checkpoints_translation_in_the_same_column(lang, width):
    from attnlab.i18n import set_language

    set_language(lang)
    pairs = example_pairs()
    assert any(cells(p.source) > len(p.source) for p in pairs)  # the sources include wide characters
    early = Snapshot(100, [Translation(p.source, "1999-12-31", []) for p in pairs], 0.0)
    last = Snapshot(600, [Translation(p.source, p.target if k % 2 else "2050-011-1", []) for k, p in enumerate(pairs)],
                    0.5)
    console = Console(width=width, record=True, color_system=None)
    console.print(translations_table(pairs, [early, last], width))
    text = console.export_text()
    rows = [line for line in text.splitlines() if "1999-12-31" in line]
    assert len(rows) == len(pairs)
    firsts = [row.index("1999-12-31") for row in rows]
    seconds = [row.index("20", first + len("1999-12-31")) for row, first in zip(rows, firsts, strict=True)]
    assert len({cells(row[:i]) for row, i in zip(rows, firsts, strict=True)}) == 1, rows  # the first checkpoint's
    assert len({cells(row[:i]) for row, i in zip(rows, seconds, strict=True)}) == 1, rows  # and the last one's
    assert text.count("✓") == 3 and text.count("✗") == 7 + 4
    assert all(verdict("1999-12-31", p.target) in text for p in pairs)  # each whole, on one line
    assert [row[:first].strip() for row, first in zip(rows, firsts, strict=True)] == [p.source for p in pairs]
