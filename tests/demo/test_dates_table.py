"""The demo's table of translations stays in columns when a row holds wide (CJK) characters."""

import unicodedata

import pytest
from rich.console import Console

from attnlab.demo.dates import example_pairs, translations_table
from attnlab.generation.translation import Translation


def cells(text: str) -> int:
    """Terminal columns, from the Unicode database (wide and full-width characters take two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_row_puts_its_arrow_and_translation_in_the_same_column(lang):
    from attnlab.i18n import set_language

    set_language(lang)
    pairs = example_pairs()
    assert any(cells(p.source) > len(p.source) for p in pairs)  # the sources include wide characters
    results = [Translation(p.source, p.target if k % 2 else "2050-011-1", []) for k, p in enumerate(pairs)]
    console = Console(width=120, record=True, color_system=None)
    console.print(translations_table(pairs, results))
    rows = [line for line in console.export_text().splitlines() if " -> " in line]
    assert len(rows) == len(pairs)
    for column in (" -> ", "20"):  # the arrow, and the translation after it
        assert len({cells(row[: row.index(column, row.index(" -> "))]) for row in rows}) == 1, rows
    assert sum("✓" in row for row in rows) == 3 and sum("✗" in row for row in rows) == 4
    assert [row.split(" -> ")[0].strip() for row in rows] == [p.source for p in pairs]
