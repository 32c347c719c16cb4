"""Gemma 4's config and model: the preset as large as transformers' model of the same config, proportional RoPE's
frequencies, the shared-KV layers (no keys of their own, nothing cached, their owner's keys read), the cache of the
owners only (= recomputation past the window, bytes = the formula), and wrong configs named."""

import doctest

import pytest
import torch

import attnlab.attention.shared_kv as shared_kv_module
import attnlab.layers.proportional_rope as proportional_module
import attnlab.models.caches.layered as layered_module
import attnlab.models.modern.gemma4 as gemma4_module
from attnlab.attention.shared_kv import SharedKV, SharedKVAttentionSpec
from attnlab.attention.spec import AttentionSpec
from attnlab.generation import GenerationConfig, generate
from attnlab.layers.proportional_rope import ProportionalRotaryEmbedding
from attnlab.models.modern.gemma4 import Gemma4Config, Gemma4Decoder


def baby(seed: int = 0, **changes) -> Gemma4Decoder:
    """The baby preset with weights of order 1 and perturbed gains (a w·x against (1 + w)·x slip shows)."""
    torch.manual_seed(seed)
    model = Gemma4Decoder(Gemma4Config.from_preset("baby", **changes)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.1 if p.dim() >= 2 else 1 + 0.2 * torch.randn_like(p))
        for block in model.blocks:
            block.layer_scalar.fill_(1 + 0.2 * float(torch.randn(())))
    return model


def test_the_docstrings_run():
    for module in (gemma4_module, shared_kv_module, proportional_module, layered_module):
        assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize("preset", ["gemma-4-text", "baby"])
def test_the_preset_is_as_large_as_transformers_model_of_the_same_config(preset):
    transformers = pytest.importorskip("transformers")
    c = Gemma4Config.from_preset(preset)
    if preset == "gemma-4-text":  # transformers' defaults, the preset's source
        config = transformers.Gemma4TextConfig()
    else:
        config = transformers.Gemma4TextConfig(
            vocab_size=c.vocab_size, vocab_size_per_layer_input=c.vocab_size, hidden_size=c.d_model,
            intermediate_size=c.d_ff, num_hidden_layers=c.num_layers, num_attention_heads=c.num_heads,
            num_key_value_heads=c.num_kv_heads, head_dim=c.head_dim, global_head_dim=c.global_head_dim,
            num_global_key_value_heads=c.num_global_kv_heads, attention_k_eq_v=c.k_eq_v,
            layer_types=c.layer_types, sliding_window=c.sliding_window, num_kv_shared_layers=c.num_kv_shared_layers,
            use_double_wide_mlp=c.double_wide_mlp, hidden_size_per_layer_input=c.d_layer_input)
    with torch.device("meta"):
        ours = Gemma4Decoder(c).num_parameters()
        theirs = transformers.Gemma4ForCausalLM(config).num_parameters()
    assert ours == theirs
    if preset == "gemma-4-text":
        assert ours == 5_077_177_856


def test_proportional_rope_turns_the_first_pairs_at_the_whole_heads_frequencies():
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    transformers = pytest.importorskip("transformers")
    rope = ProportionalRotaryEmbedding(512, 128, 1000000.0, 0.25, {"type": "linear", "factor": 2.0})
    config = transformers.Gemma4TextConfig(rope_parameters={
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                           "factor": 2.0}})
    want, _ = ROPE_INIT_FUNCTIONS["proportional"](config, layer_type="full_attention")
    got = rope.inv_freq()
    assert rope.rotated_pairs == 64 and bool((got[64:] == 0).all())
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    with pytest.raises(ValueError, match=r"fraction must be a number in \(0, 1\]"):
        ProportionalRotaryEmbedding(8, 16, fraction=0.0)
    with pytest.raises(ValueError, match=r"scaling must be None or linear, got 'dynamic'"):
        ProportionalRotaryEmbedding(8, 16, fraction=0.5, scaling={"type": "dynamic", "factor": 2.0})


