"""The NumPy attention equals attnlab.functional's (torch) attention, case by case."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab import functional as AF
from attnlab import numpy as anp
from attnlab.numpy.chunked import chunked_attention

ATOL = 1e-5


@st.composite
def attention_case(draw):
    """q, k, v, a mask (none / bool / float, sometimes with fully masked rows), is_causal, scale."""
    b, h = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    t_q, t_k, d, d_v = (draw(st.integers(1, 9)) for _ in range(4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = rng.standard_normal((b, h, t_q, d)).astype(np.float32)
    k = rng.standard_normal((b, h, t_k, d)).astype(np.float32)
    v = rng.standard_normal((b, h, t_k, d_v)).astype(np.float32)
    kind = draw(st.sampled_from(["none", "bool", "float", "padding"]))
    mask = None
    if kind == "bool":
        mask = rng.random((b, 1, t_q, t_k)) > draw(st.sampled_from([0.3, 0.7, 1.0]))  # 1.0: nothing allowed
    elif kind == "float":
        mask = rng.standard_normal((1, h, t_q, t_k)).astype(np.float32)
        mask[rng.random(mask.shape) > 0.6] = -np.inf
        mask[..., 0, :] = -np.inf  # the first query may attend to nothing
    elif kind == "padding":
        mask = anp.padding_mask((rng.random((b, t_k)) > 0.4).astype(np.int64))
    scale = draw(st.sampled_from([None, 0.5, 2.0]))
    return q, k, v, mask, draw(st.booleans()), scale


def _torch(q, k, v, mask, is_causal, scale):
    tmask = None if mask is None else torch.from_numpy(mask)
    return AF.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)), attn_mask=tmask, is_causal=is_causal,
                                           scale=scale, backend="math", return_weights=True)


@given(attention_case(), st.sampled_from(["math", "chunked", "auto"]))
def test_sdpa_equals_torch(case, backend):
    q, k, v, mask, is_causal, scale = case
    got = anp.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale, backend=backend)
    want, _ = _torch(q, k, v, mask, is_causal, scale)
    assert got.dtype == np.float32 and got.shape == tuple(want.shape)
    np.testing.assert_allclose(got, want.numpy(), atol=ATOL, rtol=0)


@given(attention_case())
def test_weights_equal_torch(case):
    q, k, v, mask, is_causal, scale = case
    _, got = anp.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale,
                                              return_weights=True)
    _, want = _torch(q, k, v, mask, is_causal, scale)
    np.testing.assert_allclose(got, want.numpy(), atol=ATOL, rtol=0)


@given(attention_case(), st.integers(1, 4), st.integers(1, 4))
def test_chunked_with_small_blocks_equals_torch(case, block_q, block_k):
    # Small blocks force many blocks: rescaling across blocks, partial blocks and causal skipping.
    q, k, v, mask, is_causal, scale = case
    s = q.shape[-1] ** -0.5 if scale is None else scale
    got = chunked_attention(q, k, v, mask, is_causal, s, block_q=block_q, block_k=block_k)
    want, _ = _torch(q, k, v, mask, is_causal, scale)
    np.testing.assert_allclose(got, want.numpy(), atol=ATOL, rtol=0)


@pytest.mark.parametrize("backend", ["math", "chunked"])
def test_fully_masked_rows_give_zero(backend):
    q = k = v = np.ones((1, 1, 3, 4), dtype=np.float32)
    mask = np.array([[True, True, False], [False, False, False], [True, False, False]])
    out = anp.scaled_dot_product_attention(q, k, v, attn_mask=mask, backend=backend)
    assert out[0, 0, 1].tolist() == [0.0] * 4 and not np.isnan(out).any()
    np.testing.assert_allclose(out[0, 0, 0], 1.0)


def test_length_one_is_the_value():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 1, 1, 4)).astype(np.float32) for _ in range(3))
    for backend in ("math", "chunked"):
        np.testing.assert_allclose(anp.scaled_dot_product_attention(q, k, v, backend=backend), v, atol=1e-7)


def test_auto_switches_to_chunked_on_long_sequences():
    q = np.zeros((1, 1, 4096, 2), dtype=np.float32)
    assert anp.choose_backend(q, q, return_weights=False) == "chunked"
    assert anp.choose_backend(q, q, return_weights=True) == "math"
    assert anp.choose_backend(q[:, :, :8], q[:, :, :8], return_weights=False) == "math"


def test_float64_stays_float64():
    q = np.ones((1, 2, 3), dtype=np.float64)
    assert anp.scaled_dot_product_attention(q, q, q).dtype == np.float64


Q = np.zeros((1, 2, 3, 4), dtype=np.float32)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"query": Q.tolist()}, TypeError, "query must be a numpy.ndarray, got list"),
    ({"key": Q.astype(np.int32)}, TypeError, "key must be a floating-point array"),
    ({"value": Q.astype(np.float64)}, TypeError, "must share a dtype"),
    ({"query": np.zeros(4, np.float32)}, ValueError, r"query must have shape \(..., T, D\)"),
    ({"key": np.zeros((1, 2, 3, 5), np.float32)}, ValueError, "same head dim"),
    ({"value": np.zeros((1, 2, 5, 4), np.float32)}, ValueError, "same sequence length"),
    ({"key": np.zeros((1, 3, 3, 4), np.float32), "value": np.zeros((1, 3, 3, 4), np.float32)}, ValueError,
     "batch dims must broadcast"),
    ({"attn_mask": np.zeros((3, 3), np.int8)}, TypeError, "attn_mask must be bool"),
    ({"attn_mask": np.zeros((2, 2), bool)}, ValueError, "does not broadcast"),
    ({"attn_mask": [[True]]}, TypeError, "attn_mask must be a numpy.ndarray or None"),
    ({"dropout_p": 0.1}, ValueError, "dropout_p must be 0.0"),
    ({"scale": float("nan")}, ValueError, "scale must be a finite float"),
    ({"backend": "sdpa"}, ValueError, "backend must be one of 'auto', 'math', 'chunked', got 'sdpa'"),
    ({"backend": "chunked", "return_weights": True}, ValueError, "cannot return weights"),
])
def test_bad_input(kwargs, error, match):
    args = {"query": Q, "key": Q, "value": Q, **kwargs}
    with pytest.raises(error, match=match):
        anp.scaled_dot_product_attention(**args)


@given(st.integers(1, 3), st.integers(1, 3), st.sampled_from(["math", "chunked"]), st.booleans(), st.integers(0, 99))
def test_enable_gqa_equals_torch(h_kv, groups, backend, is_causal, seed):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, h_kv * groups, 5, 8)).astype(np.float32)
    k, v = (rng.standard_normal((2, h_kv, 7, 8)).astype(np.float32) for _ in range(2))
    mask = anp.padding_mask((rng.random((2, 7)) > 0.3).astype(np.int64))
    got = anp.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, enable_gqa=True,
                                           backend=backend)
    want = AF.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)), attn_mask=torch.from_numpy(mask),
                                           is_causal=is_causal, enable_gqa=True)
    np.testing.assert_allclose(got, want.numpy(), atol=ATOL, rtol=0)
