"""Past ``max_position_embeddings``, as transformers does it; rolling caches for sliding windows; ragged batches.

Tiny random Llama checkpoints with ``max_position_embeddings = 16`` and each RoPE scaling (none, linear, dynamic
NTK, YaRN, llama3), a Mistral and a Qwen2 with a 4-key window, and a GPT-2, all written by transformers with
``save_pretrained`` (tests/hf_checkpoints.py). Each comparison takes a freshly loaded transformers model: its
dynamic RoPE keeps the longest length it has seen between calls.
"""

import pytest
import torch

from attnlab.generation import GenerationConfig, PositionTableWarning, generate, generate_texts
from attnlab.pretrained import load_causal_lm
from hf_checkpoints import VOCAB, cached_and_full_logits, write_checkpoint
from hf_checkpoints import left_padded as padded

transformers = pytest.importorskip("transformers")
GREEDY = GenerationConfig(temperature=0)
UNCACHED = GREEDY.replace(use_cache=False)  # the whole window recomputed at every step
ATOL = 1e-4
SHORT = 16  # max_position_embeddings of the Llamas: every test runs past it
COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=SHORT, bos_token_id=None, eos_token_id=None,
              pad_token_id=None)
ROPES = {
    "default": dict(rope_type="default", rope_theta=10000.0),
    "linear": dict(rope_type="linear", rope_theta=10000.0, factor=2.0),
    "dynamic": dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0),
    "yarn": dict(rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=4),
    "llama3": dict(rope_type="llama3", rope_theta=500000.0, factor=4.0, low_freq_factor=1.0, high_freq_factor=4.0,
                   original_max_position_embeddings=4),
}
LONGROPE = dict(rope_type="longrope", rope_theta=10000.0, short_factor=[1.0, 1.2, 1.9, 3.1],
                long_factor=[1.3, 2.6, 5.5, 11.0], original_max_position_embeddings=SHORT)
WINDOWED = {
    "mistral": lambda: transformers.MistralConfig(**{**COMMON, "max_position_embeddings": 64}, sliding_window=4),
    "qwen2": lambda: transformers.Qwen2Config(**{**COMMON, "max_position_embeddings": 64}, use_sliding_window=True,
                                              sliding_window=4, max_window_layers=0),
}


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """name -> checkpoint directory: ``llama-<rope>`` for each RoPE, ``mistral`` and ``qwen2``, ``gpt2``."""
    root = tmp_path_factory.mktemp("long")
    out = {}
    for rope, params in ROPES.items():
        out[f"llama-{rope}"] = root / rope
        write_checkpoint("llama", out[f"llama-{rope}"], config=transformers.LlamaConfig(**COMMON,
                                                                                        rope_parameters=params))
    for arch, config in WINDOWED.items():
        out[arch] = root / arch
        write_checkpoint(arch, out[arch], config=config())
    out["gpt2"] = root / "gpt2"
    write_checkpoint("gpt2", out["gpt2"])
    out["phi3"] = root / "phi3"  # LongRoPE from 16 positions to 32
    write_checkpoint("phi3", out["phi3"], config=transformers.Phi3Config(
        **{**COMMON, "max_position_embeddings": 2 * SHORT}, original_max_position_embeddings=SHORT,
        rope_parameters=LONGROPE, attn_implementation="eager"))
    return out


def hf(d):
    """A fresh transformers model from ``d``: greedy, no end-of-sequence token, padding id 0."""
    model = transformers.AutoModelForCausalLM.from_pretrained(d).eval()
    model.generation_config.pad_token_id, model.generation_config.eos_token_id = 0, None
    return model


def prompt(t, b=1, seed=0):
    return torch.randint(1, VOCAB, (b, t), generator=torch.Generator().manual_seed(seed))


def left_padded(lengths, seed=1):
    """Left-padded rows as long as the longest prompt (the shared builder's ids and mask)."""
    return padded(lengths, max(lengths), seed)


