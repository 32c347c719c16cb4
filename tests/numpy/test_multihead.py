import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab import numpy as anp
from attnlab.attention import MultiHeadAttention


@given(st.integers(1, 3), st.integers(1, 8), st.sampled_from([(8, 8, 2), (6, 12, 3), (4, 4, 1)]),
       st.booleans(), st.booleans(), st.booleans(), st.sampled_from(["math", "chunked", "auto"]),
       st.integers(0, 2**16))
def test_multi_head_attention_equals_torch(b, t, dims, is_causal, qkv_bias, padded, backend, seed):
    d_in, d_out, heads = dims
    torch.manual_seed(seed)
    mha = MultiHeadAttention(d_in, d_out, num_heads=heads, is_causal=is_causal, qkv_bias=qkv_bias,
                             backend="math").eval()
    x = torch.randn(b, t, d_in)
    mask = (torch.rand(b, t) > 0.3).long() if padded else None
    with torch.no_grad():
        want, want_w = mha(x, attention_mask=mask, return_weights=True)
    params = anp.state_dict_to_arrays(mha.state_dict())
    np_mask = None if mask is None else mask.numpy()
    got = anp.multi_head_attention(x.numpy(), params, heads, np_mask, is_causal=is_causal, backend=backend)
    np.testing.assert_allclose(got, want.numpy(), atol=1e-5, rtol=0)
    if backend != "chunked":
        _, got_w = anp.multi_head_attention(x.numpy(), params, heads, np_mask, is_causal=is_causal, backend=backend,
                                            return_weights=True)
        np.testing.assert_allclose(got_w, want_w.numpy(), atol=1e-5, rtol=0)


def test_split_heads():
    t = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    heads = anp.split_heads(t, 2)
    assert heads.shape == (2, 2, 3, 2)
    assert heads[0, 1, 2].tolist() == [10, 11]  # batch 0, head 1, token 2: the second half of row 2


PARAMS = anp.state_dict_to_arrays(MultiHeadAttention(4, 4, num_heads=2).state_dict())
X = np.zeros((1, 3, 4), dtype=np.float32)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"x": np.zeros((3, 4), np.float32)}, ValueError, r"x must have shape \(B, T, D\)"),
    ({"x": X.tolist()}, TypeError, "x must be a numpy.ndarray"),
    ({"num_heads": 3}, ValueError, "num_heads must be a positive divisor of d_out=4, got 3"),
    ({"attention_mask": np.ones((1, 4), np.int64)}, ValueError, r"attention_mask must have shape \(B, T\) = \(1, 3\)"),
    ({"params": {"W_query.weight": PARAMS["W_query.weight"]}}, KeyError, "missing parameter 'W_key.weight'"),
    ({"x": np.zeros((1, 3, 5), np.float32)}, ValueError, "x has width 5 but weight expects 4"),
])
def test_bad_input(kwargs, error, match):
    args = {"x": X, "params": PARAMS, "num_heads": 2, **kwargs}
    with pytest.raises(error, match=match):
        anp.multi_head_attention(**args)


@given(st.integers(1, 3), st.integers(1, 6), st.integers(1, 8), st.booleans(), st.sampled_from(["math", "chunked"]),
       st.integers(0, 2**16))
def test_cross_attention_equals_torch(b, t_q, t_k, padded, backend, seed):
    # queries from x, keys and values from memory (another length), the memory's padding masked: against attnlab's
    # torch module mha(x, memory) and torch.nn.MultiheadAttention(query, key, value)
    from references import torch_mha_like

    torch.manual_seed(seed)
    mha = MultiHeadAttention(8, 8, num_heads=2, is_causal=False, qkv_bias=True, backend="math").eval()
    x, memory = torch.randn(b, t_q, 8), torch.randn(b, t_k, 8)
    mask = (torch.rand(b, t_k) > 0.3).long() if padded else None
    if mask is not None:
        mask[:, 0] = 1  # every query has a key (torch's own module gives NaN for a row without one)
    with torch.no_grad():
        want, want_w = mha(x, memory, attention_mask=mask, return_weights=True)
        ref, _ = torch_mha_like(mha)(x, memory, memory, key_padding_mask=None if mask is None else mask == 0)
    np.testing.assert_allclose(want.numpy(), ref.numpy(), atol=1e-5, rtol=0)
    params = anp.state_dict_to_arrays(mha.state_dict())
    np_mask = None if mask is None else mask.numpy()
    got = anp.multi_head_attention(x.numpy(), params, 2, np_mask, is_causal=False, backend=backend,
                                   memory=memory.numpy())
    np.testing.assert_allclose(got, want.numpy(), atol=1e-5, rtol=0)
    if backend == "math":
        _, got_w = anp.multi_head_attention(x.numpy(), params, 2, np_mask, is_causal=False, return_weights=True,
                                            memory=memory.numpy())
        assert got_w.shape == (b, 2, t_q, t_k)
        np.testing.assert_allclose(got_w, want_w.numpy(), atol=1e-5, rtol=0)


def test_cross_attention_bad_memory_is_named():
    with pytest.raises(ValueError, match=r"memory must have shape \(B, Tk, D\) = \(1, Tk, 4\), got \(2, 5, 4\)"):
        anp.multi_head_attention(X, PARAMS, 2, memory=np.zeros((2, 5, 4), np.float32))
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(B, T\) = \(1, 5\)"):
        anp.multi_head_attention(X, PARAMS, 2, np.ones((1, 3), np.int64), memory=np.zeros((1, 5, 4), np.float32))
