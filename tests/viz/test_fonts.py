"""CJK tokens render as glyphs: the packaged font is registered and has every character."""

from __future__ import annotations

import io
import warnings

import pytest
from matplotlib.figure import Figure

from attnlab.viz.fonts import FAMILIES, fonts_for, missing_glyphs, setup_fonts

CJK = "我爱学习AI 寫代碼的中年人 こんにちは 한국어"


def test_setup_registers_the_packaged_font():
    families = setup_fonts()
    assert families == FAMILIES
    names = [f.family_name for f in fonts_for(families)]
    assert names[0] == "DejaVu Sans" and "Noto Sans CJK SC" in names


def test_every_cjk_glyph_is_covered_and_dejavu_alone_is_not():
    assert missing_glyphs(CJK) == set()
    # the control: without the fallback, these characters have no glyph (the test can fail)
    assert {"我", "こ", "한"} <= missing_glyphs(CJK, ["DejaVu Sans"])


def _render(families):
    fig = Figure()
    fig.add_subplot().set_title(CJK, fontfamily=families)
    fig.savefig(io.BytesIO(), format="png")  # Agg lays out every glyph


def test_no_glyph_missing_warning_with_the_fallback_list():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _render(setup_fonts())
    with pytest.warns(UserWarning, match="missing from font"):
        _render(["DejaVu Sans"])
