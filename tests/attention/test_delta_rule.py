"""The gated delta rule: the chunked form against the recurrence (any chunk, any length, per head and per channel
decay), both against transformers' own Qwen3-Next and Kimi Linear reference functions, the state carried between
calls, the implicit attention matrix, and numbers worked by hand."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab.attention.delta_rule import (
    delta_rule_chunked,
    delta_rule_recurrent,
    delta_rule_weights,
    l2_normalise,
)


def inputs(b, h, t, d_k, d_v, per_channel, seed, dtype=torch.float32, strong=False):
    """Unit queries and keys, values of order 1, decays log α in [−2, 0] (or [−30, 0]: nearly everything forgotten
    within a token), steps β in (0, 1)."""
    g = torch.Generator().manual_seed(seed)
    q = l2_normalise(torch.randn(b, h, t, d_k, generator=g, dtype=dtype))
    k = l2_normalise(torch.randn(b, h, t, d_k, generator=g, dtype=dtype))
    v = torch.randn(b, h, t, d_v, generator=g, dtype=dtype)
    shape = (b, h, t, d_k) if per_channel else (b, h, t)
    log_decay = -torch.rand(shape, generator=g, dtype=dtype) * (30.0 if strong else 2.0)
    beta = torch.rand(b, h, t, generator=g, dtype=dtype)
    return q, k, v, log_decay, beta


@st.composite
def cases(draw):
    return dict(b=draw(st.integers(1, 2)), h=draw(st.integers(1, 3)), t=draw(st.integers(1, 70)),
                d_k=draw(st.sampled_from([1, 4, 8])), d_v=draw(st.sampled_from([1, 3, 8])),
                per_channel=draw(st.booleans()), strong=draw(st.booleans()), seed=draw(st.integers(0, 2**31 - 1)),
                chunk_size=draw(st.integers(1, 20) | st.sampled_from([64, 100])), start=draw(st.booleans()))


@given(cases())
def test_chunked_equals_the_recurrence(case):
    """Any chunk size, lengths that are and are not a multiple of it, from a zero state or a given one: outputs and
    final state within 1e-5 in float32."""
    q, k, v, log_decay, beta = inputs(case["b"], case["h"], case["t"], case["d_k"], case["d_v"],
                                      case["per_channel"], case["seed"], strong=case["strong"])
    state = torch.randn(case["b"], case["h"], case["d_k"], case["d_v"]) if case["start"] else None
    want, want_state = delta_rule_recurrent(q, k, v, log_decay, beta, state)
    got, got_state = delta_rule_chunked(q, k, v, log_decay, beta, state, chunk_size=case["chunk_size"])
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    torch.testing.assert_close(got_state, want_state, atol=1e-5, rtol=0)


@pytest.mark.parametrize("per_channel", [False, True])
def test_chunked_equals_the_recurrence_exactly_in_float64(per_channel):
    """The two are the same algebra: in float64 they agree to rounding (1e-12), so the 1e-5 above is float32's."""
    q, k, v, log_decay, beta = inputs(2, 2, 45, 6, 5, per_channel, 3, dtype=torch.float64)
    want = delta_rule_recurrent(q, k, v, log_decay, beta)
    for chunk in (1, 7, 16, 45, 64):
        got = delta_rule_chunked(q, k, v, log_decay, beta, chunk_size=chunk)
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("split", [1, 9, 16, 30])
def test_the_state_carries_a_sequence_on(per_channel, split):
    """The first ``split`` tokens, then the rest from the state they left: the whole sequence at once (what a
    decoding cache relies on), for both forms."""
    q, k, v, log_decay, beta = inputs(1, 2, 31, 4, 3, per_channel, 5)
    whole, final = delta_rule_recurrent(q, k, v, log_decay, beta)
    first = slice(0, split)
    rest = slice(split, None)
    for run in (delta_rule_recurrent, lambda *a: delta_rule_chunked(*a, chunk_size=8)):
        o1, s1 = run(q[:, :, first], k[:, :, first], v[:, :, first], log_decay[:, :, first], beta[:, :, first])
        o2, s2 = run(q[:, :, rest], k[:, :, rest], v[:, :, rest], log_decay[:, :, rest], beta[:, :, rest], s1)
        torch.testing.assert_close(torch.cat([o1, o2], dim=2), whole, atol=1e-5, rtol=0)
        torch.testing.assert_close(s2, final, atol=1e-5, rtol=0)


def test_numbers_worked_by_hand():
    """One head, d_k = 2, d_v = 1. Token 1: k = e₁, v = 3, β = 1, α = 1, so S = 3 e₁ᵀ and o = S q = 3 for q = e₁.
    Token 2: α = 0.5 halves S to 1.5 e₁ᵀ; the memory predicts 1.5 for k = e₁; β = 0.5 moves it half way to v = 5:
    1.5 + 0.5 · 3.5 = 3.25. The second channel was never written: a query e₂ reads 0."""
    e1, e2 = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    q = torch.stack([e1, e2])[None, None]
    k = torch.stack([e1, e1])[None, None]
    v = torch.tensor([[3.0], [5.0]])[None, None]
    log_decay = torch.log(torch.tensor([1.0, 0.5]))[None, None]
    beta = torch.tensor([1.0, 0.5])[None, None]
    for run in (delta_rule_recurrent, delta_rule_chunked):
        out, state = run(q, k, v, log_decay, beta)
        torch.testing.assert_close(out[0, 0, :, 0], torch.tensor([3.0, 0.0]))
        torch.testing.assert_close(state[0, 0], torch.tensor([[3.25], [0.0]]))  # Sᵀ: key channels in rows
        q2 = torch.stack([e1, e1])[None, None]
        torch.testing.assert_close(run(q2, k, v, log_decay, beta)[0][0, 0, :, 0], torch.tensor([3.0, 3.25]))


