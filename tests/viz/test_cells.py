"""Heatmap text sized to the tokens: measured on the drawn figure (matplotlib's renderer), not taken on trust."""

import itertools

import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg

from attnlab.inspect import Capture, RandomModel, RandomModelConfig, capture
from attnlab.viz.cells import LABEL_PT, SMALLEST_LABEL_PT, VALUE_PT, cell_layout, text_width
from attnlab.viz.fonts import setup_fonts
from attnlab.viz.heatmap import head_figure, heads_figure


def synthetic(tokens: list[str], heads: int = 1) -> Capture:
    g = torch.Generator().manual_seed(0)
    t = len(tokens)
    return Capture(tokens=tokens, attentions=[torch.softmax(torch.randn(heads, t, t, generator=g), -1)],
                   model_name="synthetic")


def drawn(fig):
    FigureCanvasAgg(fig).draw()
    return fig.canvas.get_renderer()


def cell_box(ax, i: int, j: int):
    """The pixel box of cell (row i, column j): x0, x1, y0, y1."""
    (x0, y0), (x1, y1) = ax.transData.transform([(j - 0.5, i + 0.5), (j + 0.5, i - 0.5)])
    return min(x0, x1), max(x0, x1), min(y0, y1), max(y0, y1)


def overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_a_short_chinese_sentence_has_large_upright_labels_and_its_weights_written():
    cap = capture(RandomModel(RandomModelConfig("multihead")), "我爱学习AI", qkv=False)
    fig = head_figure(cap)
    renderer, ax = drawn(fig), fig.axes[0]
    labels = ax.get_xticklabels()
    assert [t.get_text() for t in labels] == ["我", "爱", "学", "习", "AI"]
    for j, label in enumerate(labels):
        assert label.get_rotation() == 0 and label.get_fontsize() == LABEL_PT
        box, (x0, x1, _, _) = label.get_window_extent(renderer), cell_box(ax, 0, j)
        assert x0 <= box.x0 and box.x1 <= x1, (label.get_text(), box, x0, x1)  # within its own column
    for i, label in enumerate(ax.get_yticklabels()):
        box, (_, _, y0, y1) = label.get_window_extent(renderer), cell_box(ax, i, 0)
        assert y0 <= box.y0 and box.y1 <= y1
    values = ax.texts
    assert len(values) == cap.seq_len ** 2 and min(v.get_fontsize() for v in values) >= VALUE_PT[0]
    for k, value in enumerate(values):
        x0, x1, y0, y1 = cell_box(ax, *divmod(k, cap.seq_len))
        box = value.get_window_extent(renderer)
        assert x0 <= box.x0 and box.x1 <= x1 and y0 <= box.y0 and box.y1 <= y1
        assert value.get_text() == f"{cap.attentions[0][0].flatten()[k]:.2f}"


def test_labels_too_wide_for_their_columns_stand_at_90_degrees_without_touching():
    cap = synthetic([f"token_{k}" for k in range(40)])
    fig = head_figure(cap)
    renderer, ax = drawn(fig), fig.axes[0]
    labels = ax.get_xticklabels()
    assert len(labels) == 40 and all(t.get_rotation() == 90 for t in labels)
    boxes = [t.get_window_extent(renderer) for t in labels]
    assert not any(overlap(a, b) for a, b in itertools.pairwise(boxes))
    assert all(t.get_fontsize() >= 8 for t in labels)


def test_hundreds_of_tokens_label_every_kth_at_a_readable_size():
    cap = synthetic([f"t{k}" for k in range(300)])
    fig = head_figure(cap)
    renderer, ax = drawn(fig), fig.axes[0]
    labels = ax.get_xticklabels()
    step = ax.get_xticks()[1] - ax.get_xticks()[0]
    assert step > 1 and len(labels) == len(range(0, 300, int(step))) and not ax.texts  # no weights: they cannot fit
    assert all(t.get_fontsize() >= SMALLEST_LABEL_PT for t in labels + ax.get_yticklabels())
    for ticks in (labels, ax.get_yticklabels()):
        boxes = [t.get_window_extent(renderer) for t in ticks]
        assert not any(overlap(a, b) for a, b in itertools.pairwise(boxes))


def test_a_grid_of_heads_keeps_its_panels_and_colour_bar_apart():
    cap = capture(RandomModel(RandomModelConfig("multihead", num_heads=4)), "我爱学习人工智能", qkv=False)
    fig = heads_figure(cap)
    renderer = drawn(fig)
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 4 and all(len(ax.texts) == cap.seq_len ** 2 for ax in panels)  # weights written
    assert all(t.get_rotation() == 0 for ax in panels for t in ax.get_xticklabels())
    boxes = [ax.get_tightbbox(renderer) for ax in fig.axes]  # the panels with their labels, and the colour bar
    assert not any(overlap(a, b) for a, b in itertools.combinations(boxes, 2))


@pytest.mark.parametrize(("annotate", "written"), [(None, False), (True, True), (False, False)])
def test_annotate_forces_or_forbids_the_weights(annotate, written):
    families = setup_fonts()
    layout = cell_layout(12.0, ["a", "b"], families, annotate)  # too small a cell to write 0.00 legibly
    assert (layout.value_size is not None) == written
    assert cell_layout(40.0, ["a", "b"], families, False).value_size is None


def test_the_layout_rules():
    families = setup_fonts()
    big = cell_layout(60.0, ["我", "AI"], families)
    assert (big.fontsize, big.rotation, big.step) == (LABEL_PT, 0, 1) and big.value_size == VALUE_PT[1]
    shrunk = cell_layout(36.0, ["journey"], families)  # shrinks a little to stay upright
    assert shrunk.rotation == 0 and 8 <= shrunk.fontsize < LABEL_PT
    assert text_width("journey", families, shrunk.fontsize) <= 0.85 * 36.0 + 1e-9
    turned = cell_layout(20.0, ["a rather long label"], families)
    assert turned.rotation == 90 and turned.fontsize == min(LABEL_PT, 0.8 * 20.0)
    thin = cell_layout(2.0, ["x"], families)
    assert thin.step == 4 and thin.fontsize == SMALLEST_LABEL_PT and thin.value_size is None  # 5 / (0.8 * 2) → 4
    # a CJK character is measured as drawn: twice as wide as a Latin letter, as wide as two
    assert text_width("学习", families, 10) == pytest.approx(2 * text_width("学", families, 10))
    assert text_width("学", families, 10) > 1.5 * text_width("a", families, 10)