def test_shared_kv_layers_have_no_keys_and_read_their_owners():
    model = baby()
    c = model.config
    assert [c.kv_owner(i) for i in range(6)] == [None, None, None, None, 3, 2]  # 4 sliding like 3, 5 global like 2
    shared, owner_global = model.blocks[5].attn, model.blocks[2].attn
    assert shared.W_key is None and shared.W_value is None and shared.k_norm is None
    assert owner_global.W_value is None and owner_global.head_dim == 64 and owner_global.num_kv_heads == 1
    assert model.blocks[0].attn.W_value is not None and model.blocks[0].attn.head_dim == 32
    assert model.blocks[5].ff.up_proj.out_features == 512 and model.blocks[2].ff.up_proj.out_features == 256
    assert all(s.k_eq_v for s in (owner_global.shared_spec,)) and not model.blocks[3].attn.shared_spec.k_eq_v
    x = torch.randn(1, 5, 128)
    with pytest.raises(ValueError, match=r"a shared-KV layer attends to an earlier layer's keys and values; give "
                                         r"them as shared_kv \(a SharedKV\), got NoneType"):
        shared(x)
    with pytest.raises(ValueError, match=r"which has not run in this call"):
        shared(x, shared_kv=SharedKV())
    with pytest.raises(ValueError, match=r"a shared-KV layer keeps no cache"):
        shared(x, kv_cache=model.new_cache(1).layers[0], shared_kv=SharedKV())
    with pytest.raises(ValueError, match=r"k_eq_v makes the values from the layer's own key projection, and "
                                         r"kv_shared leaves it none"):
        SharedKVAttentionSpec(AttentionSpec(8, 8, 2), k_eq_v=True, kv_shared=True)


def test_k_eq_v_values_are_the_keys_before_their_norm_and_rope_normalised():
    spec = SharedKVAttentionSpec(AttentionSpec(16, 16, 2, num_kv_heads=1, head_dim=8, scale=1.0), value_norm_eps=1e-6,
                                 k_eq_v=True)
    attn = spec.build()
    x = torch.randn(1, 3, 16)
    _, keys, values = attn.heads(x)
    raw = attn.W_key(x).view(1, 3, 1, 8).transpose(1, 2)
    torch.testing.assert_close(values, raw / raw.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt(), atol=1e-6, rtol=0)
    torch.testing.assert_close(keys, raw, atol=0, rtol=0)  # no QK-norm, no RoPE here: the keys as projected


def test_the_cache_holds_the_owners_only_and_equals_recomputation_past_the_window():
    model = baby(1)
    idx = torch.randint(0, 256, (2, 40), generator=torch.Generator().manual_seed(2))
    cache = model.new_cache(2)
    assert [tuple(layer.keys.shape[1::2]) for layer in cache.layers] == [(2, 32), (2, 32), (1, 64), (2, 32)]
    with torch.no_grad():
        full = model(idx).logits
        steps = [model(idx[:, :20], kv_cache=cache).logits]  # 20 > the window of 16
        steps += [model(idx[:, t : t + 1], kv_cache=cache).logits for t in range(20, 40)]
    assert full.std() > 0.3
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-4, rtol=0)
    assert cache.filled_nbytes() == model.config.cache_bytes(40, batch=2, dtype=torch.float32)
    tokens = generate(model, idx[:1, :8], 30, GenerationConfig(temperature=0))
    assert torch.equal(tokens, generate(model, idx[:1, :8], 30, GenerationConfig(temperature=0, use_cache=False)))


def test_the_caches_of_one_shape_for_every_layer_refuse_it():
    from attnlab.models import KVCache, SinkKVCache, StaticKVCache

    model = baby()
    idx = torch.randint(0, 256, (1, 5))
    for make in (lambda: StaticKVCache.for_model(model, 1, 64), lambda: KVCache.for_model(model, 1, storage="int8"),
                 lambda: SinkKVCache.for_model(model, 1, sink_tokens=4, sliding_window=8)):
        with pytest.raises(ValueError, match=r"cache: Gemma4Decoder's layers keep keys of different shapes, and its "
                                             r"shared-KV layers none: its cache is its own, model.new_cache\(batch\)"):
            make()
    with pytest.raises(ValueError, match=r"its cache is its own"):
        generate(model, idx, 4, GenerationConfig(temperature=0, compile=True))


