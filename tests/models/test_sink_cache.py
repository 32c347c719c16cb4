"""StreamingLLM's sink cache: the first ``sink_tokens`` positions and a sliding window, each key turned by RoPE to
its place in the cache.

The references are written here: the keys a layer hands out equal the unrotated keys rotated at their places now
(Hypothesis, every size, with and without a RoPE scaling); a one-layer model's logits at every step equal a fresh
forward over the tokens kept (sinks, then the window: exactly what the cache says the model sees), and its greedy
tokens those of that recomputation; a deeper model equals the plain cache while nothing is evicted. Memory stays
at ``sink_tokens + sliding_window`` positions at any length.
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.generation import GenerationConfig, generate
from attnlab.layers import RotaryEmbedding, apply_rotary
from attnlab.models import GPT, GPTConfig, ModernDecoder, ModernDecoderConfig, SinkKVCache
from attnlab.models.caches import SinkLayerKVCache

GREEDY = GenerationConfig(temperature=0)
SCALINGS = [None, {"type": "linear", "factor": 2.0},
            {"type": "yarn", "factor": 4.0, "original_context_length": 8}]  # YaRN: cos and sin × its factor


def model(num_layers=1, **kw):
    torch.manual_seed(0)
    config = ModernDecoderConfig(**{**dict(vocab_size=50, context_length=24, d_model=32, num_layers=num_layers,
                                           num_heads=4, num_kv_heads=2, d_ff=40), **kw})
    m = ModernDecoder(config).eval()
    with torch.no_grad():  # weights of order 1, so that a difference cannot hide in near-zero logits
        for p in m.parameters():
            p.copy_(torch.randn_like(p) / 32**0.5 if p.dim() > 1 else 1 + 0.2 * torch.randn_like(p))
    return m


def kept(t: int, sinks: int, window: int) -> list[int]:
    """The positions a token at position ``t`` sees: the first ``sinks``, then the last ``window`` up to t."""
    return list(range(min(sinks, t + 1))) + list(range(max(sinks, t - window + 1), t + 1))


@settings(max_examples=40, deadline=None)
@given(sinks=st.integers(0, 4), window=st.integers(1, 6), prompt=st.integers(1, 10), steps=st.integers(0, 20),
       scaling=st.sampled_from(SCALINGS))
def test_keys_are_turned_to_their_places_in_the_cache(sinks, window, prompt, steps, scaling):
    rope = RotaryEmbedding(8, 16, scaling=scaling)
    prompt = min(prompt, sinks + window)
    raw = torch.randn(1, 2, prompt + steps, 8, generator=torch.Generator().manual_seed(prompt * 31 + steps))
    cache = SinkLayerKVCache(1, 2, sinks, window, 8, rope, torch.float32, "cpu")
    chunks = [(0, prompt)] + [(t, t + 1) for t in range(prompt, prompt + steps)]
    for start, end in chunks:
        places = cache.positions(end - start)
        cos, sin = rope.cos_sin(places)
        keys, values = cache.update(apply_rotary(raw[:, :, start:end], cos, sin), raw[:, :, start:end])
        seen = kept(end - 1, sinks, window)
        cos, sin = rope.cos_sin(torch.arange(len(seen)))  # each kept key at its place, as if consecutive
        torch.testing.assert_close(keys, apply_rotary(raw[:, :, seen], cos, sin), atol=1e-5, rtol=0)
        torch.testing.assert_close(values, raw[:, :, seen], atol=0, rtol=0)
        assert places[-1] == len(seen) - 1 and cache.length == end


@pytest.mark.parametrize("scaling", SCALINGS)
def test_one_layer_equals_a_fresh_forward_over_the_kept_tokens(scaling):
    """A prompt of 9 over 2 sinks and a window of 5 (it does not fit: fed token by token past 7), then 30 steps,
    eight times the window; the cache stays at 7 positions."""
    m, sinks, window = model(rope_scaling=scaling), 2, 5
    ids = torch.randint(0, 50, (2, 40), generator=torch.Generator().manual_seed(1))
    cache = SinkKVCache.for_model(m, 2, sink_tokens=sinks, sliding_window=window)
    with torch.no_grad():
        got = [m(ids[:, :7], kv_cache=cache).logits]
        got += [m(ids[:, t : t + 1], kv_cache=cache).logits for t in range(7, 40)]
        want = [m(ids[:, kept(t, sinks, window)]).logits[:, -1] for t in range(40)]
    torch.testing.assert_close(torch.cat(got, 1), torch.stack(want, 1), atol=1e-5, rtol=0)
    c = m.config
    assert cache.length == 40 and cache.nbytes == 2 * c.num_layers * 2 * c.num_kv_heads * 7 * c.head_dim * 4
    sink = SinkKVCache.for_model(m, 2, sink_tokens=sinks, sliding_window=window)
    out = generate(m, ids[:, :9], 30, GREEDY, cache=sink)
    seq = ids[:, :9]
    with torch.no_grad():
        for _ in range(30):  # greedy, each token from a fresh forward over what the cache keeps
            nxt = m(seq[:, kept(seq.shape[1] - 1, sinks, window)]).logits[:, -1].argmax(-1)
            seq = torch.cat([seq, nxt[:, None]], 1)
    assert torch.equal(out, seq)


def test_a_deep_model_equals_the_plain_cache_until_the_window_slides():
    m = model(num_layers=3)
    ids = torch.randint(0, 50, (1, 12), generator=torch.Generator().manual_seed(2))

    def sink():
        return SinkKVCache.for_model(m, 1, sink_tokens=4, sliding_window=8)

    assert torch.equal(generate(m, ids[:, :4], 8, GREEDY, cache=sink()), generate(m, ids[:, :4], 8, GREEDY))
    out = generate(m, ids[:, :4], 40, GREEDY, cache=sink())
    assert out.shape == (1, 44) and not torch.equal(out, generate(m, ids[:, :4], 40, GREEDY))


@pytest.mark.parametrize(("make", "kwargs", "match"), [
    (lambda: model(), dict(sink_tokens=-1, sliding_window=4),
     r"ModernDecoder: sink_tokens must be an int >= 0 .*got -1"),
    (lambda: model(), dict(sink_tokens=4), r"a sink cache needs sliding_window, an int >= 1 .*got None"),
    (lambda: model(), dict(sink_tokens=4, sliding_window=4, storage="int8"),
     r"ModernDecoder: a sink cache keeps 8 positions in the model's dtype; int8 storage is the dynamic cache's"),
    (lambda: GPT(GPTConfig(vocab_size=50, context_length=24, d_model=32, num_layers=1, num_heads=4)),
     dict(sink_tokens=4, sliding_window=4), r"GPT: a sink cache .* needs rotary positions"),
    (lambda: model(sliding_window=4), dict(sink_tokens=4, sliding_window=4),
     r"ModernDecoder: its layers have a sliding window of their own"),
    (lambda: model(rope_scaling={"type": "dynamic", "factor": 2.0}), dict(sink_tokens=4, sliding_window=4),
     r"ModernDecoder: dynamic scaling picks its frequencies from the length"),
])
def test_a_model_that_cannot_have_one_is_named(make, kwargs, match):
    with pytest.raises(ValueError, match=match):
        SinkKVCache.for_model(make(), 1, **kwargs)


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(config=GenerationConfig(use_cache=False)), r"cache: use_cache=False recomputes every step without a cache"),
    (dict(attention_mask=torch.tensor([[0, 1, 1]])), r"cache: a SinkKVCache keeps every row at the same places.*"
                                                     r"attention_mask"),
    (dict(config=GenerationConfig(compile=True)), r"cache: compile=True decodes with a StaticKVCache .*got a "
                                                  r"SinkKVCache"),
])
def test_generate_refuses_what_a_sink_cache_cannot_do(kwargs, match):
    m = model()
    with pytest.raises(ValueError, match=match):
        generate(m, torch.zeros(1, 3, dtype=torch.long), 3, cache=SinkKVCache.for_model(m, 1, sliding_window=4),
                 **kwargs)


def test_a_prompt_chunk_must_fit_its_places():
    m = model()
    cache = SinkKVCache.for_model(m, 1, sink_tokens=2, sliding_window=5)
    assert cache.capacity == 7 and cache.shape == m.cache_layout().shape and cache.rows == 1
    m(torch.zeros(1, 6, dtype=torch.long), kv_cache=cache)
    with pytest.raises(ValueError, match=r"3 new tokens after 6 do not fit its 7 places; feed them one by one"):
        m(torch.zeros(1, 3, dtype=torch.long), kv_cache=cache)


def test_under_bf16_autocast_the_cache_keeps_bf16_and_the_logits_stay_close():
    """The keys are turned in float32 and stored in the compute dtype: bf16 moves the logits by bf16's rounding
    only (≤ 3 % of the largest, as the plain cache under autocast), not by a wrong angle."""
    m = model(num_layers=2)
    ids = torch.randint(0, 50, (1, 30), generator=torch.Generator().manual_seed(3))

    def logits(**kind):
        cache = SinkKVCache.for_model(m, 1, **kind)
        with torch.no_grad():
            steps = [m(ids[:, :7], kv_cache=cache).logits]
            steps += [m(ids[:, t : t + 1], kv_cache=cache).logits for t in range(7, 30)]
        return torch.cat(steps, 1).float(), cache

    want, _ = logits(sink_tokens=2, sliding_window=5)
    with torch.autocast("cpu", torch.bfloat16):
        got, cache = logits(sink_tokens=2, sliding_window=5)
    assert cache[0].keys.dtype == torch.bfloat16
    torch.testing.assert_close(got, want, atol=0.03 * float(want.abs().max()), rtol=0)
