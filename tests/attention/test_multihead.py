import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab.attention import MultiHeadAttention, MultiHeadAttentionWrapper
from references import torch_mha_like


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("qkv_bias", [False, True])
@pytest.mark.parametrize("backend", ["auto", "math", "sdpa", "chunked"])
def test_equals_torch_multihead_attention(is_causal, padding, qkv_bias, backend):
    mha = MultiHeadAttention(16, 16, num_heads=4, qkv_bias=qkv_bias, is_causal=is_causal, backend=backend).eval()
    ref = torch_mha_like(mha)
    x = torch.randn(3, 7, 16)
    am = torch.tensor([[1] * 7, [1] * 5 + [0] * 2, [1] * 2 + [0] * 5]) if padding else None
    kwargs = {"key_padding_mask": am == 0} if padding else {}
    if is_causal:
        kwargs["attn_mask"] = torch.ones(7, 7, dtype=torch.bool).triu(1)  # torch: True = NOT allowed
    ref_out, ref_w = ref(x, x, x, need_weights=True, average_attn_weights=True, **kwargs)
    out = mha(x, attention_mask=am)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
    if backend in ("auto", "math"):
        out_w, w = mha(x, attention_mask=am, return_weights=True)
        torch.testing.assert_close(out_w, ref_out, atol=1e-5, rtol=0)
        torch.testing.assert_close(w.mean(dim=1), ref_w, atol=1e-5, rtol=0)  # head-averaged, as torch returns


def test_wrapper_equals_multihead_with_matching_weights():
    # The wrapper concatenates heads of width d_out; MultiHeadAttention with d_out·num_heads split the same way and
    # an identity out_proj computes exactly the same thing.
    d_in, d_head, heads = 5, 3, 4
    wrapper = MultiHeadAttentionWrapper(d_in, d_head, context_length=8, dropout=0.0, num_heads=heads, qkv_bias=True)
    mha = MultiHeadAttention(d_in, d_head * heads, context_length=8, num_heads=heads, qkv_bias=True, is_causal=True)
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            getattr(mha, name).weight.copy_(torch.cat([getattr(h, name).weight for h in wrapper.heads]))
            getattr(mha, name).bias.copy_(torch.cat([getattr(h, name).bias for h in wrapper.heads]))
        mha.out_proj.weight.copy_(torch.eye(d_head * heads))
        mha.out_proj.bias.zero_()
    x = torch.randn(2, 8, d_in)
    out_w, w_w = wrapper(x, return_weights=True)
    out_m, w_m = mha(x, return_weights=True)
    torch.testing.assert_close(out_w, out_m, atol=1e-6, rtol=0)
    torch.testing.assert_close(w_w, w_m, atol=1e-6, rtol=0)


@given(st.integers(1, 8), st.integers(0, 2**31 - 1))
def test_permutation_equivariant_without_positions(t, seed):
    g = torch.Generator().manual_seed(seed)
    mha = MultiHeadAttention(8, 8, num_heads=2, is_causal=False)
    x = torch.randn(2, t, 8, generator=g)
    perm = torch.randperm(t, generator=g)
    torch.testing.assert_close(mha(x[:, perm]), mha(x)[:, perm], atol=1e-6, rtol=0)


@given(st.integers(2, 10), st.integers(0, 8))
def test_causal_output_ignores_later_tokens(t, i):
    i = min(i, t - 2)
    mha = MultiHeadAttention(8, 8, num_heads=2, is_causal=True)
    x = torch.randn(1, t, 8)
    x2 = x.clone()
    x2[:, i + 1:] += 1.0
    torch.testing.assert_close(mha(x)[:, : i + 1], mha(x2)[:, : i + 1], atol=1e-6, rtol=0)


def test_unbatched_input():
    mha = MultiHeadAttention(4, 4, num_heads=2)
    x = torch.randn(5, 4)
    out, w = mha(x, return_weights=True)
    assert out.shape == (5, 4) and w.shape == (2, 5, 5)
    torch.testing.assert_close(out, mha(x[None])[0], atol=1e-6, rtol=0)  # math (weights) vs fused kernel


def test_dropout_off_in_eval():
    mha = MultiHeadAttention(8, 8, num_heads=2, dropout=0.5).eval()
    x = torch.randn(2, 6, 8)
    assert torch.equal(mha(x), mha(x))


@pytest.mark.parametrize(
    ("make", "msg"),
    [
        (lambda: MultiHeadAttention(10, 10, num_heads=3),
         "d_out must be divisible by num_heads, got d_out=10, num_heads=3"),
        (lambda: MultiHeadAttention(4, 4, num_heads=2, dropout=1.5), r"dropout must be in \[0, 1\), got 1.5"),
        (lambda: MultiHeadAttention(4, 4, num_heads=2, context_length=3)(torch.randn(1, 4, 4)),
         "sequence length 4 is longer than context_length=3"),
        (lambda: MultiHeadAttention(4, 4, num_heads=2)(torch.randn(1, 3, 5)), r"x must have shape \(B, T, 4\)"),
    ],
)
def test_bad_input_is_named(make, msg):
    with pytest.raises(ValueError, match=msg):
        make()


def test_integer_input_is_a_type_error():
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        MultiHeadAttention(4, 4, num_heads=2)(torch.ones(1, 3, 4, dtype=torch.long))


@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("backend", ["auto", "math", "sdpa", "chunked"])
def test_cross_attention_equals_torch_multihead_attention(padding, backend):
    # mha(x, memory): queries from x (Tq = 5), keys and values from memory (Tk = 7), the memory's padding masked;
    # torch's call is mha(query, key, value) with key = value = memory
    mha = MultiHeadAttention(16, 16, num_heads=4, qkv_bias=True, is_causal=False, backend=backend).eval()
    ref = torch_mha_like(mha)
    x, memory = torch.randn(3, 5, 16), torch.randn(3, 7, 16)
    am = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] + [0] * 6]) if padding else None
    kwargs = {"key_padding_mask": am == 0} if padding else {}
    ref_out, ref_w = ref(x, memory, memory, need_weights=True, average_attn_weights=False, **kwargs)
    torch.testing.assert_close(mha(x, memory, attention_mask=am), ref_out, atol=1e-5, rtol=0)
    if backend in ("auto", "math"):
        out, w = mha(x, memory, attention_mask=am, return_weights=True)
        assert w.shape == (3, 4, 5, 7)
        torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
        torch.testing.assert_close(w, ref_w, atol=1e-5, rtol=0)  # every head's weights


def test_cross_attention_with_the_memory_projected_once():
    mha = MultiHeadAttention(8, 8, num_heads=2, is_causal=False).eval()
    x, memory = torch.randn(2, 3, 8), torch.randn(2, 6, 8)
    am = torch.tensor([[1] * 6, [1] * 2 + [0] * 4])
    memory_kv = mha.project_memory(memory)
    assert memory_kv[0].shape == (2, 2, 6, 4)
    torch.testing.assert_close(mha(x, memory_kv=memory_kv, attention_mask=am), mha(x, memory, attention_mask=am),
                               atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="give it without memory and without kv_cache"):
        mha(x, memory, memory_kv=memory_kv)
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(B, T\) = \(2, 6\)"):
        mha(x, memory_kv=memory_kv, attention_mask=am[:, :3])


