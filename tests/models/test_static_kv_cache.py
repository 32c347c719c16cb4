"""The static KV cache and decode_step (GPT's and ModernDecoder's, the same LanguageModel): equal to the dynamic
cache, in float32 and in bfloat16."""

import pytest
import torch

from attnlab.models import GPT, GPTConfig, ModernDecoder, ModernDecoderConfig, StaticKVCache


def model(ctx=40, **kw):
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=61, context_length=ctx, d_model=32, num_layers=2, num_heads=4, qkv_bias=True, **kw)
    return GPT(config).eval()


def teacher_forced(m, seq, steps, autocast=None):
    """Logits of decode_step (static cache) and of forward with a KVCache, step by step on the same tokens."""
    import contextlib

    ctx = torch.autocast("cpu", autocast) if autocast else contextlib.nullcontext()
    pairs = []
    with torch.no_grad(), ctx:
        static, dynamic = StaticKVCache.for_model(m, seq.shape[0]), m.new_cache(seq.shape[0])
        a, b = m.decode_step(seq, static), m(seq, kv_cache=dynamic).logits[:, -1]
        for _ in range(steps):
            pairs.append((a, b))
            nxt = b.argmax(-1, keepdim=True)
            a, b = m.decode_step(nxt, static), m(nxt, kv_cache=dynamic).logits[:, -1]
    return pairs, static, dynamic


def modern(ctx=40, **kw):
    torch.manual_seed(0)
    config = ModernDecoderConfig(vocab_size=61, context_length=ctx, d_model=32, num_layers=2, num_heads=4,
                                 num_kv_heads=2, **kw)
    return ModernDecoder(config).eval()


@pytest.mark.parametrize("make", [model, modern, lambda: modern(sliding_window=5)], ids=["gpt", "modern", "window"])
def test_decode_step_equals_forward_with_a_kv_cache(make):
    pairs, static, dynamic = teacher_forced(make(), torch.randint(0, 61, (3, 7)), 30)
    for a, b in pairs:
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)  # only the masked, zero slots differ: 1e-7 here
    assert int(static.position) == dynamic.length == 37


@pytest.mark.parametrize("how", ["autocast", "cast"])
def test_decode_step_in_bfloat16_stays_within_bfloat16_rounding(how):
    # under autocast the cache takes bfloat16 (the compute dtype), not the weights' float32; cast, the same
    m = model()
    if how == "cast":
        m = m.to(torch.bfloat16)
    pairs, static, dynamic = teacher_forced(m, torch.randint(0, 61, (2, 5)), 12,
                                            autocast=torch.bfloat16 if how == "autocast" else None)
    assert static.dtype == dynamic[0].keys.dtype == torch.bfloat16
    scale = max(b.abs().max().item() for _, b in pairs)
    for a, b in pairs:  # bf16 keeps 8 bits: a few units of 2⁻⁸ of the logits' size
        torch.testing.assert_close(a.float(), b.float(), atol=4 * 2**-8 * scale, rtol=0)


def test_the_mask_hides_unfilled_slots_and_the_future():
    cache = StaticKVCache(1, batch=1, num_heads=1, context_length=6, head_dim=2)
    cache.advance(3)  # positions 0..2 are filled; the next two queries sit at 3 and 4
    assert cache[0].attn_mask(2, is_causal=True).tolist() == [[True] * 4 + [False] * 2, [True] * 5 + [False]]
    assert cache[0].attn_mask(2, is_causal=False).tolist() == [True] * 5 + [False]
    assert cache[0].attn_mask(2, is_causal=True, window=2).tolist() == [[False, False, True, True, False, False],
                                                                        [False, False, False, True, True, False]]
    assert cache.positions(2).tolist() == [3, 4]


def test_update_writes_at_the_position_and_returns_the_whole_buffers():
    cache = StaticKVCache(1, batch=1, num_heads=1, context_length=5, head_dim=2)
    cache.advance(2)
    k = torch.ones(1, 1, 2, 2)
    keys, values = cache[0].update(k, 2 * k)
    assert keys.shape == (1, 1, 5, 2) and keys.data_ptr() == cache[0].keys.data_ptr()
    assert keys[0, 0, :, 0].tolist() == [0, 0, 1, 1, 0] and values[0, 0, :, 0].tolist() == [0, 0, 2, 2, 0]


def test_reset_starts_a_new_sequence_in_the_same_buffers():
    m = model()
    cache = StaticKVCache.for_model(m, 1)
    prompt = torch.randint(0, 61, (1, 6))
    with torch.no_grad():
        first = m.decode_step(prompt, cache)
        m.decode_step(torch.randint(0, 61, (1, 9)), cache)  # more, then start over
        cache.reset()
        torch.testing.assert_close(m.decode_step(prompt, cache), first, atol=0, rtol=0)


@pytest.mark.parametrize(("key", "message"), [
    (torch.zeros(1, 2, 1, 8), r"StaticLayerKVCache: key/value must have shape \(B, H, T, head_dim\) = "
                              r"\(1, 4, T, 8\), got \(1, 2, 1, 8\) and \(1, 2, 1, 8\)"),
    (torch.zeros(1, 4, 1, 8, dtype=torch.bfloat16), r"StaticLayerKVCache: holds torch.float32, got keys of "
                                                    r"torch.bfloat16; make the cache where the model computes"),
])
def test_bad_keys_are_named(key, message):
    cache = StaticKVCache(1, batch=1, num_heads=4, context_length=4, head_dim=8)
    with pytest.raises(ValueError, match=message):
        cache[0].update(key, key)