def test_every_scaling_reaches_the_loaded_model(dirs):
    configs = {rope: load_causal_lm(dirs[f"llama-{rope}"])[0].config for rope in ROPES}
    assert configs["default"].rope_scaling is None
    assert {rope: c.rope_scaling["type"] for rope, c in configs.items() if c.rope_scaling} == {
        "linear": "linear", "dynamic": "dynamic", "yarn": "yarn", "llama3": "llama3"}
    assert configs["yarn"].rope_scaling["original_max_position_embeddings"] == 4
    assert load_causal_lm(dirs["qwen2"])[0].config.sliding_window == 4


@pytest.mark.parametrize("rope", list(ROPES))
def test_logits_past_max_position_embeddings_equal_transformers(dirs, rope):
    model, _ = load_causal_lm(dirs[f"llama-{rope}"])
    ids = prompt(24, b=2)
    with torch.no_grad():
        got, want = model(ids).logits, hf(dirs[f"llama-{rope}"])(ids).logits
    assert want.std() > 0.5
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("rope", list(ROPES))
def test_greedy_past_the_window_equals_transformers_generate(dirs, rope):
    """12 prompt tokens and 40 new: 52 positions over a trained 16, with the cache (transformers' default)."""
    model, _ = load_causal_lm(dirs[f"llama-{rope}"])
    ids = prompt(12)
    assert torch.equal(generate(model, ids, 40, GREEDY), hf(dirs[f"llama-{rope}"]).generate(
        ids, max_new_tokens=40, do_sample=False))
    ids, mask = left_padded((12, 7))
    want = hf(dirs[f"llama-{rope}"]).generate(ids, attention_mask=mask, max_new_tokens=40, do_sample=False)
    assert torch.equal(generate(model, ids, 40, GREEDY, attention_mask=mask), want)


def test_dynamic_ntk_cached_and_recomputed_both_equal_transformers_and_differ(dirs):
    """transformers' dynamic RoPE keeps each cached key turned by the frequencies in force when it was written;
    without the cache every key is turned by those of the current length. attnlab's cache is the first, its
    ``use_cache=False`` the second: each equals transformers' of the same kind, and the two differ past 16."""
    d = dirs["llama-dynamic"]
    model, _ = load_causal_lm(d)
    ids = prompt(12)
    want = hf(d).generate(ids, max_new_tokens=30, do_sample=False, use_cache=False)
    assert torch.equal(generate(model, ids, 30, UNCACHED), want)
    seq = generate(model, ids, 30, GREEDY)
    with torch.no_grad():
        full = model(seq).logits
        cache = model.new_cache(1)
        cached = torch.cat([model(seq[:, :12], kv_cache=cache).logits]
                           + [model(seq[:, t : t + 1], kv_cache=cache).logits for t in range(12, seq.shape[1])], 1)
    torch.testing.assert_close(cached[:, :SHORT], model(seq[:, :SHORT]).logits, atol=1e-5, rtol=0)
    assert (cached[:, SHORT:] - full[:, SHORT:]).abs().max() > 1e-3  # the two conventions really differ


def test_longrope_cached_greedy_rebuilds_the_cache_as_transformers(dirs):
    """Phi-3's LongRoPE: 12 prompt tokens and 40 new over L₀ = 16. transformers' Phi-3 drops its cache when the
    sequence reaches L₀ + 1 tokens and recomputes every key with the long factors; attnlab's cached decoding does
    the same (``cache_rebuild_length``), so its tokens equal transformers' cached ones, and its own recomputation's
    (``use_cache=False``), alone and in a left-padded batch."""
    model, _ = load_causal_lm(dirs["phi3"])
    assert model.cache_rebuild_length == SHORT + 1
    ids = prompt(12, seed=5)
    want = hf(dirs["phi3"]).generate(ids, max_new_tokens=40, do_sample=False)
    assert torch.equal(generate(model, ids, 40, GREEDY), want)
    assert torch.equal(generate(model, ids, 40, UNCACHED), want)
    ids, mask = left_padded((12, 7), seed=6)
    want = hf(dirs["phi3"]).generate(ids, attention_mask=mask, max_new_tokens=40, do_sample=False)
    assert torch.equal(generate(model, ids, 40, GREEDY, attention_mask=mask), want)
    assert torch.equal(generate(model, ids, 40, UNCACHED, attention_mask=mask), want)


