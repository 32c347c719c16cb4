"""The bytes a decoding step reads, counted by hand for a small GPT, fp32 and int8."""

import pytest

from attnlab.bench.decoding import bytes_per_step, step_limit
from attnlab.models import GPT, GPTConfig, quantize


def test_bytes_per_step_counts_the_maps_the_norms_and_the_tied_head_once():
    c = GPTConfig(vocab_size=100, context_length=16, d_model=32, num_layers=2, num_heads=2, qkv_bias=True)
    model = GPT(c).eval()
    d, f, v = 32, 128, 100
    block = (3 * d * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d) + 2 * 2 * d  # q,k,v; out; ff; 2 LNs
    fp32 = 4 * (2 * block + 2 * d + v * d)  # blocks, final LN, the head (the embedding's matrix, once)
    assert bytes_per_step(model) == fp32
    quantize(model, "int8")
    linear_weights = 2 * (4 * d * d + 2 * d * f) + v * d
    scales = 2 * (4 * d + f + d) + v
    assert bytes_per_step(model) == fp32 - 4 * linear_weights + linear_weights + 4 * scales


def test_the_step_limit_is_bandwidth_over_bytes():
    assert step_limit(27.0, 498_000_000) == pytest.approx(27e9 / 498e6, rel=1e-12)
