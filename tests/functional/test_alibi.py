import doctest
import math

import pytest
import torch
import torch.nn.functional as F

import attnlab.functional.alibi as alibi_module
from attnlab.functional import alibi_bias, alibi_slopes


def bloom_alibi(num_heads: int, t_k: int) -> torch.Tensor:
    """transformers' build_alibi_tensor (BLOOM) for one unpadded sequence: ``(H, 1, Tk)``, slope_h · j."""
    pytest.importorskip("transformers")
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    return build_alibi_tensor(torch.ones(1, t_k, dtype=torch.long), num_heads, torch.float32)


def test_slopes_8_heads_are_the_papers():
    # the paper, §3: with 8 heads the slopes are 1/2, 1/4, ..., 1/256 (powers of two: exact in float32)
    assert torch.equal(alibi_slopes(8), torch.tensor([1 / 2**k for k in range(1, 9)]))


def test_slopes_12_heads_by_hand():
    # 8 slopes of 8 heads (2^-k), then every other one of 16 heads' 2^(-k/2), k odd: 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5
    expected = [2.0**-k for k in range(1, 9)] + [2.0 ** (-k / 2) for k in (1, 3, 5, 7)]
    torch.testing.assert_close(alibi_slopes(12), torch.tensor(expected), atol=0, rtol=1e-7)


@pytest.mark.parametrize("num_heads", [1, 2, 3, 5, 8, 12, 16, 20, 33])
def test_slopes_equal_blooms(num_heads):
    slopes = bloom_alibi(num_heads, 2)[:, 0, 1]  # slope · 1
    torch.testing.assert_close(alibi_slopes(num_heads), slopes, atol=0, rtol=1e-6)


@pytest.mark.parametrize(("t_q", "t_k"), [(6, 6), (1, 9), (3, 7)])
def test_bias_equals_blooms_up_to_a_constant_per_row(t_q, t_k):
    # BLOOM adds slope · j and relies on softmax ignoring a constant per row; ours is −slope · (p_i − j),
    # which is BLOOM's minus slope · p_i, with query i at p_i = t_k − t_q + i
    h = 12
    bloom = bloom_alibi(h, t_k)  # (H, 1, Tk)
    slopes = bloom[:, 0, 1]
    p = torch.arange(t_k - t_q, t_k, dtype=torch.float32)
    expected = bloom - slopes[:, None, None] * p[None, :, None]
    torch.testing.assert_close(alibi_bias(h, t_q, t_k), expected, atol=1e-6, rtol=1e-6)


def test_bias_by_hand():
    # 2 heads: slopes 2^-4, 2^-8; t_q = 2, t_k = 3: queries at positions 1 and 2
    m1, m2 = 1 / 16, 1 / 256
    expected = torch.tensor([
        [[-m1, 0.0, m1], [-2 * m1, -m1, 0.0]],
        [[-m2, 0.0, m2], [-2 * m2, -m2, 0.0]],
    ])
    assert torch.equal(alibi_bias(2, 2, 3), expected)


def explicit_alibi_mask(num_heads: int, t_q: int, t_k: int) -> torch.Tensor:
    """The float mask written element by element: −m_h · (p − j) where j <= p (causal), −inf after."""
    n = 2 ** math.floor(math.log2(num_heads))
    slopes = [2 ** (-8 * k / n) for k in range(1, n + 1)]
    slopes += [2 ** (-8 * k / (2 * n)) for k in range(1, 2 * n + 1, 2)][: num_heads - n]
    mask = torch.empty(num_heads, t_q, t_k)
    for h in range(num_heads):
        for i in range(t_q):
            p = t_k - t_q + i
            for j in range(t_k):
                mask[h, i, j] = -slopes[h] * (p - j) if j <= p else float("-inf")
    return mask


def reference_attention(q, k, v, mask):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + mask
    return torch.softmax(scores, dim=-1) @ v


@pytest.mark.parametrize(("num_heads", "t_q", "t_k"), [(4, 5, 5), (6, 2, 7), (3, 1, 4)])
def test_through_sdpa_equals_explicit_mask(num_heads, t_q, t_k):
    q = torch.randn(2, num_heads, t_q, 8)
    k, v = torch.randn(2, num_heads, t_k, 8), torch.randn(2, num_heads, t_k, 8)
    causal = torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q)  # end-aligned, like the bias
    attn_mask = alibi_bias(num_heads, t_q, t_k).masked_fill(~causal, float("-inf"))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    torch.testing.assert_close(out, reference_attention(q, k, v, explicit_alibi_mask(num_heads, t_q, t_k)),
                               atol=1e-6, rtol=1e-6)
    # and BLOOM's slope · j gives the same attention: the per-row constant cancels in softmax
    bloom = bloom_alibi(num_heads, t_k).expand(num_heads, t_q, t_k).masked_fill(~causal, float("-inf"))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=bloom), atol=1e-6, rtol=1e-6)


def test_dtype_and_device():
    bias = alibi_bias(4, 3, 3, "cpu", dtype=torch.bfloat16)
    assert bias.dtype == torch.bfloat16 and bias.shape == (4, 3, 3) and bias.device.type == "cpu"


@pytest.mark.parametrize(("call", "match"), [
    (lambda: alibi_slopes(0), "alibi_slopes: num_heads must be a positive int, got 0"),
    (lambda: alibi_bias(0, 2, 2), "alibi_bias: num_heads must be a positive int, got 0"),
    (lambda: alibi_bias(4, 0, 2), "t_q must be a positive int, got 0"),
    (lambda: alibi_bias(4, 3, 2), "t_q must be <= t_k .* got t_q=3, t_k=2"),
])
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_docstring_examples():
    assert doctest.testmod(alibi_module).failed == 0
