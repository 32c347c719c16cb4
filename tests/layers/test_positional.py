import math

import pytest
import torch

from attnlab.layers import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoidal_table


@pytest.mark.parametrize(("context_length", "d"), [(50, 16), (7, 2), (128, 512)])
def test_table_equals_the_formula(context_length, d):
    table = sinusoidal_table(context_length, d)
    ref = torch.tensor([[math.sin(p / 10000 ** (2 * (i // 2) / d)) if i % 2 == 0
                         else math.cos(p / 10000 ** (2 * (i // 2) / d)) for i in range(d)]
                        for p in range(context_length)], dtype=torch.float32)
    torch.testing.assert_close(table, ref, atol=1e-6, rtol=0)


def test_adds_to_input_with_offset():
    pe = SinusoidalPositionalEncoding(d_model=8, context_length=20)
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(pe(x), x + pe.pe[:5], atol=0, rtol=0)
    torch.testing.assert_close(pe(x, offset=3), x + sinusoidal_table(20, 8)[3:8], atol=0, rtol=0)
    assert not list(pe.parameters())  # fixed, nothing to learn


def test_odd_d_model_rejected():
    with pytest.raises(ValueError, match="even"):
        SinusoidalPositionalEncoding(d_model=7, context_length=10)


@pytest.mark.parametrize("cls", [SinusoidalPositionalEncoding, LearnedPositionalEmbedding])
def test_too_long_rejected(cls):
    layer = cls(8, 10)  # (d_model, context_length) for both
    with pytest.raises(ValueError, match="exceed context_length=10"):
        layer(torch.zeros(1, 11, 8))
    with pytest.raises(ValueError, match="exceed context_length=10"):
        layer(torch.zeros(1, 3, 8), offset=8)
    with pytest.raises(ValueError, match=r"shape \(B, T, 8\)"):
        layer(torch.zeros(1, 3, 5))


def test_learned_adds_its_rows():
    emb = LearnedPositionalEmbedding(context_length=10, d_model=4)
    x = torch.randn(3, 4, 4)
    torch.testing.assert_close(emb(x, offset=2), x + emb.weight[2:6], atol=0, rtol=0)
    emb(x).sum().backward()
    assert emb.weight.grad[:4].abs().sum() > 0 and emb.weight.grad[4:].abs().sum() == 0
