"""The rolling cache of a sliding-window layer: the last ``window`` positions in a ring, whatever the length; a
model decoding with it computes what the whole sequence computes with the window mask."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.models import KVCache, LayerKVCache, ModernDecoder, ModernDecoderConfig, RollingLayerKVCache


def windowed(window, context_length=8, seed=0):
    torch.manual_seed(seed)
    config = ModernDecoderConfig(vocab_size=40, context_length=context_length, d_model=32, num_layers=2,
                                 num_heads=4, num_kv_heads=2, d_ff=40, sliding_window=window)
    model = ModernDecoder(config).eval()
    with torch.no_grad():  # weights of order 1: a wrong key could not hide in near-equal logits
        for p in model.parameters():
            p.copy_(torch.randn_like(p) / 32**0.5 if p.dim() > 1 else 1 + 0.2 * torch.randn_like(p))
    return model


def test_a_window_layer_gets_a_rolling_cache_of_its_window():
    cache = windowed(3).new_cache(2)
    assert all(isinstance(layer, RollingLayerKVCache) for layer in cache.layers)
    assert cache[0].keys.shape == (2, 2, 3, 8) and cache.context_length is None
    assert all(isinstance(layer, LayerKVCache) for layer in windowed(None).new_cache(2).layers)


def test_the_ring_keeps_the_last_window_positions():
    """Keys whose every entry is their position: after each update, the ring holds exactly the last ``window``."""
    layer = RollingLayerKVCache(1, 1, 4, 2, torch.float32, None)
    for t in (3, 1, 1, 6, 1, 1, 2):
        start = layer.length
        pos = torch.arange(start, start + t, dtype=torch.float32)
        keys, _ = layer.update(pos.view(1, 1, t, 1).expand(1, 1, t, 2), pos.view(1, 1, t, 1).expand(1, 1, t, 2))
        kept = sorted(layer.keys[0, 0, : min(layer.length, 4), 0].tolist())
        assert kept == list(range(max(0, layer.length - 4), layer.length))
        assert layer.returned_positions().tolist() == keys[0, 0, :, 0].long().tolist()  # what it says it returned
    assert layer.keys.shape[2] == 4 and layer.length == 15


@settings(max_examples=25, deadline=None)
@given(window=st.integers(1, 6), chunks=st.lists(st.integers(1, 5), min_size=1, max_size=6),
       pad=st.integers(0, 4), seed=st.integers(0, 3))
def test_cached_logits_equal_the_whole_sequence_with_the_window_mask(window, chunks, pad, seed):
    """Any window, the sequence fed in any chunks (prompt, single tokens, more chunks), one row left-padded, past
    context_length (8): every cached logit = the one-pass forward's, to 1e-5."""
    model = windowed(window, seed=seed)
    t = sum(chunks) + 1
    ids = torch.randint(1, 40, (2, t), generator=torch.Generator().manual_seed(seed))
    mask = torch.ones(2, t, dtype=torch.long)
    mask[1, :pad] = 0
    with torch.no_grad():
        full = model(ids, attention_mask=mask).logits
        cache, start, steps = model.new_cache(2), 0, []
        for size in [*chunks, 1]:
            steps.append(model(ids[:, start : start + size], attention_mask=mask[:, : start + size],
                               kv_cache=cache).logits)
            start += size
    real = mask.bool()
    torch.testing.assert_close(torch.cat(steps, 1)[real], full[real], atol=1e-5, rtol=0)
    assert cache[0].keys.shape[2] == window  # bounded by the window, whatever the length


def test_memory_is_bounded_by_the_window_at_any_length():
    model = windowed(4)
    cache = model.new_cache(1)
    sizes = []
    with torch.no_grad():
        model(torch.randint(0, 40, (1, 5)), kv_cache=cache)
        for _ in range(60):  # 8 times the context_length
            model(torch.randint(0, 40, (1, 1)), kv_cache=cache)
            sizes.append(cache.nbytes)
    c = model.config
    assert set(sizes) == {2 * c.num_layers * 1 * c.num_kv_heads * 4 * c.head_dim * 4} and cache.length == 65
    full = windowed(None).new_cache(1)
    with torch.no_grad():
        windowed(None)(torch.randint(0, 40, (1, 65)), kv_cache=full)
    assert full.nbytes >= 65 / 4 * cache.nbytes  # the full cache grows with the sequence


def test_beams_follow_their_rows():
    cache = KVCache(1, 2, 1, None, 2, windows=[3])
    cache[0].update(torch.arange(2.0).view(2, 1, 1, 1).expand(2, 1, 5, 2).contiguous(), torch.zeros(2, 1, 5, 2))
    cache.reorder(torch.tensor([1, 1]))
    assert cache[0].keys[:, 0, :, 0].tolist() == [[1.0] * 3, [1.0] * 3]


def test_bad_input():
    layer = RollingLayerKVCache(1, 2, 4, 3, torch.float32, None)
    with pytest.raises(ValueError, match=r"RollingLayerKVCache: key/value must have shape .* \(1, 2, T, 3\)"):
        layer.update(torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4))
    layer.update(torch.zeros(1, 2, 1, 3), torch.zeros(1, 2, 1, 3))
    with pytest.raises(ValueError, match=r"holds torch.float32 keys, got torch.bfloat16"):
        layer.update(torch.zeros(1, 2, 1, 3, dtype=torch.bfloat16), torch.zeros(1, 2, 1, 3, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"sliding_window=9 is wider than context_length=8"):
        windowed(9)
