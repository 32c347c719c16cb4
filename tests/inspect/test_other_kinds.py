"""capture and explain on the kinds of attention that are not one softmax per head: differential attention (two
maps per pair of heads, subtracted) and linear attention (the gated delta rule). capture records the weights the
model returns (what `attnlab view` draws); explain, which works through one head's softmax, says why it cannot."""

import pytest
import torch

from attnlab.inspect import capture, explain
from attnlab.models.registry import build_model
from attnlab.viz.viewer import write_html

TINY = dict(vocab_size=97, context_length=48, d_model=32, num_layers=4, num_heads=4, num_kv_heads=2, d_ff=72)
MLA = dict(TINY, num_kv_heads=None, kv_lora_rank=16, q_lora_rank=24, qk_nope_head_dim=8, qk_rope_head_dim=8,
           v_head_dim=8, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1,
           scoring_func="sigmoid", topk_method="noaux_tc", n_group=4, topk_group=2, norm_topk_prob=True,
           first_k_dense_replace=1)
KINDS = {
    "diffllama": (TINY, "differential attention"),
    "deepseek": (dict(MLA, index_topk=3), "DeepSeek sparse attention"),
    "qwen3_next": (dict(TINY, head_dim=8, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                        linear_value_head_dim=8, chunk_size=4, num_experts=4, num_experts_per_tok=2,
                        moe_intermediate_size=16, shared_expert_intermediate_size=16), "linear attention"),
    # KDA, KDA, KDA and an MLA layer without RoPE, as many heads each (the view draws (layers, heads, T, T))
    "kimi_linear": ({**{k: v for k, v in MLA.items() if k not in ("scoring_func", "topk_method")},
                     "linear_num_heads": 4, "linear_head_dim": 8, "chunk_size": 4,
                     "layer_types": ["linear_attention"] * 3 + ["full_attention"]}, "linear attention"),
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


def test_multi_head_latent_attention_is_explained_head_by_head():
    """MLA is one softmax per head over keys made from the latents: explain works it through, equal to the model."""
    torch.manual_seed(0)
    model = build_model("deepseek", MLA).eval()
    cap = capture(model, torch.randint(0, 97, (7,)).tolist())
    assert cap.not_one_softmax is None and cap.queries[0].shape == (4, 7, 16)  # nope 8 + rope 8, every head
    for layer in range(4):
        e = explain(cap, 5, layer=layer, head=1)
        assert e.max_abs_diff_weights < 1e-6 and e.max_abs_diff_context < 1e-6
        assert e.scale == pytest.approx(16 ** -0.5)


def test_kimi_linears_mla_layer_is_captured_as_one_softmax_per_head_without_rope():
    """Kimi Linear's layer 3 is MLA without RoPE: its captured weights are the softmax of its own scores, rows that
    sum to 1; the KDA layers' say what they are."""
    fields, _ = KINDS["kimi_linear"]
    torch.manual_seed(0)
    cap = capture(build_model("kimi_linear", fields).eval(), torch.randint(0, 97, (7,)).tolist())
    assert "Kimi delta attention" in cap.not_one_softmax
    torch.testing.assert_close(cap.attentions[3].sum(-1), torch.ones(4, 7), atol=1e-6, rtol=0)


def test_layers_of_different_head_counts_share_one_grid_and_each_keeps_its_own():
    """Qwen3-Next's DeltaNet layers have more heads (its value heads, 4 here) than its attention layers (2): the
    capture holds every layer on one grid, the attention layer's heads after its own empty; the viewer's page, the
    heatmap of all heads and the live explorer's reading take it; a head past a layer's own is refused by name."""
    import base64
    import zlib

    from attnlab.viz.heatmap import heads_figure
    from attnlab.viz.viewer import dequantise, payload

    fields = dict(KINDS["qwen3_next"][0], num_heads=2, num_kv_heads=1)
    torch.manual_seed(0)
    model = build_model("qwen3_next", fields).eval()
    ids = torch.randint(0, 97, (7,))
    cap = capture(model, ids.tolist())
    with torch.no_grad():
        own = model(ids[None], return_weights=True).attentions
    assert cap.heads_per_layer == [4, 4, 4, 2] == [a.shape[1] for a in own]
    assert [tuple(a.shape) for a in cap.attentions] == [(4, 7, 7)] * 4
    assert torch.equal(cap.attentions[3][:2], own[3][0]) and not cap.attentions[3][2:].any()
    with pytest.raises(ValueError, match=r"head must be in 0\.\.1 \(layer 3 has 2 heads\), got 2"):
        cap.weights(3, 2)
    data = payload(cap, embed_font=False)
    assert data["layer_heads"] == [4, 4, 4, 2]
    back = dequantise(zlib.decompress(base64.b64decode(data["weights"])), base64.b64decode(data["rowmax"]),
                      (4, 4, 7, 7))
    assert abs(back[3, :2] - cap.attentions[3][:2].clamp(min=0).numpy()).max() < 0.01
    assert len([a for a in heads_figure(cap, layer=3).axes if a.get_title()]) == 2   # its own two heads


def test_the_explorers_reading_puts_layers_of_different_head_counts_on_one_grid():
    from attnlab.explore.reading import _first

    maps = [torch.rand(1, 4, 5, 5), torch.rand(1, 2, 5, 5)]
    first = _first(maps)
    assert [tuple(m.shape) for m in first] == [(4, 5, 5), (4, 5, 5)]
    assert torch.equal(first[1][:2], maps[1][0]) and not first[1][2:].any()
