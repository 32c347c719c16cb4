import pytest
import torch

from attnlab.attention import MultiHeadAttention
from attnlab.generation import GenerationConfig, generate, generate_stream
from attnlab.models import GPT, GPTConfig, KVCache, ModernDecoder, ModernDecoderConfig, SinkKVCache, StaticKVCache


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


GREEDY = GenerationConfig(temperature=0)
UNCACHED = GREEDY.replace(use_cache=False)  # the reference: the whole window recomputed at every step


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
    a = generate(m, prompt, 64, GREEDY)
    b = generate(m, prompt, 64, UNCACHED)
    assert a.shape == (3, 69)
    assert torch.equal(a, b)


def test_beyond_context_crops_and_recomputes():
    m = model(ctx=12)
    prompt = torch.randint(0, 61, (2, 7))
    a = generate(m, prompt, 30, GREEDY)
    b = generate(m, prompt, 30, UNCACHED)
    assert torch.equal(a, b)
    long_prompt = torch.randint(0, 61, (1, 20))  # longer than the context: only the last 12 tokens count
    c = generate(m, long_prompt, 5, GREEDY)
    d = generate(m, long_prompt[:, -12:], 5, GREEDY)
    assert torch.equal(c[:, 20:], d[:, 12:])


def test_sampling_reproducible_and_streamed():
    m = model()
    prompt = torch.randint(0, 61, (1, 4))

    def sampling():
        return GenerationConfig(temperature=0.9, top_k=10, generator=torch.Generator().manual_seed(3))

    a, b = generate(m, prompt, 20, sampling()), generate(m, prompt, 20, sampling())
    streamed = list(generate_stream(m, prompt, 20, sampling()))
    seeded = [generate(m, prompt, 20, GenerationConfig(temperature=0.9, top_k=10, seed=3)) for _ in range(2)]
    assert torch.equal(a, b)
    assert torch.equal(torch.stack(streamed, 1), a[:, 4:])
    assert torch.equal(seeded[0], seeded[1])  # a seed makes a fresh generator of its own at every call


def test_generate_restores_training_mode_and_validates():
    m = model().train()
    generate(m, torch.zeros(1, 2, dtype=torch.long), 3)
    assert m.training
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(m, torch.zeros(1, 2, dtype=torch.long), -3)
    with pytest.raises(ValueError, match="prompt"):
        generate(m, torch.zeros(1, 0, dtype=torch.long), 3)
    with pytest.raises(TypeError, match="config must be a GenerationConfig or None, got dict"):
        generate(m, torch.zeros(1, 2, dtype=torch.long), 3, {"temperature": 0})
    # the sampling options are checked when the config is made (tests/generation/test_config.py)


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


def gpt(d_model=32, num_layers=2, num_heads=4):
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=61, context_length=40, d_model=d_model, num_layers=num_layers,
                         num_heads=num_heads)).eval()


def modern(d_model=32, num_layers=2, num_kv_heads=4):
    torch.manual_seed(0)
    return ModernDecoder(ModernDecoderConfig(vocab_size=61, context_length=40, d_model=d_model, num_layers=num_layers,
                                             num_heads=4, num_kv_heads=num_kv_heads, d_ff=40)).eval()


def dynamic(m, b):
    return m.new_cache(b)


def int8(m, b):
    return KVCache.for_model(m, b, storage="int8")


def sink(m, b):
    return SinkKVCache.for_model(m, b, sink_tokens=2, sliding_window=8)


def static(m, b):
    return StaticKVCache.for_model(m, b)


