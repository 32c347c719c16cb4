"""capture: one forward pass, recorded; its numbers are the model's own."""

from __future__ import annotations

import pytest
import torch

from attnlab.attention import CausalAttention, SelfAttentionV1, SimpleSelfAttention
from attnlab.inspect import RandomModel, RandomModelConfig, capture, explain
from attnlab.models import GPT, GPTConfig


def _softmax_of_scores(cap, layer):
    s = cap.scores(layer) * cap.scale
    if cap.is_causal:
        t = cap.seq_len
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1)


def test_toy_capture_shapes_and_consistency():
    cap = capture(RandomModel(RandomModelConfig("multihead", d_model=8, d_k=4, num_heads=2)), "我 爱 学习 AI")
    assert cap.tokens == ["我", "爱", "学习", "AI"]
    assert cap.num_layers == 1 and cap.num_heads == 2 and cap.is_causal
    assert cap.queries[0].shape == (2, 4, 4) and cap.contexts[0].shape == (2, 4, 4)
    assert torch.allclose(_softmax_of_scores(cap, 0), cap.attentions[0], atol=1e-6)
    assert torch.allclose(cap.attentions[0] @ cap.values[0], cap.contexts[0], atol=1e-6)


def test_weights_only_capture_of_multihead_attention():
    """qkv=False (what heatmap and view ask for): the weights, and no q/k/v computed behind the module's back."""
    model = RandomModel(RandomModelConfig("multihead", d_model=8, d_k=4, num_heads=2))
    cap, full = capture(model, "我 爱 学习 AI", qkv=False), capture(model, "我 爱 学习 AI")
    assert cap.queries is None
    # the weights-only capture runs the module as it is (one fused q/k/v product at inference), the full one each
    # map: the same weights up to float32 rounding
    torch.testing.assert_close(cap.attentions[0], full.attentions[0], rtol=0, atol=1e-6)


def test_gpt_capture_every_layer_matches_its_weights():
    torch.manual_seed(0)
    model = GPT(GPTConfig.from_preset("tiny"))
    ids = torch.randint(0, 256, (10,))
    ref = model(ids[None], return_weights=True).attentions        # the model's own, no hooks
    cap = capture(model, ids, tokens=[str(i) for i in ids.tolist()])
    assert cap.num_layers == len(ref) == 2 and cap.is_causal
    for layer in range(cap.num_layers):
        assert torch.equal(cap.attentions[layer], ref[layer][0])
        assert torch.allclose(_softmax_of_scores(cap, layer), cap.attentions[layer], atol=1e-6)
        e = explain(cap, 9, layer=layer, head=1)
        assert e.max_abs_diff_weights < 1e-6 and e.max_abs_diff_context < 1e-6


def test_bare_modules_on_embeddings():
    x = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64]])
    words = ["Your", "journey", "starts"]
    simple = capture(SimpleSelfAttention(), x, tokens=words)
    assert torch.allclose(simple.attentions[0][0], torch.softmax(x @ x.T, -1), atol=1e-6)
    torch.manual_seed(123)
    v1 = SelfAttentionV1(3, 2)   # raw parameters: q/k/v come from its own project()
    cap = capture(v1, x, tokens=words)
    assert torch.allclose(cap.queries[0][0], x @ v1.W_query, atol=1e-6)
    ca = CausalAttention(3, 2, context_length=3, dropout=0.0)
    assert torch.equal(capture(ca, x, tokens=words).attentions[0][0].triu(1), torch.zeros(3, 3))


def test_capture_leaves_no_hooks_and_keeps_mode():
    model = RandomModel(RandomModelConfig("multihead")).train()
    capture(model, "a b")
    assert model.training
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_bad_inputs():
    toy = RandomModel()
    with pytest.raises(ValueError, match="empty text"):
        capture(toy, "   ")
    with pytest.raises(ValueError, match="65 words; this model accepts at most context_length=64"):
        capture(toy, " ".join(["x"] * 65))
    gpt = GPT(GPTConfig.from_preset("tiny"))
    with pytest.raises(ValueError, match="33 tokens; GPT accepts at most 32"):
        capture(gpt, list(range(33)))
    with pytest.raises(TypeError, match="a tokenizer is needed"):
        capture(gpt, "hello")
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module"):
        capture("not a model", "a")
    with pytest.raises(ValueError, match="tokens must name each of the 2 embeddings"):
        capture(SimpleSelfAttention(), torch.zeros(2, 3), tokens=["a"])


def test_toy_config_validation():
    with pytest.raises(ValueError, match="mechanism must be one of simple, scaled, causal, multihead, got 'x'"):
        RandomModelConfig("x")
    with pytest.raises(ValueError, match="d_model must be even"):
        RandomModelConfig(d_model=7)
    with pytest.raises(ValueError, match="context_length must be a positive integer, got 0"):
        RandomModelConfig(context_length=0)


def test_same_word_same_embedding_anywhere():
    toy = RandomModel()
    a, b = toy.token_embeddings(["爱", "x", "爱"]), RandomModel().token_embeddings(["爱"])
    assert torch.equal(a[0], a[2]) and torch.equal(a[0], b[0]) and not torch.equal(a[0], a[1])
