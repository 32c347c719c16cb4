import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab.functional import softmax


def test_hand_worked():
    # softmax([1, 2, 3]) = e^i / (e + e² + e³)
    z = math.e + math.e**2 + math.e**3
    expected = torch.tensor([math.e / z, math.e**2 / z, math.e**3 / z])
    torch.testing.assert_close(softmax(torch.tensor([1.0, 2.0, 3.0])), expected, atol=1e-7, rtol=0)


@given(st.integers(1, 6), st.integers(1, 9), st.floats(-50, 50))
def test_equals_torch_softmax_and_rows_sum_to_one(rows, cols, offset):
    x = torch.randn(rows, cols, dtype=torch.float64) * 10 + offset
    y = softmax(x)
    torch.testing.assert_close(y, torch.softmax(x, dim=-1), atol=1e-12, rtol=0)
    torch.testing.assert_close(y.sum(-1), torch.ones(rows, dtype=torch.float64), atol=1e-12, rtol=0)


def test_stable_for_huge_scores():
    y = softmax(torch.tensor([1000.0, 1001.0]))
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y, torch.tensor([1 / (1 + math.e), math.e / (1 + math.e)]), atol=1e-6, rtol=0)


def test_all_masked_row_is_zero_with_zero_gradient():
    inf = float("inf")
    x = torch.tensor([[0.5, -inf], [-inf, -inf]], requires_grad=True)
    y = softmax(x)
    torch.testing.assert_close(y, torch.tensor([[1.0, 0.0], [0.0, 0.0]]))
    y.sum().backward()
    assert torch.isfinite(x.grad).all() and (x.grad[1] == 0).all()


def test_other_dims():
    x = torch.randn(3, 4, 5)
    torch.testing.assert_close(softmax(x, dim=1), torch.softmax(x, dim=1), atol=1e-6, rtol=0)


def test_rejects_integer_input():
    with pytest.raises(TypeError, match=r"x must be a floating-point tensor, got dtype torch\.int64"):
        softmax(torch.tensor([1, 2]))
