import pytest
import torch

from attnlab.attention import MultiHeadAttention
from attnlab.generation import generate, generate_stream
from attnlab.models import GPT, GPTConfig, KVCache


def test_mha_with_cache_in_chunks_equals_full():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 16, num_heads=4, qkv_bias=True).eval()
    x = torch.randn(2, 10, 16)
    full, w_full = mha(x, return_weights=True)
    cache = KVCache(1, batch=2, num_heads=4, context_length=10, head_dim=4)
    outs, start = [], 0
    for size in (3, 1, 4, 2):  # prefill, one token, a chunk, the rest
        out, w = mha(x[:, start : start + size], return_weights=True, kv_cache=cache[0])
        torch.testing.assert_close(w, w_full[:, :, start : start + size, : start + size], atol=1e-6, rtol=0)
        outs.append(out)
        start += size
        assert cache.length == start
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="exceed context_length=10"):
        mha(x[:, :1], kv_cache=cache[0])
    with pytest.raises(ValueError, match="cannot be combined"):
        mha(x[:, :1], attention_mask=torch.ones(2, 1, dtype=torch.long), kv_cache=cache[0])


def test_mha_still_equals_torch_multihead_attention():
    torch.manual_seed(0)
    ours = MultiHeadAttention(24, 24, num_heads=3, qkv_bias=True, is_causal=True).eval()
    ref = torch.nn.MultiheadAttention(24, 3, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.W_query.weight, ours.W_key.weight, ours.W_value.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.W_query.bias, ours.W_key.bias, ours.W_value.bias]))
        ref.out_proj.load_state_dict(ours.out_proj.state_dict())
    x = torch.randn(2, 6, 24)
    mask = torch.ones(6, 6, dtype=torch.bool).triu(1)
    want, want_w = ref(x, x, x, attn_mask=mask, average_attn_weights=False)
    got, got_w = ours(x, return_weights=True)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
    torch.testing.assert_close(got_w, want_w, atol=1e-6, rtol=0)


def model(ctx=80):
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=61, context_length=ctx, d_model=32, num_layers=2, num_heads=4, qkv_bias=True)
    return GPT(config).eval()


def test_cached_logits_equal_recomputation_over_64_steps():
    m = model()
    seq = torch.randint(0, 61, (2, 8))
    cache = m.new_cache(2)
    with torch.no_grad():
        logits = m(seq, kv_cache=cache).logits[:, -1]
        for _ in range(64):
            full = m(seq).logits[:, -1]
            torch.testing.assert_close(logits, full, atol=1e-5, rtol=0)
            nxt = full.argmax(-1, keepdim=True)
            seq = torch.cat([seq, nxt], 1)
            logits = m(nxt, kv_cache=cache).logits[:, -1]
    assert cache.length == 8 + 64


def test_greedy_tokens_identical_with_and_without_cache():
    m = model()
    prompt = torch.randint(0, 61, (3, 5))
    a = generate(m, prompt, 64, temperature=0)
    b = generate(m, prompt, 64, temperature=0, use_cache=False)
    assert a.shape == (3, 69)
    assert torch.equal(a, b)


def test_beyond_context_crops_and_recomputes():
    m = model(ctx=12)
    prompt = torch.randint(0, 61, (2, 7))
    a = generate(m, prompt, 30, temperature=0)
    b = generate(m, prompt, 30, temperature=0, use_cache=False)
    assert torch.equal(a, b)
    long_prompt = torch.randint(0, 61, (1, 20))  # longer than the context: only the last 12 tokens count
    c = generate(m, long_prompt, 5, temperature=0)
    d = generate(m, long_prompt[:, -12:], 5, temperature=0)
    assert torch.equal(c[:, 20:], d[:, 12:])


def test_sampling_reproducible_and_streamed():
    m = model()
    prompt = torch.randint(0, 61, (1, 4))
    a = generate(m, prompt, 20, temperature=0.9, top_k=10, generator=torch.Generator().manual_seed(3))
    b = generate(m, prompt, 20, temperature=0.9, top_k=10, generator=torch.Generator().manual_seed(3))
    streamed = list(generate_stream(m, prompt, 20, temperature=0.9, top_k=10,
                                      generator=torch.Generator().manual_seed(3)))
    assert torch.equal(a, b)
    assert torch.equal(torch.stack(streamed, 1), a[:, 4:])


