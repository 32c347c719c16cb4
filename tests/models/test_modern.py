"""ModernDecoder: the presets' shapes against the published checkpoints, the forward pass against the same model
assembled from torch ops and transformers' rotary code, the cache, padding and errors. (Its agreement with
transformers' Llama, Qwen2 and Mistral models is in tests/pretrained/test_causal_lm.py.)"""

import doctest

import pytest
import torch
import torch.nn.functional as F

import attnlab.models.modern.decoder as modern_module
from attnlab.generation import GenerationConfig, generate
from attnlab.models import GPT, CausalLMOutput, GPTConfig, ModernDecoder, ModernDecoderConfig, StaticKVCache

GREEDY = GenerationConfig(temperature=0)
UNCACHED = GREEDY.replace(use_cache=False)


def small(**kw):
    torch.manual_seed(0)
    config = ModernDecoderConfig(**{**dict(vocab_size=50, context_length=24, d_model=32, num_layers=2, num_heads=4,
                                           num_kv_heads=2, d_ff=40), **kw})
    model = ModernDecoder(config).eval()
    with torch.no_grad():  # weights of order 1, so that a difference cannot hide in near-zero logits
        for p in model.parameters():
            p.copy_(torch.randn_like(p) / 32**0.5 if p.dim() > 1 else 1 + 0.2 * torch.randn_like(p))
    return model


# the totals published with each checkpoint (the safetensors metadata on its model page)
PUBLISHED = {"llama-3.2-1b": 1_235_814_400, "llama-3-8b": 8_030_261_248, "qwen2.5-0.5b": 494_032_768,
             "mistral-7b": 7_241_732_096, "qwen3-0.6b": 596_049_920, "gemma-2-2b": 2_614_341_888,
             "gemma-3-1b": 999_885_952, "phi-3-mini": 3_821_079_552}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_presets_have_the_published_parameter_counts(name):
    with torch.device("meta"):
        model = ModernDecoder(ModernDecoderConfig.from_preset(name))
    assert model.num_parameters() == PUBLISHED[name]


def test_baby_is_as_large_as_the_gpt_baby():
    with torch.device("meta"):
        ours = ModernDecoder(ModernDecoderConfig.from_preset("baby", vocab_size=82)).num_parameters()
        gpt = GPT(GPTConfig.from_preset("baby", vocab_size=82)).num_parameters()
    assert (ours, gpt) == (810_368, 812_032)


