"""A few queries against a few keys (``fast.few_queries``): the elementwise weighted sum and the moved softmax equal
the matmul and torch's softmax, for every shape on either side of the thresholds, with broadcast batch axes,
gradients and in bf16; and the kernel they make equals the math kernel, masks, grouped heads and empty rows
included."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.fast.few_queries import MANY_PRODUCTS, SHORT_ROW, few_queries_kernel, softmax_last, weighted_values
from attnlab.functional.backends import KERNELS


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 80), heads=st.integers(1, 4), t_q=st.sampled_from([1, 1, 2]), t_k=st.integers(1, 40),
       hd=st.sampled_from([1, 8, 16, 33]), broadcast=st.booleans())
def test_weighted_values_equal_the_matmul(rows, heads, t_q, t_k, hd, broadcast):
    g = torch.Generator().manual_seed(rows * 1000 + t_k)
    weights = torch.softmax(torch.randn(rows, heads, t_q, t_k, generator=g), dim=-1)
    value = torch.randn(1 if broadcast else rows, heads, t_k, hd, generator=g)
    out = weighted_values(weights, value)
    assert out.shape == (rows, heads, t_q, hd)
    torch.testing.assert_close(out, weights @ value, rtol=1e-5, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 300), t_k=st.integers(1, 40), masked=st.booleans(),
       dtype=st.sampled_from([torch.float32, torch.bfloat16]))
def test_softmax_last_equals_torch_softmax(rows, t_k, masked, dtype):
    g = torch.Generator().manual_seed(rows * 100 + t_k)
    scores = torch.randn(rows, 4, 1, t_k, generator=g).to(dtype)
    if masked and t_k > 1:
        scores[..., 0] = float("-inf")  # a key nobody may attend: weight 0
    out = softmax_last(scores)
    assert out.shape == scores.shape
    # bf16: the sums' order differs, so a weight may round one bf16 step (2^-8 below 1) the other way
    tol = dict(rtol=1e-6, atol=1e-7) if dtype == torch.float32 else dict(rtol=0.0, atol=2.0**-8)
    torch.testing.assert_close(out, torch.softmax(scores, dim=-1), **tol)


def ops(fn, *args) -> set[str]:
    with torch.profiler.profile() as prof:
        fn(*args)
    return {e.name for e in prof.events()}


def test_both_forms_are_taken_at_the_beam_search_sizes_and_only_there():
    # 256 rows x 4 heads, one query, 6 keys of 16: the moved softmax and the elementwise sum, not torch's own kernels
    scores, value = torch.randn(256, 4, 1, 6), torch.randn(256, 4, 6, 16)
    assert scores.shape[-1] < SHORT_ROW[torch.float32] and MANY_PRODUCTS <= 256 * 4
    assert not softmax_last(scores).is_contiguous()  # moved to the front and back
    assert softmax_last(torch.randn(256, 4, 1, SHORT_ROW[torch.float32])).is_contiguous()  # torch's own
    assert not softmax_last(torch.randn(256, 4, 1, SHORT_ROW[torch.float32]).bfloat16()).is_contiguous()  # 2x wider
    assert softmax_last(torch.randn(256, 4, 1, 6, dtype=torch.float64)).is_contiguous()  # unmeasured: torch's own
    assert "aten::bmm" not in ops(weighted_values, scores, value)
    assert "aten::bmm" in ops(weighted_values, scores[:2, :4], value[:2, :4])  # 8 products: the matmul
    assert "aten::bmm" in ops(weighted_values, torch.randn(256, 4, 2, 6), value)  # two queries: the matmul


def test_gradients_equal_the_matmul_path():
    g = torch.Generator().manual_seed(0)
    w0 = torch.softmax(torch.randn(100, 4, 1, 5, generator=g), -1)
    v0 = torch.randn(100, 4, 5, 16, generator=g)
    w1, v1 = w0.clone().requires_grad_(), v0.clone().requires_grad_()
    w2, v2 = w0.clone().requires_grad_(), v0.clone().requires_grad_()
    up = torch.randn(100, 4, 1, 16, generator=g)
    (weighted_values(w1, v1) * up).sum().backward()
    ((w2 @ v2) * up).sum().backward()
    torch.testing.assert_close(w1.grad, w2.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(v1.grad, v2.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_and_mixed_dtypes(dtype):
    g = torch.Generator().manual_seed(1)
    w = torch.softmax(torch.randn(256, 4, 1, 7, generator=g), -1)
    v = torch.randn(256, 4, 7, 16, generator=g)
    out = weighted_values(w.to(dtype), v.to(dtype))
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), w @ v, rtol=2e-2, atol=2e-2)
    # fp32 weights, low-precision values (autocast's softmax): the matmul path, which refuses mixed dtypes as before
    with pytest.raises(RuntimeError):
        weighted_values(w, v.to(dtype))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        q, k = torch.randn(256, 4, 1, 16), torch.randn(256, 4, 7, 16)
        out, _ = few_queries_kernel(q, k, v, scale=0.25)
        ref = torch.softmax((q @ k.transpose(-2, -1)) * 0.25, -1) @ v
    assert out.dtype == ref.dtype
    torch.testing.assert_close(out.float(), ref.float(), rtol=2e-2, atol=2e-2)


def test_the_kernel_with_one_query_equals_the_explicit_formula():
    g = torch.Generator().manual_seed(2)
    q, k, v = torch.randn(256, 4, 1, 16, generator=g), torch.randn(256, 4, 6, 16, generator=g), \
        torch.randn(256, 4, 6, 16, generator=g)
    mask = torch.rand(256, 1, 1, 6, generator=g) > 0.3
    mask[0] = False  # a row with no key: output 0, never NaN
    out, weights = few_queries_kernel(q, k, v, attn_mask=mask, scale=0.25)
    scores = (q @ k.transpose(-2, -1) * 0.25).masked_fill(~mask, float("-inf"))
    ref_w = torch.softmax(scores, -1).nan_to_num(0.0)
    assert weights is None
    torch.testing.assert_close(out, ref_w @ v, rtol=1e-5, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 5), kv_heads=st.sampled_from([1, 2]), groups=st.sampled_from([1, 2, 4]),
       t_q=st.integers(1, 8), t_k=st.integers(1, 40), masked=st.booleans(), seed=st.integers(0, 2**16))
def test_the_kernel_equals_the_math_kernel(batch, kv_heads, groups, t_q, t_k, masked, seed):
    """Grouped heads folded into rows, a padding mask with empty rows: the math kernel's numbers."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, kv_heads * groups, t_q, 16, generator=g)
    k, v = torch.randn(2, batch, kv_heads, t_k, 16, generator=g)
    mask = torch.rand(batch, 1, 1, t_k, generator=g) > 0.4 if masked else None
    options = dict(attn_mask=mask, scale=0.25, groups=groups)
    got, _ = few_queries_kernel(q, k, v, **options)
    want, _ = KERNELS["math"].run(q, k, v, **options)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
