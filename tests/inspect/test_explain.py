"""explain: the step-by-step arithmetic equals hand-worked numbers and the model's own forward pass."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab.inspect import MECHANISMS, Capture, RandomModel, RandomModelConfig, capture, explain
from attnlab.inspect.explain import find_query

SENTENCE = "我 爱 学习 AI"


def test_hand_worked_two_tokens():
    # Q = [[1,0],[0,1]], K = [[1,0],[0.5,0.5]], V = [[2,0],[1,1]], d_k = 2, query 0:
    # q·k = [1, 0.5]; ÷√2 = [0.70711, 0.35355]; softmax: a_0 = 1/(1+e^(-0.35355)) = 0.587483, a_1 = 0.412517
    # z = 0.587483·[2,0] + 0.412517·[1,1] = [1.587483, 0.412517]
    q = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    k = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]])
    v = torch.tensor([[[2.0, 0.0], [1.0, 1.0]]])
    w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(2), -1)
    cap = Capture(tokens=["a", "b"], attentions=[w], inputs=[torch.zeros(2, 2)], queries=[q], keys=[k],
                  values=[v], contexts=[w @ v], scale=2**-0.5)
    e = explain(cap, "a")
    assert e.raw_scores.tolist() == [1.0, 0.5]
    assert torch.allclose(e.scaled_scores, torch.tensor([0.70710678, 0.35355339], dtype=torch.float64), atol=1e-7)
    assert torch.allclose(e.weights, torch.tensor([0.587483, 0.412517], dtype=torch.float64), atol=1e-6)
    assert torch.allclose(e.context, torch.tensor([1.587483, 0.412517], dtype=torch.float64), atol=1e-6)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_explain_equals_the_models_forward_pass(mechanism):
    model = RandomModel(RandomModelConfig(mechanism))
    tokens = SENTENCE.split()
    out, w = model(model.embed(tokens).unsqueeze(0), return_weights=True)  # the model's own forward, no hooks
    w = w[0] if w.dim() == 4 else w                                       # (H, T, T)
    cap = capture(model, SENTENCE)
    explained = [explain(cap, "爱", head=h) for h in range(cap.num_heads)]
    for h, e in enumerate(explained):
        assert e.query_index == 1 and e.query_token == "爱"
        assert abs(float(e.weights.sum()) - 1.0) < 1e-12
        assert torch.allclose(e.weights.float(), w[h, 1], atol=1e-6, rtol=0)
    contexts = torch.cat([e.context for e in explained]).float()
    if mechanism == "multihead":  # the heads' contexts, concatenated and mixed by out_proj, are the output
        contexts = model.attn.out_proj(contexts)
    assert torch.allclose(contexts, out[0, 1], atol=1e-6, rtol=0)


def test_explain_steps_match_independent_projection():
    model = RandomModel(RandomModelConfig("scaled", seed=7))
    e = explain(capture(model, SENTENCE), "学习")
    x = model.embed(SENTENCE.split()).double()
    wq, wk = model.attn.W_query.weight.double(), model.attn.W_key.weight.double()
    q, k = x[2] @ wq.T, x @ wk.T
    assert torch.allclose(e.query, q, atol=1e-6)
    assert torch.allclose(e.raw_scores, k @ q, atol=1e-5)
    assert e.scale == pytest.approx(1 / math.sqrt(model.config.d_k))
    assert torch.allclose(e.inputs, x, atol=1e-6)
    assert torch.allclose(e.token_embeddings + e.positions, x, atol=1e-6)


def test_causal_masks_later_keys():
    e = explain(capture(RandomModel(RandomModelConfig("causal")), SENTENCE), "爱")
    assert e.allowed == [True, True, False, False]
    assert e.weights[2:].abs().max() == 0
    assert e.to_dict()["scaled_scores"][2:] == [None, None]


def test_simple_has_no_scaling_and_q_equals_x():
    e = explain(capture(RandomModel(RandomModelConfig("simple")), SENTENCE), 0)
    assert e.scale == 1.0
    assert torch.equal(e.query, e.inputs[0])


@given(words=st.lists(st.sampled_from(["我", "爱", "学习", "AI", "cat", "한국어", "の", "<b>"]), min_size=1,
                      max_size=12), mechanism=st.sampled_from(MECHANISMS), data=st.data())
def test_property_weights_sum_to_one_and_match_model(words, mechanism, data):
    cap = capture(RandomModel(RandomModelConfig(mechanism)), " ".join(words))
    i = data.draw(st.integers(0, len(words) - 1))
    h = data.draw(st.integers(0, cap.num_heads - 1))
    e = explain(cap, i, head=h)
    assert abs(float(e.weights.sum()) - 1.0) < 1e-9
    assert e.max_abs_diff_weights <= 1e-6 and e.max_abs_diff_context <= 1e-6


def test_bad_query_names_the_tokens():
    cap = capture(RandomModel(), SENTENCE)
    with pytest.raises(ValueError, match=r"'你' is not a token of the sentence; the tokens are: 我, 爱, 学习, AI"):
        explain(cap, "你")
    with pytest.raises(ValueError, match=r"query index must be in 0\.\.3, got 9"):
        explain(cap, 9)
    with pytest.raises(TypeError, match="query must be a token"):
        find_query(cap.tokens, 1.5)


def test_layer_and_head_out_of_range_say_the_range():
    cap = capture(RandomModel(RandomModelConfig("multihead")), SENTENCE)
    with pytest.raises(ValueError, match=r"head must be in 0\.\.1 \(2 heads\), got 2"):
        explain(cap, "爱", head=2)
    with pytest.raises(ValueError, match=r"layer must be in 0\.\.0 \(1 layers\), got 1"):
        explain(cap, "爱", layer=1)


def test_json_dict_is_complete():
    d = explain(capture(RandomModel(), SENTENCE), "爱").to_dict()
    assert d["query"] == {"index": 1, "token": "爱"}
    assert len(d["raw_scores"]) == len(d["weights"]) == len(d["contributions"]) == 4
    assert d["weights_sum"] == pytest.approx(1.0, abs=1e-12)
    assert d["d_k"] == 4


def test_explain_follows_each_layers_scale_window_softcap_and_sinks():
    """A decoder with the newest options everywhere: the arithmetic explain writes out is the model's, layer by layer
    (a local and a global layer, Gemma's scale, a soft-cap, gpt-oss's sinks), and the CLI prints it."""
    import io

    from rich.console import Console

    from attnlab.cli.explain import render
    from attnlab.models import ModernDecoder, ModernDecoderConfig

    torch.manual_seed(0)
    config = ModernDecoderConfig.from_preset("tiny", sliding_window=3, layer_types=["sliding_attention",
                                             "full_attention"], query_pre_attn_scalar=4, attn_softcap=1.5,
                                             sinks=True, qk_norm="head")
    model = ModernDecoder(config).eval()
    with torch.no_grad():
        for p in model.parameters():  # order-one weights and sinks: the cap bends, the sinks take weight
            p.copy_(torch.randn_like(p) if p.dim() > 1 else 1 + 0.3 * torch.randn_like(p))
    cap = capture(model, list(range(1, 9)))
    assert [f["window"] for f in cap.layer_facts] == [3, None] and cap.layer_facts[0]["scale"] == 0.5
    for layer in range(2):
        for head in range(4):
            e = explain(cap, 7, layer=layer, head=head)
            assert e.max_abs_diff_weights < 1e-5 and e.max_abs_diff_context < 1e-5, (layer, head)
            assert e.softcap == 1.5 and e.sink == cap.layer_facts[layer]["sinks"][head]
            assert float(e.weights.sum()) < 1 - 1e-4 and sum(e.allowed) == (3 if layer == 0 else 8)
    out = io.StringIO()
    render(Console(file=out, width=200), explain(cap, 7, layer=0, head=1))
    assert "× 0.5000, 1.5·tanh(s/1.5)" in out.getvalue() and "sink logit" in out.getvalue()
