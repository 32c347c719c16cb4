import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab.attention import CausalAttention

from .test_simple import INPUTS


def test_equals_mask_then_renormalise():
    # The book's two-step version: softmax, zero the future, renormalise each row -- same as -inf then softmax.
    ca = CausalAttention(3, 2, context_length=6, dropout=0.0)
    out, w = ca(INPUTS, return_weights=True)
    q, k, v = ca.project(INPUTS)
    simple = torch.softmax(q @ k.T / 2**0.5, dim=-1) * torch.ones(6, 6).tril()
    renorm = simple / simple.sum(-1, keepdim=True)
    torch.testing.assert_close(w, renorm, atol=1e-6, rtol=0)
    torch.testing.assert_close(out, renorm @ v, atol=1e-6, rtol=0)


@given(st.integers(2, 10), st.integers(0, 8))
def test_output_at_i_ignores_later_tokens(t, i):
    i = min(i, t - 2)
    ca = CausalAttention(4, 3, context_length=10, dropout=0.0)
    x = torch.randn(2, t, 4)
    x2 = x.clone()
    x2[:, i + 1:] = torch.randn_like(x2[:, i + 1:])
    torch.testing.assert_close(ca(x)[:, : i + 1], ca(x2)[:, : i + 1], atol=1e-6, rtol=0)


def test_dropout_only_in_training_and_scaled():
    ca = CausalAttention(3, 2, context_length=6, dropout=0.5)
    batch = INPUTS.expand(4, 6, 3)
    ca.eval()
    _, w_eval = ca(batch, return_weights=True)
    _, w_eval2 = ca(batch, return_weights=True)
    assert torch.equal(w_eval, w_eval2)  # no effect in eval
    ca.train()
    _, w_train = ca(batch, return_weights=True)
    kept = w_train != 0
    assert (~kept & (w_eval != 0)).any()  # something was dropped
    torch.testing.assert_close(w_train[kept], w_eval[kept] / 0.5, atol=1e-6, rtol=0)


def test_longer_than_context_length_is_named():
    with pytest.raises(ValueError, match="sequence length 7 is longer than context_length=6"):
        CausalAttention(3, 2, context_length=6, dropout=0.0)(torch.randn(7, 3))


@pytest.mark.parametrize("dropout", [1.0, -0.5])
def test_bad_dropout_is_named(dropout):
    with pytest.raises(ValueError, match=rf"dropout must be in \[0, 1\), got {dropout}"):
        CausalAttention(3, 2, context_length=6, dropout=dropout)