@pytest.mark.parametrize("per_channel", [False, True])
def test_the_implicit_attention_is_the_map_from_values_to_outputs(per_channel):
    """o = W v from a zero state, W lower triangular (no future token reaches an output), rows not summing to 1."""
    q, k, v, log_decay, beta = inputs(2, 3, 20, 4, 5, per_channel, 7)
    weights = delta_rule_weights(q, k, log_decay, beta)
    assert weights.shape == (2, 3, 20, 20)
    torch.testing.assert_close(weights @ v, delta_rule_recurrent(q, k, v, log_decay, beta)[0], atol=1e-5, rtol=0)
    assert torch.equal(weights.triu(1), torch.zeros_like(weights))
    assert not torch.allclose(weights.sum(-1), torch.ones(2, 3, 20))


def test_equals_transformers_qwen3_next_reference_functions():
    """transformers' own torch forms of the rule (their inputs (B, T, H, d); q and k normalised inside, q scaled by
    1/√d_k; key heads repeated over the value heads)."""
    pytest.importorskip("transformers")
    from transformers.models.qwen3_next import modeling_qwen3_next as hf

    g = torch.Generator().manual_seed(1)
    b, t, hk, hv, d_k, d_v = 2, 70, 2, 4, 8, 6
    q, k = torch.randn(2, b, t, hk, d_k, generator=g)
    v = torch.randn(b, t, hv, d_v, generator=g)
    log_decay, beta = -torch.rand(b, t, hv, generator=g) * 3, torch.rand(b, t, hv, generator=g)
    ref, ref_state = hf.torch_chunk_gated_delta_rule(q, k, v, log_decay, beta, output_final_state=True,
                                                     use_qk_l2norm_in_kernel=True)
    ref_step, _ = hf.torch_recurrent_gated_delta_rule(q, k, v, log_decay, beta, output_final_state=True,
                                                      use_qk_l2norm_in_kernel=True)
    heads = lambda x: x.transpose(1, 2).repeat_interleave(hv // hk, dim=1)  # noqa: E731
    ours_q, ours_k = l2_normalise(heads(q)) * d_k**-0.5, l2_normalise(heads(k))
    args = (ours_q, ours_k, v.transpose(1, 2), log_decay.transpose(1, 2), beta.transpose(1, 2))
    for out, state in (delta_rule_chunked(*args), delta_rule_recurrent(*args)):
        torch.testing.assert_close(out.transpose(1, 2), ref, atol=1e-5, rtol=0)
        torch.testing.assert_close(out.transpose(1, 2), ref_step, atol=1e-5, rtol=0)
        torch.testing.assert_close(state, ref_state, atol=1e-5, rtol=0)


def test_per_channel_equals_transformers_kimi_reference_functions():
    pytest.importorskip("transformers")
    from transformers.models.kimi_linear import modeling_kimi_linear as hf

    g = torch.Generator().manual_seed(2)
    b, t, h, d = 2, 67, 3, 8
    q, k, v = torch.randn(3, b, t, h, d, generator=g)
    log_decay, beta = -torch.rand(b, t, h, d, generator=g) * 3, torch.rand(b, t, h, generator=g)
    ref, ref_state = hf.chunk_kimi_delta_attention(q, k, v, log_decay, beta, output_final_state=True,
                                                   use_qk_l2norm_in_kernel=True)
    step, _ = hf.recurrent_kimi_delta_attention(q, k, v, log_decay, beta, None, True, use_qk_l2norm_in_kernel=True)
    args = (l2_normalise(q.transpose(1, 2)) * d**-0.5, l2_normalise(k.transpose(1, 2)), v.transpose(1, 2),
            log_decay.transpose(1, 2), beta.transpose(1, 2))
    for out, state in (delta_rule_chunked(*args, chunk_size=16), delta_rule_recurrent(*args)):
        torch.testing.assert_close(out.transpose(1, 2), ref, atol=1e-5, rtol=0)
        torch.testing.assert_close(out.transpose(1, 2), step, atol=1e-5, rtol=0)
        torch.testing.assert_close(state, ref_state, atol=1e-5, rtol=0)


@pytest.mark.parametrize("bad, message", [
    (dict(beta=torch.rand(1, 2, 4)), r"beta must be \(B, H, T\) = \(1, 2, 5\), got \(1, 2, 4\)"),
    (dict(log_decay=torch.zeros(1, 2, 5, 3)), r"log_decay must be \(B, H, T\) .* got \(1, 2, 5, 3\)"),
    (dict(v=torch.rand(1, 2, 4, 3)), r"q and k must be \(B, H, T, d_k\) and v \(B, H, T, d_v\)"),
    (dict(state=torch.zeros(1, 2, 3, 4)), r"state must be \(B, H, d_k, d_v\) = \(1, 2, 4, 3\), got \(1, 2, 3, 4\)"),
    (dict(chunk_size=0), r"chunk_size must be an int >= 1, got 0"),
])
def test_bad_input_is_one_line_naming_it(bad, message):
    args = dict(q=torch.rand(1, 2, 5, 4), k=torch.rand(1, 2, 5, 4), v=torch.rand(1, 2, 5, 3),
                log_decay=torch.zeros(1, 2, 5), beta=torch.rand(1, 2, 5), state=None)
    chunk = bad.pop("chunk_size", 64)
    with pytest.raises(ValueError, match=message):
        delta_rule_chunked(**{**args, **bad}, chunk_size=chunk)
