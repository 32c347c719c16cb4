import pytest
import torch

from attnlab.attention import SimpleSelfAttention

# The book's example sentence, "Your journey starts with one step" (Raschka, ch. 3).
INPUTS = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                       [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])


def test_published_numbers_for_journey():
    # Values printed in the book (4 decimals) for the query "journey" (x²).
    context, weights = SimpleSelfAttention()(INPUTS, return_weights=True)
    torch.testing.assert_close(weights[1], torch.tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581]),
                               atol=5e-5, rtol=0)
    torch.testing.assert_close(context[1], torch.tensor([0.4419, 0.6515, 0.5683]), atol=5e-5, rtol=0)


def test_equals_the_formula():
    x = torch.randn(2, 7, 5, dtype=torch.float64)
    expected = torch.softmax(x @ x.transpose(1, 2), dim=-1) @ x
    torch.testing.assert_close(SimpleSelfAttention()(x), expected, atol=1e-12, rtol=0)


def test_padding_keys_get_zero_weight():
    x = torch.randn(2, 4, 3)
    out, w = SimpleSelfAttention()(x, attention_mask=torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]]), return_weights=True)
    assert (w[1, :, 2:] == 0).all()
    torch.testing.assert_close(out[1, :2], SimpleSelfAttention()(x[1, :2]), atol=1e-6, rtol=0)


def test_rejects_integer_input():
    with pytest.raises(TypeError, match="SimpleSelfAttention: x must be a floating-point tensor"):
        SimpleSelfAttention()(torch.ones(3, 2, dtype=torch.int64))
