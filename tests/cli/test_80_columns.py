"""Terminal output that fits 80 columns (a pipe, a small window) without breaking a phrase: a table is never
narrower than its title, the dates table leaves out checkpoints rather than wrap a verdict, bench's table leaves out
columns of numbers rather than run past the edge."""

from __future__ import annotations

import unicodedata

import pytest
from click.testing import CliRunner
from rich.console import Console
from rich.table import Table

from attnlab.cli import main
from attnlab.terminal import titled_table


def cells(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def _printed(table) -> list[str]:
    console = Console(width=80, record=True, color_system=None)
    console.print(table)
    return console.export_text().splitlines()


def test_a_narrow_table_keeps_its_title_on_one_line():
    title = "Context vectors Z = weights · V"
    for make in (titled_table, lambda t: Table(title=t)):
        table = make(title)
        table.add_column("")
        table.add_column("d0")
        table.add_row("Your", "0.2996")
        lines = _printed(table)
        assert (title in lines[0]) is (make is titled_table), lines  # plain rich wraps it to the table's width


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_demos_tables_fit_80_columns_and_keep_their_titles_whole(lang):
    from pathlib import Path

    import torch

    from attnlab.demo.context import Demo
    from attnlab.demo.mechanisms import mechanisms_step
    from attnlab.i18n import set_language, tr

    set_language(lang)
    console = Console(width=80, record=True, color_system=None)
    with torch.no_grad():
        mechanisms_step(Demo(console, 123, Path("unused")))
    lines = console.export_text().splitlines()
    assert max(cells(line) for line in lines) <= 80
    for title in (tr("Context vectors Z = weights · X"), tr("Context vectors Z = weights · V"),
                  tr("Inputs X (one 3-d embedding per token)"), tr("Context vectors (eval: no dropout)")):
        assert any(title in line for line in lines), title


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_dates_table_leaves_out_checkpoints_rather_than_wrap_a_verdict(lang):
    from attnlab.demo.dates import Snapshot, example_pairs, translations_table, verdict
    from attnlab.generation.translation import Translation
    from attnlab.i18n import set_language, tr

    set_language(lang)
    pairs = example_pairs()
    shots = [Snapshot(step, [Translation(p.source, wrong, []) for p in pairs], 0.0)
             for step, wrong in ((50, "2031-07-16"), (150, "2030-06-15"), (300, "2031-12-01"), (450, "1999-07-15"))]
    lines = _printed(translations_table(pairs, shots, 80))
    rows = [line for line in lines if any(p.source in line for p in pairs)]
    assert max(cells(line) for line in lines) <= 80
    # one line a source, nothing wrapped onto another: the title, the header, the rows, the caption
    assert len(rows) == len(pairs) and len([line for line in lines if line.strip()]) == len(pairs) + 3, lines
    for row, pair in zip(rows, pairs, strict=True):
        assert verdict("2031-07-16", pair.target) in row and verdict("1999-07-15", pair.target) in row
    assert tr("after {step} steps", step=450) in lines[1] and tr("after {step} steps", step=50) in lines[1]
    assert tr("after {step} steps", step=150) not in lines[1]
    assert tr("({n} earlier checkpoint(s) left out, to fit the terminal)", n=2) in lines[-1]
    wide = Console(width=200, record=True, color_system=None)
    wide.print(translations_table(pairs, shots, 200))
    assert tr("after {step} steps", step=150) in wide.export_text()  # room for all: none left out


def test_bench_fits_80_columns(tmp_path):
    result = CliRunner(env={"COLUMNS": "80"}).invoke(main, ["bench", "--quick", "--seq-lens", "16,9999999",
                                                            "--d-model", "32", "--heads", "2", "--no-texts-shape",
                                                            "--backends", "math,numpy-math"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(cells(line) for line in lines) <= 80, result.stdout
    assert "Left out to fit the terminal: spread ms" in " ".join(result.stdout.split())
    assert sum("1×9999999" in line for line in lines) == 4  # every case has its row
