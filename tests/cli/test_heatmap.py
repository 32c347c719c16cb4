"""``attnlab heatmap``, ``attnlab pe-plot`` and ``attnlab view`` write their files; bad input is a usage error."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from matplotlib.image import imread

from attnlab.cli import main


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_heatmap_png_and_svg(tmp_path):
    png, svg = tmp_path / "one.png", tmp_path / "all.svg"
    assert run("heatmap", "我 爱 学习 AI", "-o", str(png), "--head", "1").exit_code == 0
    assert imread(png).shape[0] > 100
    assert run("heatmap", "我 爱 学习 AI", "-o", str(svg), "--all-heads").exit_code == 0
    assert "<svg" in svg.read_text(encoding="utf-8")


def test_pe_plot(tmp_path):
    out = tmp_path / "pe.png"
    result = run("pe-plot", "-o", str(out), "--context-length", "20", "--d-model", "8", "--dims", "0,1")
    assert result.exit_code == 0 and out.exists()
    bad = run("pe-plot", "-o", str(out), "--d-model", "8", "--dims", "9")
    assert bad.exit_code == 2 and "dims must be in 0..7, got [9]" in bad.output


def test_view_writes_one_html_file(tmp_path):
    out = tmp_path / "attention.html"
    result = run("view", "我 爱 学习 AI", "-o", str(out))
    assert result.exit_code == 0 and out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert list(tmp_path.iterdir()) == [out]


@pytest.mark.parametrize(("args", "message"), [
    (["heatmap", "", "-o", "x.png"], "empty text"),
    (["heatmap", "a b", "-o", "x.jpg"], "must end in .png or .svg"),
    (["heatmap", "a b", "--layer", "2", "-o", "x.png"], "layer must be in 0..0 (1 layers), got 2"),
    (["heatmap", "a b", "--head", "-1", "-o", "x.png"], "head must be in 0..1 (2 heads), got -1"),
    (["view", "   ", "-o", "x.html"], "empty text"),
    (["view", "a", "-o", "x.png"], "output file must end in .html"),
    (["view", " ".join(["w"] * 65), "-o", "x.html"], "at most context_length=64"),
])
def test_bad_input(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run(*args)
    assert result.exit_code == 2 and message in result.output
    assert list(tmp_path.iterdir()) == []