@pytest.mark.parametrize("rope", ["default", "yarn", "llama3"])
def test_cache_equals_recomputation_past_the_window(dirs, rope):
    model, _ = load_causal_lm(dirs[f"llama-{rope}"])
    ids, mask = left_padded((30, 21), seed=2)
    cached, full = cached_and_full_logits(model, ids, mask, 10)
    real = mask.bool()
    torch.testing.assert_close(cached[real], full[real], atol=1e-5, rtol=0)


@pytest.mark.parametrize("arch", list(WINDOWED))
def test_rolling_cache_holds_the_window_and_equals_transformers(dirs, arch):
    """A 4-key window, 8 prompt tokens and 32 new (8 times the window): the same tokens as transformers, the
    cache's buffers 4 positions long at the end, and every cached step's logits = the whole sequence's."""
    model, _ = load_causal_lm(dirs[arch])
    ids = prompt(8)
    out = generate(model, ids, 32, GREEDY)
    assert torch.equal(out, hf(dirs[arch]).generate(ids, max_new_tokens=32, do_sample=False))
    ids, mask = left_padded((8, 5), seed=3)
    want = hf(dirs[arch]).generate(ids, attention_mask=mask, max_new_tokens=32, do_sample=False)
    assert torch.equal(generate(model, ids, 32, GREEDY, attention_mask=mask), want)
    c = model.config
    with torch.no_grad():
        cache = model.new_cache(1)
        steps = [model(out[:, :6], kv_cache=cache).logits]
        steps += [model(out[:, t : t + 1], kv_cache=cache).logits for t in range(6, out.shape[1])]
        torch.testing.assert_close(torch.cat(steps, 1), model(out).logits, atol=1e-5, rtol=0)
    assert cache.length == 40 and cache.nbytes == 2 * c.num_layers * 1 * c.num_kv_heads * 4 * c.head_dim * 4


@pytest.mark.parametrize("name", ["gpt2", "llama-dynamic", "mistral"])
def test_ragged_prompts_each_as_alone(dirs, name):
    model, tokenizer = load_causal_lm(dirs[name])
    prompts = [prompt(n, seed=n)[0].tolist() for n in (9, 3, 6)]
    rows = generate(model, prompts, 20, GREEDY)
    for p, row in zip(prompts, rows, strict=True):
        alone = generate(model, torch.tensor([p]), 20, GREEDY)[0].tolist()
        if name == "llama-dynamic" and len(p) < 9:
            # the frequencies follow the batch's longest row (transformers' too): once it passes 16 positions, at
            # its 8th new token, a shorter row is turned by other angles than alone; before, by the same
            assert row[: len(p) + 8] == alone[: len(p) + 8]
        else:
            assert row == alone
    texts = ["To be, or not to be", "Whether", "我爱学习"]
    for text, got in zip(texts, generate_texts(model, tokenizer, texts, 8, GREEDY), strict=True):
        alone = tokenizer.decode(generate(model, torch.tensor([tokenizer.encode(text)]), 8, GREEDY)[0].tolist())
        assert got.startswith(text) and (got == alone or name == "llama-dynamic")  # dynamic: see above


def test_a_learned_position_table_keeps_its_limit(dirs):
    model, _ = load_causal_lm(dirs["gpt2"])  # n_positions 64
    with pytest.raises(ValueError, match=r"0 cached \+ 65 new tokens exceed context_length=64, the size of its "
                                         r"learned position table; crop idx to its last 64 tokens"):
        model(prompt(65))
    with pytest.warns(PositionTableWarning, match=r"GPT: 60 prompt \+ 10 new tokens pass its learned position "
                                                  r"table of 64 positions"):
        out = generate(model, prompt(60), 10, GREEDY)
    assert torch.equal(out, generate(model, prompt(60), 10, UNCACHED))
