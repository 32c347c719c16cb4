import pytest
import torch

from attnlab.generation.translation import translate
from attnlab.inspect.encoder_decoder import capture_translation
from attnlab.viz.alignment import alignment_figure, alignment_weights


@pytest.fixture(scope="module")
def cap(dates_run):
    _, model, vocab = dates_run
    out = translate(model, vocab, ["2021年3月5日"])[0]
    return capture_translation(model, vocab, "2021年3月5日", out.ids)


def test_target_rows_source_columns_cjk_labels(cap):
    fig = alignment_figure(cap)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == list("2021年3月5日")
    assert [t.get_text() for t in ax.get_yticklabels()] == cap.target_tokens
    image = ax.get_images()[0].get_array()
    torch.testing.assert_close(torch.as_tensor(image.data), cap.cross[-1].mean(0), atol=0, rtol=0)
    fig.savefig(__import__("io").BytesIO(), format="png")  # every glyph drawable


def test_one_head_or_the_mean(cap):
    w, layer = alignment_weights(cap, 0, 1)
    assert layer == 0 and torch.equal(w, cap.cross[0][1])
    mean, last = alignment_weights(cap)
    assert last == len(cap.cross) - 1 and torch.allclose(mean.sum(-1), torch.ones(mean.shape[0]), atol=1e-5)
    with pytest.raises(ValueError, match=r"head must be in 0..1 \(2 heads\), got 5"):
        alignment_weights(cap, 0, 5)
