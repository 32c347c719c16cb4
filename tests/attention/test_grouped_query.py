"""GroupedQueryAttention against transformers' Llama attention, against multi-head attention with the key/value
heads copied per group, and against attention written out head by head with an explicit window mask."""

import doctest

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import attnlab.attention.grouped_query as gqa_module
from attnlab.attention import AttentionSpec, GroupedQueryAttention, MultiHeadAttention
from attnlab.layers import RotaryEmbedding
from attnlab.models import KVCache


def grouped(d_in, d_out, context_length=None, dropout=0.0, num_heads=1, qkv_bias=False, *, rotary=None,
            out_bias=False, **options) -> GroupedQueryAttention:
    """The module built from its spec (Llama's layout: no bias on out_proj unless asked)."""
    spec = AttentionSpec(d_in, d_out, num_heads, context_length=context_length, dropout=dropout, qkv_bias=qkv_bias,
                         out_bias=out_bias, owner="GroupedQueryAttention", **options)
    return GroupedQueryAttention(spec, rotary)


def written_out(gqa: GroupedQueryAttention, x: torch.Tensor, window: int | None, attention_mask=None):
    """softmax(q·k / √d + mask) v for each query head h over key/value head h // group, in loops: ``(B, T, d_out)``."""
    b, t, _ = x.shape
    d, hq, hkv = gqa.head_dim, gqa.num_heads, gqa.num_kv_heads
    q = gqa.W_query(x).view(b, t, hq, d)
    k, v = (m(x).view(b, t, hkv, d) for m in (gqa.W_key, gqa.W_value))
    allowed = torch.zeros(b, t, t, dtype=torch.bool)
    for i in range(t):
        for j in range(i + 1):
            allowed[:, i, j] = window is None or i - j < window
    if attention_mask is not None:
        allowed &= attention_mask.bool()[:, None, :]
    heads = []
    for h in range(hq):
        kv = h // (hq // hkv)
        scores = (q[:, :, h] @ k[:, :, kv].transpose(1, 2)) / d**0.5
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1).nan_to_num(0.0)
        heads.append(weights @ v[:, :, kv])
    return gqa.out_proj(torch.cat(heads, dim=-1))


@st.composite
def shapes(draw):
    num_kv_heads = draw(st.sampled_from([1, 2, 3]))
    num_heads = num_kv_heads * draw(st.integers(1, 3))
    return dict(num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=draw(st.sampled_from([2, 4])),
                window=draw(st.sampled_from([None, 1, 2, 3, 100])), t=draw(st.integers(1, 9)),
                padded=draw(st.booleans()), seed=draw(st.integers(0, 2**31 - 1)))


@given(shapes(), st.sampled_from(["math", "sdpa", "chunked", "auto"]))
def test_equals_attention_written_out_per_head(case, backend):
    torch.manual_seed(case["seed"])
    gqa = grouped(12, 8, None, 0.0, case["num_heads"], True, num_kv_heads=case["num_kv_heads"],
                                head_dim=case["head_dim"], sliding_window=case["window"], backend=backend).eval()
    x = torch.randn(2, case["t"], 12)
    am = None
    if case["padded"]:
        am = torch.ones(2, case["t"], dtype=torch.long)
        am[1, : case["t"] // 2] = 0  # left padding
    with torch.no_grad():
        got, want = gqa(x, attention_mask=am), written_out(gqa, x, case["window"], am)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])  # MHA, GQA, MQA
def test_equals_transformers_llama_attention(num_kv_heads):
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

    cfg = transformers.LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=num_kv_heads,
                                   max_position_embeddings=64, attention_bias=True)
    cfg._attn_implementation = "sdpa"  # with no mask, transformers' sdpa path is causal
    ref = LlamaAttention(cfg, layer_idx=0).eval()
    ours = grouped(32, 32, 64, 0.0, 4, True, num_kv_heads=num_kv_heads, out_bias=True,
                                 rotary=RotaryEmbedding(8, 64)).eval()
    with torch.no_grad():
        for mine, theirs in (("W_query", "q_proj"), ("W_key", "k_proj"), ("W_value", "v_proj"), ("out_proj", "o_proj")):
            for p in ("weight", "bias"):
                getattr(getattr(ours, mine), p).copy_(torch.randn_like(getattr(getattr(ref, theirs), p)) * 0.3)
                getattr(getattr(ref, theirs), p).copy_(getattr(getattr(ours, mine), p))
    equals_transformers_attention(ours, ref, LlamaRotaryEmbedding(cfg), 11, None)