def reference_forward(model: ModernDecoder, idx):
    """The same decoder written with torch ops, transformers' rotate-half RoPE and torch's own RMSNorm."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    c, t = model.config, idx.shape[1]
    cos, sin = model.rotary.cos_sin(torch.arange(t))
    x = F.embedding(idx, model.tok_emb.weight)
    for block in model.blocks:
        a, f = block.attn, block.ff
        h = F.rms_norm(x, (c.d_model,), block.norm1.weight, c.norm_eps)
        q = (h @ a.W_query.weight.T).view(1, t, c.num_heads, c.head_dim).transpose(1, 2)
        k, v = ((h @ w.T).view(1, t, c.num_kv_heads, c.head_dim).transpose(1, 2)
                for w in (a.W_key.weight, a.W_value.weight))
        q, k = apply_rotary_pos_emb(q, k, cos[None], sin[None])
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + o.transpose(1, 2).reshape(1, t, -1) @ a.out_proj.weight.T
        h = F.rms_norm(x, (c.d_model,), block.norm2.weight, c.norm_eps)
        x = x + (F.silu(h @ f.gate_proj.weight.T) * (h @ f.up_proj.weight.T)) @ f.down_proj.weight.T
    return F.rms_norm(x, (c.d_model,), model.norm_f.weight, c.norm_eps) @ model.head.weight.T


def test_forward_equals_torch_assembly():
    pytest.importorskip("transformers")
    model = small()
    idx = torch.randint(0, 50, (1, 20))
    with torch.no_grad():
        torch.testing.assert_close(model(idx).logits, reference_forward(model, idx), atol=1e-5, rtol=0)


def test_return_weights_loss_and_tying():
    model = small()
    idx = torch.randint(0, 50, (2, 9))
    out = model(idx[:, :-1], targets=idx[:, 1:], return_weights=True)
    assert isinstance(out, CausalLMOutput) and len(out.attentions) == 2
    assert out.attentions[0].shape == (2, 4, 8, 8) and torch.all(out.attentions[0].triu(1) == 0)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits.flatten(0, 1), idx[:, 1:].flatten()))
    assert model.head.weight is not model.tok_emb.weight
    tied = small(tie_weights=True)
    assert tied.head.weight is tied.tok_emb.weight


def test_sliding_window_limits_what_a_token_sees():
    model = small(sliding_window=3, num_layers=1)
    idx = torch.randint(0, 50, (1, 12))
    other = idx.clone()
    other[0, :8] = (other[0, :8] + 1) % 50  # change everything more than 2 positions before the last 3 tokens
    with torch.no_grad():
        torch.testing.assert_close(model(idx).logits[:, 10:], model(other).logits[:, 10:], atol=1e-6, rtol=0)
        assert not torch.allclose(model(idx).logits[:, 9], model(other).logits[:, 9])


@pytest.mark.parametrize("window", [None, 5])
def test_cache_holds_key_value_heads_and_generation_equals_recomputation(window):
    model = small(sliding_window=window)
    cache = model.new_cache(2)
    assert cache[0].keys.shape[:2] == (2, 2) and cache.context_length is None  # RoPE: no table to run out of
    idx = torch.randint(0, 50, (2, 6))
    assert torch.equal(generate(model, idx, 30, GREEDY), generate(model, idx, 30, UNCACHED))


def test_rotary_positions_run_past_context_length():
    """No position table: 40 tokens through a model trained for 24, cached = one pass; generation goes on without
    cropping, the cache growing, = recomputing the whole sequence at every step."""
    model = small()
    idx = torch.randint(0, 50, (2, 40))
    with torch.no_grad():
        full = model(idx).logits
        cache = model.new_cache(2)
        steps = [model(idx[:, :20], kv_cache=cache).logits] + [model(idx[:, t : t + 1], kv_cache=cache).logits
                                                                for t in range(20, 40)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=0)
    assert cache.length == 40 and model.position_limit is None
    out = generate(model, idx[:, :6], 34, GREEDY)
    assert torch.equal(out, generate(model, idx[:, :6], 34, UNCACHED))
    with torch.no_grad():  # the last token is the argmax of the whole sequence's forward: nothing was cropped
        assert torch.equal(out[:, -1], model(out[:, :-1]).logits[:, -1].argmax(-1))


LONGROPE = {"type": "longrope", "factor": 3.0, "original_context_length": 8, "short_factor": [1.0, 1.2, 1.9, 3.1],
            "long_factor": [1.3, 2.6, 5.5, 11.0]}


@pytest.mark.parametrize("window", [None, 5])
def test_longrope_rebuilds_the_cache_once_where_its_frequencies_switch(window):
    """LongRoPE turns every position by other angles once the sequence passes L₀ = 8: cached decoding drops its
    cache at 9 tokens and runs the sequence again, once, so it equals recomputing at every step; a prompt already
    past L₀ is never rebuilt."""
    model = small(rope_scaling=LONGROPE, sliding_window=window)
    assert model.cache_rebuild_length == 9 and small().cache_rebuild_length is None
    lengths = []  # the tokens of each pass: the prompt, then one by one, the whole sequence once at 9
    model.blocks[0].register_forward_pre_hook(lambda _, args: lengths.append(args[0].shape[1]))  # forward or step
    idx = torch.randint(0, 50, (2, 5))
    assert torch.equal(generate(model, idx, 30, GREEDY), generate(model, idx, 30, UNCACHED))
    assert lengths[:6] == [5, 1, 1, 1, 9, 1] and lengths[6:30] == [1] * 24
    mask = torch.tensor([[1] * 5, [0, 0, 1, 1, 1]])
    assert torch.equal(generate(model, idx, 30, GREEDY, attention_mask=mask),
                       generate(model, idx, 30, UNCACHED, attention_mask=mask))
    lengths.clear()
    long = torch.randint(0, 50, (1, 12))
    assert torch.equal(generate(model, long, 10, GREEDY), generate(model, long, 10, UNCACHED))
    assert lengths[:10] == [12] + [1] * 9


def test_a_static_cache_allocated_for_the_whole_sequence_decodes_past_the_context():
    model = small()
    idx = torch.randint(0, 50, (1, 36))
    cache = StaticKVCache.for_model(model, 1, 40)
    with torch.no_grad():
        last = [model.decode_step(idx[:, :10], cache)] + [model.decode_step(idx[:, t : t + 1], cache)
                                                          for t in range(10, 36)]
        torch.testing.assert_close(torch.stack(last, 1), model(idx).logits[:, 9:], atol=1e-5, rtol=0)


@pytest.mark.parametrize("cls", ["gpt", "modern"])
def test_left_padded_rows_compute_what_they_compute_alone(cls):
    torch.manual_seed(0)
    model = small() if cls == "modern" else GPT(GPTConfig(vocab_size=50, context_length=24, d_model=32,
                                                          num_layers=2, num_heads=4)).eval()
    ids = torch.randint(1, 50, (2, 10))
    mask = torch.tensor([[1] * 10, [0] * 4 + [1] * 6])
    with torch.no_grad():
        batch = model(ids, attention_mask=mask).logits
        torch.testing.assert_close(batch[1, 4:], model(ids[1:, 4:]).logits[0], atol=1e-5, rtol=0)
        torch.testing.assert_close(batch[0], model(ids[:1]).logits[0], atol=1e-5, rtol=0)
    greedy = generate(model, ids, 12, GREEDY, attention_mask=mask)
    assert torch.equal(greedy[1, 4:], generate(model, ids[1:, 4:], 12, GREEDY)[0])
    assert torch.equal(greedy, generate(model, ids, 12, UNCACHED, attention_mask=mask))


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(num_kv_heads=3), r"num_heads must be divisible by num_kv_heads, got num_heads=4, num_kv_heads=3"),
    (dict(head_dim=7), r"head_dim must be even \(RoPE rotates pairs of features\), got 7"),
    (dict(d_model=30), r"d_model=30 must be divisible by num_heads=4"),
    (dict(sliding_window=0), r"sliding_window .* must be a positive int, got 0"),
    (dict(rope_scaling={"type": "proportional", "factor": 2.0}),
     r"type must be one of 'linear', 'dynamic', 'yarn', 'llama3', 'longrope'"),
    (dict(sliding_window=17), r"sliding_window=17 is wider than context_length=16"),
    (dict(rope_base=0), r"rope_base must be a number > 0"),
    (dict(dropout=1.0), r"dropout must be a float in \[0, 1\)"),
])
def test_config_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ModernDecoderConfig(**{**dict(vocab_size=50, context_length=16, d_model=32, num_layers=2, num_heads=4),
                               **kwargs})


@pytest.mark.parametrize(("call", "err", "match"), [
    (lambda m: m(torch.tensor([[1, 50]])), ValueError, r"token ids must be in \[0, vocab_size=50\)"),
    (lambda m: m(torch.zeros(2, 3, dtype=torch.long), attention_mask=torch.ones(2, 4)), TypeError,
     "attention_mask must be bool or integer"),
    (lambda m: m(torch.zeros(2, 3, dtype=torch.long), attention_mask=torch.ones(2, 4, dtype=torch.long)),
     ValueError, r"attention_mask must have shape \(B, cached \+ T\) = \(2, 3\)"),
    (lambda m: m(torch.zeros(1, 3, dtype=torch.long), attention_mask=torch.tensor([[0, 2, 1]])), ValueError,
     r"attention_mask must contain only 0 and 1, got \[2\]"),
    (lambda m: generate(m, torch.zeros(1, 3, dtype=torch.long), 2, attention_mask=torch.ones(1, 4)), ValueError,
     r"attention_mask must have the prompt's shape \(B, T\) = \(1, 3\)"),
])
def test_bad_input(call, err, match):
    with pytest.raises(err, match=match):
        call(small())


def test_bad_config_type():
    with pytest.raises(TypeError, match="ModernDecoderConfig"):
        ModernDecoder(GPTConfig.from_preset("tiny"))


def test_docstring_examples():
    assert doctest.testmod(modern_module, extraglobs={"torch": torch}).failed == 0
