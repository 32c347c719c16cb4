"""Partial RoPE: the first rotary_dim features of each head turn as RoPE of that width, the others not at all;
equal to transformers' Qwen3-Next rotation (cos and sin of the turned width, the rest passed through)."""

import pytest
import torch

from attnlab.layers.partial_rotary import PartialRotaryEmbedding
from attnlab.layers.rotary import RotaryEmbedding


def test_the_first_features_turn_as_rope_of_their_width_and_the_rest_keep_no_position():
    rope = PartialRotaryEmbedding(8, 4, context_length=32, base=100.0)
    q, k = torch.randn(2, 3, 5, 8), torch.randn(2, 1, 5, 8)
    positions = torch.arange(7, 12)
    q_rot, k_rot = rope.apply(q, k, positions)
    want_q, want_k = RotaryEmbedding(4, 32, 100.0).apply(q[..., :4], k[..., :4], positions)
    assert torch.equal(q_rot[..., :4], want_q) and torch.equal(k_rot[..., :4], want_k)
    assert torch.equal(q_rot[..., 4:], q[..., 4:]) and torch.equal(k_rot[..., 4:], k[..., 4:])


def test_equals_transformers_qwen3_next_rotation():
    transformers = pytest.importorskip("transformers")
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextRotaryEmbedding, apply_rotary_pos_emb

    config = transformers.Qwen3NextConfig(hidden_size=32, num_attention_heads=2, head_dim=16,
                                          rope_parameters=dict(rope_type="default", rope_theta=1000.0,
                                                               partial_rotary_factor=0.25))
    q, k = torch.randn(1, 2, 6, 16), torch.randn(1, 2, 6, 16)
    positions = torch.arange(6)
    cos, sin = Qwen3NextRotaryEmbedding(config)(q, positions[None])
    want = apply_rotary_pos_emb(q, k, cos, sin)
    got = PartialRotaryEmbedding(16, 4, context_length=64, base=1000.0).apply(q, k, positions)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


@pytest.mark.parametrize("rotary_dim", [0, 9, 2.0, True])
def test_a_rotary_dim_outside_the_head_is_refused(rotary_dim):
    with pytest.raises(ValueError, match=r"rotary_dim must be an int in 1..head_dim=8"):
        PartialRotaryEmbedding(8, rotary_dim, context_length=16)


def test_heads_of_another_width_are_refused():
    rope = PartialRotaryEmbedding(8, 4, context_length=16)
    with pytest.raises(ValueError, match=r"q must have shape \(B, H, T, 8\), got \(1, 1, 2, 6\)"):
        rope.apply(torch.zeros(1, 1, 2, 6), torch.zeros(1, 1, 2, 8), torch.arange(2))
