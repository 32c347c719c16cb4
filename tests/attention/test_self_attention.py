import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab.attention import SelfAttentionV1, SelfAttentionV2

from .test_simple import INPUTS


def test_v1_published_numbers_seed_123():
    # The book: torch.manual_seed(123); SelfAttention_v1(3, 2)(inputs) prints these.
    torch.manual_seed(123)
    out = SelfAttentionV1(3, 2)(INPUTS)
    expected = torch.tensor([[0.2996, 0.8053], [0.3061, 0.8210], [0.3058, 0.8203],
                             [0.2948, 0.7939], [0.2927, 0.7891], [0.2990, 0.8040]])
    torch.testing.assert_close(out, expected, atol=5e-5, rtol=0)


def test_v1_equals_the_formula():
    sa = SelfAttentionV1(5, 4).double()
    x = torch.randn(3, 6, 5, dtype=torch.float64)
    q, k, v = x @ sa.W_query, x @ sa.W_key, x @ sa.W_value
    expected = torch.softmax(q @ k.transpose(1, 2) / 2.0, dim=-1) @ v  # √d_k = √4 = 2
    torch.testing.assert_close(sa(x), expected, atol=1e-12, rtol=0)


def test_v2_equals_v1_with_transposed_weights():
    v1, v2 = SelfAttentionV1(3, 2), SelfAttentionV2(3, 2)
    with torch.no_grad():
        v1.W_query.copy_(v2.W_query.weight.T)
        v1.W_key.copy_(v2.W_key.weight.T)
        v1.W_value.copy_(v2.W_value.weight.T)
    torch.testing.assert_close(v1(INPUTS), v2(INPUTS), atol=1e-6, rtol=0)


@given(st.integers(1, 8), st.integers(0, 2**31 - 1))
def test_permutation_equivariant_without_positions(t, seed):
    g = torch.Generator().manual_seed(seed)
    sa = SelfAttentionV2(4, 3, qkv_bias=True)
    x = torch.randn(2, t, 4, generator=g)
    perm = torch.randperm(t, generator=g)
    torch.testing.assert_close(sa(x[:, perm]), sa(x)[:, perm], atol=1e-6, rtol=0)


@pytest.mark.parametrize("module", [SelfAttentionV1(3, 2), SelfAttentionV2(3, 2)])
def test_wrong_width_is_named(module):
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, 3\) or \(T, 3\), got \(6, 4\)"):
        module(torch.randn(6, 4))


def test_mask_shape_is_checked():
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(B, T\) = \(2, 6\), got \(2, 5\)"):
        SelfAttentionV2(3, 2)(torch.randn(2, 6, 3), attention_mask=torch.ones(2, 5))
