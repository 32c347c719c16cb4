"""Heatmaps read the capture, label both axes with tokens, and draw Chinese as glyphs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from matplotlib.image import imread

from attnlab.inspect import RandomModel, RandomModelConfig, capture
from attnlab.viz.figures import save_figure
from attnlab.viz.fonts import fonts_for
from attnlab.viz.heatmap import head_figure, heads_figure

SENTENCE = "我 爱 学习 AI こんにちは 한국어"


@pytest.fixture(scope="module")
def cap():
    return capture(RandomModel(RandomModelConfig("multihead")), SENTENCE, qkv=False)


def test_chinese_tick_labels_have_every_glyph_and_png_is_written(cap, tmp_path):
    fig = head_figure(cap, 0, 1)
    ax = fig.axes[0]
    out = tmp_path / "heat.png"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a "Glyph … missing from font" warning fails the test
        save_figure(fig, out)
    labels = ax.get_xticklabels() + ax.get_yticklabels()
    assert [t.get_text() for t in ax.get_yticklabels()] == cap.tokens
    for label in labels:
        charmaps = [f.get_charmap() for f in fonts_for(label.get_fontfamily())]
        missing = [c for c in label.get_text() if not any(ord(c) in cm for cm in charmaps)]
        assert missing == [], f"{label.get_text()!r}: no glyph for {missing} in {label.get_fontfamily()}"
    image = imread(out)
    assert image.shape[0] > 200 and image.shape[1] > 200 and np.ptp(image) > 0


def test_heatmap_shows_the_captured_weights(cap):
    fig = head_figure(cap, 0, 1)
    ax = fig.axes[0]
    np.testing.assert_array_equal(ax.images[0].get_array(), cap.attentions[0][1].numpy())
    assert ax.get_ylabel().startswith("query") and ax.get_xlabel().startswith("key")
    assert len(fig.axes) == 2  # the heatmap and its colour bar
    assert len(ax.texts) == cap.seq_len ** 2  # values written in the cells


def test_all_heads_grid_and_svg(cap, tmp_path):
    fig = heads_figure(cap, 0)
    images = [ax.images[0].get_array() for ax in fig.axes if ax.images]
    assert len(images) == cap.num_heads
    for h, im in enumerate(images):
        np.testing.assert_array_equal(im, cap.attentions[0][h].numpy())
    out = save_figure(fig, tmp_path / "grid.svg")
    assert out.read_text(encoding="utf-8").lstrip().startswith("<?xml")


def test_bad_arguments(cap, tmp_path):
    with pytest.raises(ValueError, match=r"head must be in 0\.\.1 \(2 heads\), got 3"):
        head_figure(cap, 0, 3)
    with pytest.raises(ValueError, match=r"layer must be in 0\.\.0"):
        heads_figure(cap, 2)
    with pytest.raises(ValueError, match=r"must end in \.png or \.svg, got '.*x\.jpg'"):
        save_figure(head_figure(cap), tmp_path / "x.jpg")
    assert list(tmp_path.iterdir()) == []
