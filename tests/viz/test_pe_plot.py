"""The positional-encoding plot draws the paper's formula."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlab.viz.pe_plot import pe_figure


def test_heatmap_is_the_formula_and_curves_are_columns():
    fig = pe_figure(context_length=50, d_model=16, dims=[0, 3])
    heat, curves = fig.axes[0], fig.axes[1]
    pe = heat.images[0].get_array()
    pos = 7  # dims 6 and 7 are sin and cos of pos / 10000^(2·3/16)
    assert pe[pos, 7] == pytest.approx(math.cos(pos / 10000 ** (6 / 16)), abs=1e-6)
    assert pe[pos, 6] == pytest.approx(math.sin(pos / 10000 ** (6 / 16)), abs=1e-6)
    assert heat.images[0].get_cmap().name == "RdBu_r" and heat.images[0].get_clim() == (-1, 1)
    lines = curves.get_lines()
    assert len(lines) == 2
    np.testing.assert_allclose(lines[1].get_ydata(), pe[:, 3])


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"dims must be in 0\.\.15, got \[16\]"):
        pe_figure(10, 16, [16])
    with pytest.raises(ValueError, match="d_model must be even"):
        pe_figure(10, 15)
