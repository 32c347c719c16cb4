import doctest
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnlab.layers.rotary as rotary_module
from attnlab.layers import RopeScaling, RotaryEmbedding, apply_rotary

HEAD_DIM, CONTEXT = 16, 32
# (our scaling, transformers' rope_parameters, base): llama3 with original_context_length 64 and base 500000 puts
# head_dim 16's wavelengths (6.3, 32, 167, ...) in all three bands: kept (< 64/4), blended, divided (> 64/1)
SCALINGS = {
    "none": (None, {"rope_type": "default"}, 10000.0),
    "linear": ({"type": "linear", "factor": 3.0}, {"rope_type": "linear", "factor": 3.0}, 10000.0),
    "dynamic": ({"type": "dynamic", "factor": 2.0}, {"rope_type": "dynamic", "factor": 2.0}, 10000.0),
    # YaRN stretching 8 trained positions 4 times: head_dim 16's ramp runs over pairs 0-2 (fast, kept) to 8
    "yarn": ({"type": "yarn", "factor": 4.0, "original_context_length": 8},
             {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8}, 10000.0),
    "llama3": (
        {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_context_length": 64},
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_max_position_embeddings": 64},
        500000.0,
    ),
}


def hf_rope(rope_parameters: dict, base: float):
    """transformers' LlamaRotaryEmbedding and apply_rotary_pos_emb, from a small LlamaConfig."""
    transformers = pytest.importorskip("transformers", minversion="5.0")  # 5.x: rope_parameters
    from transformers.models.llama import modeling_llama

    config = transformers.LlamaConfig(hidden_size=2 * HEAD_DIM, num_attention_heads=2, head_dim=HEAD_DIM,
                                      max_position_embeddings=CONTEXT,
                                      rope_parameters={**rope_parameters, "rope_theta": base})
    return modeling_llama.LlamaRotaryEmbedding(config), modeling_llama.apply_rotary_pos_emb


@pytest.mark.parametrize("name", list(SCALINGS))
@pytest.mark.parametrize("positions", [
    torch.arange(10)[None],                                         # prefill, inside context_length
    torch.stack([torch.arange(40, 50), torch.arange(90, 100)]),     # two sequences, beyond context_length
])
def test_equals_transformers_llama(name, positions):
    scaling, rope_parameters, base = SCALINGS[name]
    hf_embedding, hf_apply = hf_rope(rope_parameters, base)  # a fresh one: transformers' dynamic RoPE keeps state
    b, t = positions.shape
    q, k = torch.randn(b, 4, t, HEAD_DIM), torch.randn(b, 2, t, HEAD_DIM)  # 2 KV heads: rotation is per head
    cos_ref, sin_ref = hf_embedding(q, positions)
    q_ref, k_ref = hf_apply(q, k, cos_ref, sin_ref)
    rope = RotaryEmbedding(HEAD_DIM, CONTEXT, base=base, scaling=scaling)
    cos, sin = rope.cos_sin(positions)
    torch.testing.assert_close(cos, cos_ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(sin, sin_ref, atol=1e-6, rtol=0)
    q_rot, k_rot = rope.apply(q, k, positions)
    torch.testing.assert_close(q_rot, q_ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(k_rot, k_ref, atol=1e-6, rtol=0)
    # the scaling must change something wherever it applies (else this test could pass with it ignored)
    plain_cos, _ = RotaryEmbedding(HEAD_DIM, CONTEXT, base=base).cos_sin(positions)
    changed = name in ("linear", "yarn", "llama3") or (name == "dynamic" and int(positions.max()) >= CONTEXT)
    assert changed == (not torch.allclose(cos, plain_cos, atol=1e-3))


def test_llama3_bands():
    # kept where the wavelength is < 64 / 4, divided by 8 where > 64 / 1, blended (strictly between) in the middle
    s = RopeScaling("llama3", factor=8.0, original_context_length=64)
    plain = RotaryEmbedding(HEAD_DIM, CONTEXT, base=500000.0).inv_freq()
    ratio = (RotaryEmbedding(HEAD_DIM, CONTEXT, base=500000.0, scaling=s).inv_freq() / plain).tolist()
    wavelength = (2 * math.pi / plain).tolist()
    for r, w in zip(ratio, wavelength, strict=True):
        if w < 16:
            assert r == pytest.approx(1.0)
        elif w > 64:
            assert r == pytest.approx(1 / 8)
        else:
            assert 1 / 8 < r < 1
    assert {w < 16 for w in wavelength} == {True, False} and any(16 <= w <= 64 for w in wavelength)


def test_dynamic_formula_by_hand():
    # L = 48 > context 32, factor 2: s = 2 · 48/32 − 1 = 2, base' = 10000 · 2^(16/14); θ_1 = base'^(-2/16)
    rope = RotaryEmbedding(HEAD_DIM, CONTEXT, scaling=RopeScaling("dynamic", factor=2.0))
    expected = (10000.0 * 2.0 ** (16 / 14)) ** (-2 / 16)
    assert rope.inv_freq(seq_len=48)[1].item() == pytest.approx(expected, rel=1e-6)
    assert torch.equal(rope.inv_freq(seq_len=CONTEXT), RotaryEmbedding(HEAD_DIM, CONTEXT).inv_freq())


@pytest.mark.parametrize("name", ["dynamic", "yarn"])
def test_frequencies_are_transformers_to_the_last_bit(name):
    """Dynamic NTK at every length past the context (transformers computes the stretched base in float32 when its
    length grows), and YaRN's bands: equal, not merely close."""
    scaling, rope_parameters, base = SCALINGS[name]
    hf_embedding, _ = hf_rope(rope_parameters, base)
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rope = RotaryEmbedding(HEAD_DIM, CONTEXT, base=base, scaling=scaling)
    for length in (CONTEXT + 1, 47, 100, 1000) if name == "dynamic" else (None,):
        want, factor = ROPE_INIT_FUNCTIONS[name](hf_embedding.config, None,
                                                 seq_len=None if length is None else torch.tensor(length))
        assert torch.equal(rope.inv_freq(length), want) and rope.attention_factor == factor


def test_yarn_formula_by_hand():
    # original 8, factor 4, base 10⁴, d 16: pair i turns r_i = 8 · 10⁴^(−i/8) / 2π times over the trained length;
    # the ramp runs from floor(d·ln(8/(2π·32))/(2 ln 10⁴)) = floor(−2.80) -> 0 to ceil(d·ln(8/2π)/(2 ln 10⁴)) = 1
    s = RopeScaling("yarn", factor=4.0, original_context_length=8)
    rope = RotaryEmbedding(HEAD_DIM, CONTEXT, scaling=s)
    plain = RotaryEmbedding(HEAD_DIM, CONTEXT).inv_freq()
    torch.testing.assert_close(rope.inv_freq()[0], plain[0], atol=0, rtol=1e-6)  # pair 0: kept
    torch.testing.assert_close(rope.inv_freq()[1:], plain[1:] / 4, atol=0, rtol=1e-6)  # the rest: divided
    assert rope.attention_factor == pytest.approx(0.1 * math.log(4.0) + 1)


def test_hand_worked_rotation():
    # head_dim 2: one pair, θ_0 = 1, so position m turns (x, y) by m radians
    rope = RotaryEmbedding(head_dim=2, context_length=8)
    x = torch.tensor([1.0, 0.0]).view(1, 1, 1, 2)
    for m in (0, 1, 3):
        out, _ = rope.apply(x, x, torch.tensor([m]))
        torch.testing.assert_close(out.flatten(), torch.tensor([math.cos(m), math.sin(m)]), atol=1e-6, rtol=0)


def unit_vectors(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, HEAD_DIM, generator=g)
    return (q / q.norm()).view(1, 1, 1, HEAD_DIM), (k / k.norm()).view(1, 1, 1, HEAD_DIM)


@settings(max_examples=30)
@given(m=st.integers(0, 64), n=st.integers(0, 64), shift=st.integers(0, 64), seed=st.integers(0, 2**31 - 1))
def test_score_depends_only_on_relative_position(m, n, shift, seed):
    rope = RotaryEmbedding(HEAD_DIM, CONTEXT)
    q, k = unit_vectors(seed)

    def score(a: int, b: int) -> float:
        q_rot, _ = rope.apply(q, q, torch.tensor([a]))
        k_rot, _ = rope.apply(k, k, torch.tensor([b]))
        return float((q_rot * k_rot).sum())

    # unit vectors; each angle a float32 product m·θ <= 128, off by at most half an ulp (3.8e-6 rad): <= 1.6e-5 in all
    assert score(m + shift, n + shift) == pytest.approx(score(m, n), abs=2e-5)


def test_score_changes_with_relative_position():
    q, k = unit_vectors(0)
    rope = RotaryEmbedding(HEAD_DIM, CONTEXT)
    scores = [float((rope.apply(q, k, torch.tensor([m]))[0] * k).sum()) for m in range(4)]  # key at position 0
    assert len({round(s, 4) for s in scores}) == 4


@settings(max_examples=20)
@given(t=st.integers(1, 8), start=st.integers(0, 100_000), seed=st.integers(0, 2**31 - 1))
def test_rotation_preserves_norms(t, start, seed):
    x = torch.randn(2, 3, t, HEAD_DIM, generator=torch.Generator().manual_seed(seed))
    out = apply_rotary(x, *RotaryEmbedding(HEAD_DIM, CONTEXT).cos_sin(torch.arange(start, start + t)))
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), rtol=1e-5, atol=0)  # cos² + sin² = 1 in float32


def test_bf16_in_bf16_out_like_transformers():
    positions = torch.arange(20, 36)[None]
    q, k = torch.randn(1, 2, 16, HEAD_DIM).bfloat16(), torch.randn(1, 2, 16, HEAD_DIM).bfloat16()
    q_rot, k_rot = RotaryEmbedding(HEAD_DIM, CONTEXT).apply(q, k, positions)
    assert q_rot.dtype == k_rot.dtype == torch.bfloat16
    hf_embedding, hf_apply = hf_rope({"rope_type": "default"}, 10000.0)
    q_ref, k_ref = hf_apply(q, k, *hf_embedding(q, positions))  # float32 angles, cos/sin cast to bf16 at the end
    torch.testing.assert_close(q_rot, q_ref, atol=0, rtol=0)
    torch.testing.assert_close(k_rot, k_ref, atol=0, rtol=0)


def test_positions_per_sequence_equal_one_at_a_time():
    rope = RotaryEmbedding(HEAD_DIM, CONTEXT)
    x = torch.randn(2, 3, 4, HEAD_DIM)
    positions = torch.tensor([[0, 1, 2, 3], [7, 8, 9, 10]])
    both = apply_rotary(x, *rope.cos_sin(positions))
    for b in range(2):
        torch.testing.assert_close(both[b : b + 1], apply_rotary(x[b : b + 1], *rope.cos_sin(positions[b])))


def test_scaling_from_transformers_dict():
    llama31 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192, "rope_type": "llama3"}
    assert RopeScaling.from_dict(llama31) == RopeScaling("llama3", 8.0, 1.0, 4.0, 8192)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"head_dim": 7}, "head_dim must be even \\(features rotate in pairs\\), got 7"),
    ({"head_dim": 0}, "head_dim must be a positive int, got 0"),
    ({"context_length": 0}, "context_length must be a positive int, got 0"),
    ({"base": -1.0}, "base must be a finite number > 0, got -1.0"),
    ({"scaling": {"type": "proportional", "factor": 4.0}},
     "type must be one of 'linear', 'dynamic', 'yarn', 'llama3', 'longrope', got 'proportional'"),
    ({"scaling": {"type": "linear", "factor": 0}}, "factor must be a finite number > 0, got 0"),
    ({"scaling": {"type": "linear", "factor": 2.0, "beta": 1}}, "unknown keys \\['beta'\\]"),
    ({"scaling": {"factor": 2.0}}, "needs 'type' and 'factor'"),
    ({"scaling": {"type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0}},
     "high_freq_factor > low_freq_factor"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RotaryEmbedding(**{"head_dim": HEAD_DIM, "context_length": CONTEXT, **kwargs})


def test_bad_inputs():
    rope = RotaryEmbedding(HEAD_DIM, CONTEXT)
    x = torch.randn(1, 2, 3, HEAD_DIM)
    with pytest.raises(TypeError, match=r"integer tensor, got dtype torch\.float32"):
        rope.cos_sin(torch.arange(3.0))
    with pytest.raises(ValueError, match=r"positions must have shape \(T,\) or \(B, T\), got \(1, 1, 3\)"):
        rope.cos_sin(torch.arange(3).view(1, 1, 3))
    with pytest.raises(ValueError, match=r"q must have shape \(B, H, T, 16\), got \(2, 3, 16\)"):
        rope.apply(x[0], x, torch.arange(3))
    with pytest.raises(ValueError, match=r"cos and sin must both have shape .* got cos \(4, 16\)"):
        apply_rotary(x, *rope.cos_sin(torch.arange(4)))
    with pytest.raises(TypeError, match="scaling must be a RopeScaling, a dict or None, got str"):
        RotaryEmbedding(HEAD_DIM, CONTEXT, scaling="linear")


def test_docstring_examples():
    assert doctest.testmod(rotary_module).failed == 0