def test_generate_restores_training_mode_and_validates():
    m = model().train()
    generate(m, torch.zeros(1, 2, dtype=torch.long), 3)
    assert m.training
    with pytest.raises(ValueError, match="top_p"):
        generate(m, torch.zeros(1, 2, dtype=torch.long), 3, top_p=1.5)
    with pytest.raises(ValueError, match="temperature"):
        generate(m, torch.zeros(1, 2, dtype=torch.long), 3, temperature=-1)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(m, torch.zeros(1, 2, dtype=torch.long), -3)
    with pytest.raises(ValueError, match="prompt"):
        generate(m, torch.zeros(1, 0, dtype=torch.long), 3)


def test_cache_rejects_wrong_shapes():
    cache = KVCache(2, batch=1, num_heads=2, context_length=4, head_dim=3)
    with pytest.raises(ValueError, match=r"\(1, 2, T, 3\)"):
        cache[0].update(torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4))
    cache[1].update(torch.zeros(1, 2, 4, 3), torch.zeros(1, 2, 4, 3))
    assert len(cache) == 2 and cache.layers[1].length == 4
    cache.reset()
    assert cache.length == 0 and cache.layers[1].length == 0


@pytest.mark.parametrize("positions_first", [False, True])
def test_the_buffers_grow_by_powers_of_two_and_keep_what_they_hold(positions_first):
    from attnlab.models import LayerKVCache

    layer = LayerKVCache(2, 3, context_length=40, head_dim=4, dtype=torch.float32, device=None,
                         positions_first=positions_first)
    assert layer.keys.shape == (2, 3, 16, 4) and layer.context_length == 40
    assert layer.storage.shape == ((16, 2, 2, 3, 4) if positions_first else (2, 2, 3, 16, 4))
    steps = [torch.randn(2, 3, t, 4) for t in (5, 12, 1, 20)]  # 5, 17, 18, 38 positions
    capacities = []
    for k in steps:
        keys, values = layer.update(k, 2 * k)
        capacities.append(layer.keys.shape[2])
    assert capacities == [16, 32, 32, 40]  # doubled to a power of two, never past context_length
    torch.testing.assert_close(keys, torch.cat(steps, dim=2), atol=0, rtol=0)  # nothing lost in the copies
    torch.testing.assert_close(values, 2 * torch.cat(steps, dim=2), atol=0, rtol=0)
    with pytest.raises(ValueError, match="38 \\+ 3 positions exceed context_length=40"):
        layer.update(torch.randn(2, 3, 3, 4), torch.randn(2, 3, 3, 4))


@pytest.mark.parametrize("positions_first", [False, True])  # rows first (a GPT's) or positions first (a search's)
@pytest.mark.parametrize("filled", [1, 6])  # of 8: the filled part gathered alone, or the whole buffer
@pytest.mark.parametrize("rows", [[2, 0, 0, 1], [1, 1, 0, 2, 2, 0, 1, 1]])  # a beam step; then more rows (beams)
def test_following_rows_gathers_keys_and_values_alike(rows, filled, positions_first):
    """Keys and values share one buffer: a reorder gathers both, by the same rows, and the filled positions only
    need to be right (what the attention reads); checked against indexing the tensors held before."""
    cache = KVCache(2, 4, num_heads=3, context_length=8, head_dim=5, positions_first=positions_first)
    g = torch.Generator().manual_seed(0)
    for layer in cache.layers:
        layer.update(torch.randn(4, 3, filled, 5, generator=g), torch.randn(4, 3, filled, 5, generator=g))
    before = [(layer.keys[:, :, :filled].clone(), layer.values[:, :, :filled].clone()) for layer in cache.layers]
    index = torch.tensor(rows)
    cache.reorder(index)
    for layer, (keys, values) in zip(cache.layers, before, strict=True):
        assert layer.keys.shape[0] == len(rows) and layer.length == filled
        torch.testing.assert_close(layer.keys[:, :, :filled], keys[index], atol=0, rtol=0)
        torch.testing.assert_close(layer.values[:, :, :filled], values[index], atol=0, rtol=0)
        key, value = layer.update(torch.ones(len(rows), 3, 1, 5), 2 * torch.ones(len(rows), 3, 1, 5))
        torch.testing.assert_close(key, torch.cat([keys[index], torch.ones(len(rows), 3, 1, 5)], 2), atol=0, rtol=0)
        torch.testing.assert_close(value, torch.cat([values[index], 2 * torch.ones(len(rows), 3, 1, 5)], 2),
                                   atol=0, rtol=0)