def equals_transformers_attention(ours, ref, rotary, t, mask):
    """``ours(x)`` = transformers' attention module ``ref`` given its own RoPE's cos and sin, on x ``(2, t, 32)``."""
    x = torch.randn(2, t, 32)
    with torch.no_grad():
        cos, sin = rotary(x, torch.arange(t)[None].expand(2, -1))
        want, _ = ref(x, (cos, sin), mask)
        got = ours(x)
    assert want.std() > 0.3
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_all_heads_equal_is_multi_head_attention():
    torch.manual_seed(0)
    gqa = grouped(16, 16, None, 0.0, 4, True, num_kv_heads=4, out_bias=True).eval()
    mha = MultiHeadAttention(16, 16, None, 0.0, 4, True).eval()
    mha.load_state_dict(gqa.state_dict())
    x = torch.randn(2, 7, 16)
    with torch.no_grad():
        torch.testing.assert_close(gqa(x), mha(x), atol=1e-6, rtol=0)


@pytest.mark.parametrize("num_kv_heads", [2, 1])
def test_grouped_equals_multi_head_with_key_value_heads_copied(num_kv_heads):
    """GQA is MHA whose key/value projections repeat each key/value head for the query heads of its group."""
    torch.manual_seed(1)
    gqa = grouped(16, 16, None, 0.0, 4, True, num_kv_heads=num_kv_heads).eval()
    mha = MultiHeadAttention(16, 16, None, 0.0, 4, True, out_bias=False).eval()
    group = 4 // num_kv_heads
    with torch.no_grad():
        mha.W_query.load_state_dict(gqa.W_query.state_dict())
        mha.out_proj.load_state_dict(gqa.out_proj.state_dict())
        for name in ("W_key", "W_value"):
            mine = getattr(gqa, name)
            getattr(mha, name).weight.copy_(mine.weight.view(num_kv_heads, 4, 16).repeat_interleave(group, 0)
                                            .reshape(16, 16))
            getattr(mha, name).bias.copy_(mine.bias.view(num_kv_heads, 4).repeat_interleave(group, 0).reshape(16))
        x = torch.randn(3, 6, 16)
        out, w = gqa(x, return_weights=True)
        ref_out, ref_w = mha(x, return_weights=True)
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=0)
    torch.testing.assert_close(w, ref_w, atol=1e-6, rtol=0)  # (B, num_heads, T, T): per query head


@pytest.mark.parametrize("window", [None, 3])
def test_kv_cache_holds_only_the_key_value_heads_and_equals_recomputation(window):
    torch.manual_seed(2)
    gqa = grouped(16, 16, 12, 0.0, 4, num_kv_heads=2, rotary=RotaryEmbedding(4, 12),
                                sliding_window=window).eval()
    x = torch.randn(2, 12, 16)
    with torch.no_grad():
        full, w_full = gqa(x, return_weights=True)
        cache = KVCache(1, batch=2, num_heads=2, context_length=12, head_dim=4)
        outs, start = [], 0
        for size in (5, 1, 1, 3, 2):
            out, w = gqa(x[:, start : start + size], return_weights=True, kv_cache=cache[0])
            torch.testing.assert_close(w, w_full[:, :, start : start + size, : start + size], atol=1e-6, rtol=0)
            outs.append(out)
            start += size
    assert cache[0].keys.shape == (2, 2, 12, 4)  # 2 key/value heads, not 4
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-6, rtol=0)


def test_rope_positions_per_row():
    """A row's RoPE positions may start anywhere: the scores depend on differences of positions only."""
    torch.manual_seed(3)
    gqa = grouped(16, 16, None, 0.0, 4, num_kv_heads=2, rotary=RotaryEmbedding(4, 64)).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        shifted = gqa(x, positions=torch.arange(5)[None] + torch.tensor([[0], [37]]))
        torch.testing.assert_close(shifted, gqa(x), atol=1e-5, rtol=0)


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(num_heads=8, num_kv_heads=3), r"num_heads must be divisible by num_kv_heads.*num_heads=8, num_kv_heads=3"),
    (dict(num_heads=8, num_kv_heads=0), r"num_kv_heads must be a positive int, got 0"),
    (dict(num_heads=6), r"d_out must be divisible by num_heads .*d_out=16, num_heads=6"),
    (dict(num_heads=4, sliding_window=0), r"sliding_window must be None or an int >= 1.*got 0"),
    (dict(num_heads=4, rotary=RotaryEmbedding(8, 16)), r"rotary must rotate heads of width head_dim=4, got one for "
                                                        r"head_dim=8"),
    (dict(num_heads=4, dropout=1.5), r"dropout must be in \[0, 1\)"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        grouped(16, 16, **kwargs)


def test_odd_head_dim_for_rope():
    with pytest.raises(ValueError, match="head_dim must be even"):
        grouped(15, 15, num_heads=3, rotary=RotaryEmbedding(5, 16))


def test_bad_inputs():
    gqa = grouped(16, 16, 8, num_heads=4, num_kv_heads=2)
    cache = KVCache(1, batch=1, num_heads=2, context_length=8, head_dim=4)
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, 16\)"):
        gqa(torch.randn(1, 3, 12))
    with pytest.raises(ValueError, match="sequence length 9 is longer than context_length=8"):
        gqa(torch.randn(1, 9, 16))
    with pytest.raises(ValueError, match="attention_mask cannot be combined with kv_cache"):
        gqa(torch.randn(1, 3, 16), attention_mask=torch.ones(1, 3), kv_cache=cache[0])
    gqa(torch.randn(1, 6, 16), kv_cache=cache[0])
    with pytest.raises(ValueError, match=r"^LayerKVCache: 6 \+ 3 positions exceed context_length=8$"):
        gqa(torch.randn(1, 3, 16), kv_cache=cache[0])