# (how the cache is made, the model it decodes with, the config it needs); each kind made for another model
KINDS = {"dynamic": (dynamic, gpt, GenerationConfig(temperature=0)),
         "int8": (int8, gpt, GenerationConfig(temperature=0)),
         "sink": (sink, modern, GenerationConfig(temperature=0)),
         "static": (static, gpt, GenerationConfig(temperature=0, compile=True))}


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(("other", "mine"), [
    (dict(num_layers=3), "num_layers=3, num_heads=4, head_dim=8"),
    (dict(d_model=64), "num_layers=2, num_heads=4, head_dim=16"),
    ("heads", None),
], ids=["layers", "head_dim", "heads"])
def test_a_cache_made_for_another_model_is_refused_naming_both(kind, other, mine):
    """The models all have 2 layers of 4 key/value heads of 8 dimensions; the cache was made for another."""
    make, family, config = KINDS[kind]
    if other == "heads":  # other key/value heads of the same size: GPT's heads, ModernDecoder's key/value heads
        other, heads = (dict(d_model=64, num_heads=8), 8) if family is gpt else (dict(num_kv_heads=2), 2)
        mine = f"num_layers=2, num_heads={heads}, head_dim=8"
    cache, model = make(family(**other), 1), family()
    with pytest.raises(ValueError, match=rf"cache: this {type(cache).__name__} was made for {mine}; "
                                         rf"{type(model).__name__} has num_layers=2, num_heads=4, head_dim=8: make "
                                         r"the cache for the model it decodes with"):
        generate(model, torch.zeros(1, 3, dtype=torch.long), 4, config, cache=cache)


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_cache_for_another_batch_is_refused(kind):
    make, family, config = KINDS[kind]
    model = family()
    cache = make(model, 2)
    with pytest.raises(ValueError, match=rf"cache: this {type(cache).__name__} holds 2 rows; the prompt has 3: make "
                                         r"the cache for the batch it decodes"):
        generate(model, torch.zeros(3, 4, dtype=torch.long), 4, config, cache=cache)


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_cache_that_holds_positions_is_refused_until_reset(kind):
    make, family, config = KINDS[kind]
    model, prompt = family(), torch.randint(0, 61, (1, 5))
    cache = make(model, 1)
    with torch.no_grad():
        model.decode_step(prompt, cache)  # every cache takes a step (its keys kept, its position moved on)
    with pytest.raises(ValueError, match=r"cache: it holds 5 positions already; give an empty cache \(cache.reset\(\) "
                                         r"empties one\)"):
        generate(model, prompt, 4, config, cache=cache)
    if kind == "static":
        return  # its step is compiled: tests/generation/test_compiled_decode.py decodes with a reset one
    cache.reset()
    assert torch.equal(generate(model, prompt, 4, config, cache=cache), generate(model, prompt, 4, config))


def test_a_static_cache_too_short_for_the_sequence_is_refused():
    model = gpt()
    with pytest.raises(ValueError, match=r"cache: this StaticKVCache has 8 slots; 5 prompt \+ 10 new tokens fill 14: "
                                         r"make it with StaticKVCache.for_model\(model, 1, length=14\)"):
        generate(model, torch.zeros(1, 5, dtype=torch.long), 10, GenerationConfig(compile=True),
                 cache=StaticKVCache.for_model(model, 1, length=8))
    with pytest.raises(ValueError, match=r"StaticKVCache: length must be an int >= 1 \(the slots kept\), got -2"):
        StaticKVCache.for_model(model, 1, length=-2)


@pytest.mark.parametrize(("config", "cache", "match"), [
    (GenerationConfig(), static, r"cache: a StaticKVCache is the compiled loop's; decode with compile=True"),
    (GenerationConfig(compile=True), dynamic, r"cache: compile=True decodes with a StaticKVCache "
                                              r"\(StaticKVCache.for_model\), got a KVCache"),
    (GenerationConfig(use_cache=False), dynamic, r"cache: use_cache=False recomputes every step without a cache; "
                                                 r"give no cache with it"),
])
def test_a_cache_of_another_loop_is_refused(config, cache, match):
    model = gpt()
    with pytest.raises(ValueError, match=match):
        generate(model, torch.zeros(1, 3, dtype=torch.long), 4, config, cache=cache(model, 1))


@pytest.mark.parametrize("batch", [0, 1.0, True])
def test_the_batch_a_cache_is_made_for_is_checked(batch):
    with pytest.raises(ValueError, match=rf"cache: batch must be an int >= 1 \(the rows decoded together\), "
                                         rf"got {batch!r}"):
        KVCache.for_model(gpt(), batch)