def test_the_cache_formula_counts_the_owners_kinds():
    c = Gemma4Config.from_preset("gemma-4-text")
    # 25 sliding layers (4 heads of 256, at most 512 tokens), 5 global (4 heads of 512); bf16
    assert c.cache_bytes_per_token() == 5 * 2 * 4 * 512 * 2 == 40_960
    assert c.cache_bytes(4096) == 25 * 512 * 2 * 4 * 256 * 2 + 5 * 4096 * 2 * 4 * 512 * 2
    assert len(Gemma4Config.from_preset("baby").cache_sizes()) == 4  # the two shared-KV layers keep nothing


@pytest.mark.parametrize(("changes", "match"), [
    (dict(num_kv_shared_layers=6), r"num_kv_shared_layers must be an int in \[0, num_layers=6\)"),
    (dict(num_kv_shared_layers=4), r"layer 2 shares the keys of the last earlier layer of its kind "
                                   r"\(full_attention\), but none of the first 2 layers is one"),
    (dict(global_rope_fraction=1.5), r"global_rope_fraction must be a number in \(0, 1\]"),
    (dict(rope_scaling={"type": "dynamic", "factor": 2.0}), r"proportional RoPE \(global_rope_fraction=0.25\) "
                                                            r"scales linearly or not at all"),
    (dict(d_layer_input=-1), r"d_layer_input must be an int >= 0 \(0: no per-layer inputs\), got -1"),
    (dict(num_global_kv_heads=3), r"num_heads must be divisible by num_global_kv_heads, got num_heads=4, "
                                  r"num_global_kv_heads=3"),
    (dict(global_head_dim=33), r"global_head_dim must be even"),
])
def test_a_wrong_config_is_named(changes, match):
    with pytest.raises(ValueError, match=r"Gemma4Config: " + match):
        Gemma4Config.from_preset("baby", **changes)
    with pytest.raises(TypeError, match=r"Gemma4Decoder: config must be a Gemma4Config"):
        Gemma4Decoder(object())  # type: ignore[arg-type]


def test_capture_and_explain_work_through_the_owners_and_name_a_shared_kv_layer():
    from attnlab.inspect import capture, explain

    ids = torch.randint(0, 256, (9,), generator=torch.Generator().manual_seed(4)).tolist()
    plain = baby(2, num_kv_shared_layers=0)  # every layer its own keys: scale 1, q/k/v norms, k_eq_v, windows
    cap = capture(plain, ids)
    assert cap.not_one_softmax is None and cap.keys[2].shape == (4, 9, 64)  # a global layer: heads of 64
    for layer in range(6):
        assert explain(cap, 8, layer=layer).max_abs_diff_weights < 1e-6
    shared = capture(baby(2), ids)
    assert shared.attentions[5].shape == (4, 9, 9) and shared.queries is None
    with pytest.raises(ValueError, match=r"layer 4 is a shared-KV layer \(Gemma 4: its keys and values are an "
                                         r"earlier layer's, computed there\)"):
        explain(shared, 3)


def test_the_norms_gain_multiplies_in_float32_as_transformers_does_in_bf16():
    from transformers.models.gemma4.modeling_gemma4 import Gemma4RMSNorm as Theirs

    from attnlab.layers import RMSNorm
    from attnlab.models.modern.gemma4 import Gemma4RMSNorm

    torch.manual_seed(0)
    x = (3 * torch.randn(64, 256)).bfloat16()
    theirs = Theirs(256)
    with torch.no_grad():
        theirs.weight.copy_(1 + 0.5 * torch.randn(256))
    theirs = theirs.bfloat16()
    ours, llama = Gemma4RMSNorm(256, eps=1e-6).bfloat16(), RMSNorm(256, eps=1e-6).bfloat16()
    with torch.no_grad():
        ours.weight.copy_(theirs.weight)
        llama.weight.copy_(theirs.weight)
        want = theirs(x)
        differ = (llama(x) != want).float().mean()
        torch.testing.assert_close(ours(x), want, atol=0, rtol=0)
        torch.testing.assert_close(ours.formula(x), want, atol=0, rtol=2 ** -7)  # rsqrt written out: an ulp
    assert differ > 0.1  # Llama's order (cast, then gain) rounds a quarter of them otherwise
    model = baby()
    assert all(type(m) is Gemma4RMSNorm for name, m in model.named_modules() if name.endswith("norm")
               or name.endswith(("norm1", "norm2", "norm_f")))