def test_unbatched_input():
    gqa = grouped(16, 16, num_heads=4, num_kv_heads=1).eval()
    x = torch.randn(5, 16)
    out, w = gqa(x, return_weights=True)
    assert out.shape == (5, 16) and w.shape == (4, 5, 5)
    torch.testing.assert_close(out, gqa(x[None])[0])


def test_docstring_examples():
    assert doctest.testmod(gqa_module).failed == 0


def test_qk_norm_of_the_whole_projection_equals_transformers_olmo2_attention():
    """OLMo 2 normalises the whole query and key projections before RoPE (Qwen3 and Gemma 3, each head: their
    loaders' tests)."""
    transformers = pytest.importorskip("transformers")
    from functools import partial

    from transformers.models.olmo2.modeling_olmo2 import Olmo2Attention, Olmo2RotaryEmbedding

    from attnlab.layers import RMSNorm

    cfg = transformers.Olmo2Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                                   max_position_embeddings=64, attn_implementation="eager")
    ref = Olmo2Attention(cfg, layer_idx=0).eval()
    ours = grouped(32, 32, num_heads=4, num_kv_heads=2, rotary=RotaryEmbedding(8, 64),
                                 qk_norm="projection", make_norm=partial(RMSNorm, eps=cfg.rms_norm_eps)).eval()
    assert ours.q_norm.weight.shape == (32,) and ours.k_norm.weight.shape == (16,)
    names = {"W_query": "q_proj", "W_key": "k_proj", "W_value": "v_proj", "out_proj": "o_proj", "q_norm": "q_norm",
             "k_norm": "k_norm"}
    with torch.no_grad():
        for mine, theirs in names.items():
            w = getattr(ours, mine).weight
            w.copy_(1 + 0.3 * torch.randn_like(w) if "norm" in mine else 0.3 * torch.randn_like(w))
            getattr(ref, theirs).weight.copy_(w)
    causal = torch.full((9, 9), float("-inf")).triu(1)
    equals_transformers_attention(ours, ref, Olmo2RotaryEmbedding(cfg), 9, causal)


def test_sinks_and_softcap_are_the_op_s_and_the_sinks_learn():
    from attnlab.functional import scaled_dot_product_attention

    torch.manual_seed(0)
    gqa = grouped(16, 16, num_heads=4, num_kv_heads=2, softcap=2.0, sinks=True, scale=0.5)
    with torch.no_grad():
        gqa.sinks.copy_(torch.randn(4))
    x = torch.randn(2, 6, 16)
    got = gqa(x)
    q, k, v = gqa.heads(x)
    ctx = scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, scale=0.5, softcap=2.0,
                                       sinks=gqa.sinks, backend="math")
    torch.testing.assert_close(got, gqa.out_proj(ctx.transpose(1, 2).reshape(2, 6, 16)), atol=1e-6, rtol=0)
    got.sum().backward()
    assert gqa.sinks.grad is not None and gqa.sinks.grad.abs().min() > 0


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"qk_norm": "both", "make_norm": torch.nn.Identity}, r"qk_norm must be None, 'head' or 'projection', got 'both'"),
    ({"qk_norm": "head"}, r"qk_norm='head' needs make_norm"),
    ({"softcap": 0.0}, r"softcap must be None or a finite number > 0"),
    ({"scale": -1.0}, r"scale must be None \(1/√head_dim\) or a number > 0, got -1.0"),
    ({"softcap": 50.0, "backend": "sdpa"}, r"backend='sdpa' cannot soft-cap the scores \(softcap=50.0\)"),
])
def test_bad_new_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        grouped(16, 16, num_heads=4, **kwargs)
