"""capture and explain on the kinds of attention that are not one softmax per head: differential attention (two
maps per pair of heads, subtracted) and linear attention (the gated delta rule). capture records the weights the
model returns (what `attnlab view` draws); explain, which works through one head's softmax, says why it cannot."""

import pytest
import torch

from attnlab.inspect import capture, explain
from attnlab.models.registry import build_model
from attnlab.viz.viewer import write_html

TINY = dict(vocab_size=97, context_length=48, d_model=32, num_layers=4, num_heads=4, num_kv_heads=2, d_ff=72)
KINDS = {
    "diffllama": (TINY, "differential attention"),
    "qwen3_next": (dict(TINY, head_dim=8, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                        linear_value_head_dim=8, chunk_size=4), "linear attention"),
}


@pytest.mark.parametrize("arch", sorted(KINDS))
def test_capture_keeps_the_models_own_weights_and_explain_says_why_not(arch, tmp_path):
    fields, kind = KINDS[arch]
    torch.manual_seed(0)
    model = build_model(arch, fields).eval()
    ids = torch.randint(0, 97, (7,))
    cap = capture(model, ids.tolist())
    with torch.no_grad():
        own = model(ids[None], return_weights=True).attentions
    assert len(cap.attentions) == len(own) == 4
    for layer, weights in enumerate(own):
        assert torch.equal(cap.attentions[layer], weights[0].float())
    assert cap.queries is None and cap.not_one_softmax is not None and kind in cap.not_one_softmax
    with pytest.raises(ValueError, match=f"layer 0 is {kind}.*`attnlab view` shows these weights"):
        explain(cap, 3)
    page = write_html(cap, tmp_path / "v.html")
    assert page.stat().st_size > 1000


def test_a_model_of_softmax_layers_only_is_still_explained():
    torch.manual_seed(0)
    model = build_model("smollm3", TINY).eval()  # a NoPE layer among RoPE ones: each one softmax per head
    cap = capture(model, torch.randint(0, 97, (7,)).tolist())
    assert cap.not_one_softmax is None
    for layer in range(4):
        assert explain(cap, 3, layer=layer).max_abs_diff_weights < 1e-6
