"""``accelerate``: the fast twins compute what the plain modules compute, for every architecture of the registry.

The reference is the plain model itself (the book's path): an accelerated twin shares its parameters, and its
logits must stay within fp32 rounding (1e-5) and its greedy tokens be the same.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.fast import AccelerateWarning, accelerate, accelerated, is_accelerated
from attnlab.fast.attention import FastAttention
from attnlab.fast.feedforward import FastFeedForward, FastSwiGLU
from attnlab.fast.linear import FastLinear
from attnlab.fast.packed import PackedLinear
from attnlab.generation import GenerationConfig, generate, greedy_decode
from attnlab.models import ARCHITECTURES, EncoderConfig, GPTConfig, ModernDecoderConfig, TransformerEncoder
from attnlab.models.registry import build_model

SMALL = {
    "gpt": dict(vocab_size=97, context_length=48, d_model=32, num_layers=2, num_heads=4),
    "modern": dict(vocab_size=97, context_length=48, d_model=32, num_layers=2, num_heads=4, num_kv_heads=2, d_ff=72),
    "diffllama": dict(vocab_size=97, context_length=48, d_model=32, num_layers=2, num_heads=4, num_kv_heads=2,
                      d_ff=72),
    "smollm3": dict(vocab_size=97, context_length=48, d_model=32, num_layers=4, num_heads=4, num_kv_heads=2, d_ff=72),
    # layers 0-2 Gated DeltaNet, 3 gated attention; the delta rule in chunks of 4, so 11 tokens run three; layer 0
    # a dense SwiGLU, 1-3 mixtures of 4 experts
    "qwen3_next": dict(vocab_size=97, context_length=48, d_model=32, num_layers=4, num_heads=4, num_kv_heads=2,
                       head_dim=8, d_ff=72, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                       linear_value_head_dim=8, chunk_size=4, num_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=16, shared_expert_intermediate_size=24, mlp_only_layers=(0,)),
    "deepseek": dict(vocab_size=97, context_length=48, d_model=32, num_layers=2, num_heads=4, d_ff=72,
                     kv_lora_rank=16, q_lora_rank=24, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8,
                     n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1,
                     scoring_func="sigmoid", topk_method="noaux_tc", n_group=4, topk_group=2, norm_topk_prob=True,
                     first_k_dense_replace=1),
    # 6 layers: sliding (window 4) and global, the last two reading layers 3's and 2's keys, k_eq_v, per-layer inputs
    "gemma4": dict(vocab_size=97, context_length=48, d_model=32, num_layers=6, num_heads=4, num_kv_heads=2,
                   head_dim=8, global_head_dim=16, num_global_kv_heads=1, k_eq_v=True, d_ff=72, sliding_window=4,
                   layer_types=(["sliding_attention"] * 2 + ["full_attention"]) * 2, global_rope_fraction=0.25,
                   rope_local_base=10000.0, num_kv_shared_layers=2, double_wide_mlp=True, d_layer_input=8,
                   final_softcap=30.0),
    # KDA, KDA, KDA, MLA without RoPE; a dense first layer, then experts in groups; the delta rule in chunks of 4
    "kimi_linear": dict(vocab_size=97, context_length=48, d_model=32, num_layers=4, num_heads=4, d_ff=72,
                        kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8, linear_num_heads=2,
                        linear_head_dim=8, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=16,
                        n_shared_experts=1, n_group=4, topk_group=2, chunk_size=4,
                        layer_types=["linear_attention"] * 3 + ["full_attention"]),
    "transformer": dict(vocab_size=97, d_model=32, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=64,
                        context_length=40),
    "encoder": dict(vocab_size=97, context_length=48, d_model=32, num_layers=2, num_heads=4, d_ff=64),
}
GREEDY = GenerationConfig(temperature=0)


def model_of(arch: str, seed: int = 0, **changes) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = build_model(arch, {**SMALL[arch], **changes}).eval()
    with torch.no_grad():  # larger weights than the default init: logits that are not flat, so a slip shows
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


def test_every_architecture_of_the_registry_is_covered():
    assert set(SMALL) == set(ARCHITECTURES)


@pytest.mark.parametrize("arch", ["gpt", "modern", "diffllama", "smollm3", "qwen3_next", "deepseek", "gemma4",
                                  "kimi_linear"])
def test_a_decoders_twin_gives_its_logits_and_its_greedy_tokens(arch):
    model = model_of(arch)
    twin = accelerated(model)
    assert twin is not model and not is_accelerated(model) and is_accelerated(twin)
    idx = torch.randint(0, 97, (3, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(twin(idx).logits, model(idx).logits, atol=1e-5, rtol=0)
    fast = generate(model, idx, 24, GREEDY)
    assert torch.equal(fast, generate(model, idx, 24, GREEDY.replace(accelerate=False)))
    assert torch.equal(fast, generate(model, idx, 24, GREEDY.replace(use_cache=False, accelerate=False)))


def test_a_kind_of_attention_with_a_forward_of_its_own_keeps_it_and_its_maps_are_swapped():
    from attnlab.attention.differential import DifferentialAttention

    twin = accelerated(model_of("diffllama"))
    attn = twin.blocks[0].attn
    assert type(attn) is DifferentialAttention and isinstance(attn.out_proj, FastLinear)
    assert isinstance(accelerated(model_of("smollm3")).blocks[3].attn, FastAttention)  # a NoPE layer: the one module


def test_a_linear_attention_layer_keeps_its_forward_and_its_maps_are_swapped():
    from attnlab.attention.delta_net import GatedDeltaNet

    twin = accelerated(model_of("qwen3_next"))
    linear, full = twin.blocks[0].attn, twin.blocks[3].attn
    assert type(linear) is GatedDeltaNet and isinstance(linear.in_proj_qkv, FastLinear)
    assert isinstance(full, FastAttention) and isinstance(full.W_gate, FastLinear)  # the output gate kept


@pytest.mark.parametrize("arch", ["deepseek", "kimi_linear"])
def test_a_decoder_of_latent_attention_is_no_encoder_its_maps_take_the_few_row_product(arch):
    """MLA is a kind of its own, not the one module: still causal, so its maps are a decoder's (oneDNN's packed
    maps, an encoder's, cost a decoding step of these models about a fifth)."""
    twin = accelerated(model_of(arch))
    maps = [m for m in twin.modules() if isinstance(m, torch.nn.Linear)]
    assert maps and not any(isinstance(m, PackedLinear) for m in maps)
    assert isinstance(twin.head, FastLinear)


def test_the_translation_models_twin_gives_its_tokens():
    model = model_of("transformer")
    src = torch.randint(3, 97, (4, 9), generator=torch.Generator().manual_seed(2))
    tgt = torch.randint(3, 97, (4, 6), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert torch.allclose(accelerated(model)(src, tgt).logits, model(src, tgt).logits, atol=1e-5, rtol=0)
    assert torch.equal(greedy_decode(model, src, max_new_tokens=12),
                       greedy_decode(model, src, max_new_tokens=12, accelerate=False))


def test_an_encoders_twin_packs_every_map_and_gives_its_hidden_states():
    model = model_of("encoder")
    twin = accelerated(model)
    assert all(type(m) is PackedLinear for m in twin.modules() if isinstance(m, torch.nn.Linear))
    ids = torch.randint(0, 97, (2, 13), generator=torch.Generator().manual_seed(4))
    mask = torch.ones(2, 13, dtype=torch.long)
    mask[1, 9:] = 0
    with torch.no_grad():
        want, got = model(ids, mask).last_hidden_state, twin(ids, mask).last_hidden_state
    assert torch.allclose(got[mask.bool()], want[mask.bool()], atol=1e-5, rtol=0)


@settings(max_examples=12, deadline=None)
@given(batch=st.integers(1, 3), length=st.integers(1, 20), heads=st.sampled_from([(4, 4), (4, 2), (4, 1)]),
       new=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_the_modern_twin_equals_the_plain_model_at_any_shape(batch, length, heads, new, seed):
    model = model_of("modern", seed, num_heads=heads[0], num_kv_heads=heads[1])
    idx = torch.randint(0, 97, (batch, length), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        assert torch.allclose(accelerated(model)(idx).logits, model(idx).logits, atol=1e-5, rtol=0)
    assert torch.equal(generate(model, idx, new, GREEDY), generate(model, idx, new, GREEDY.replace(accelerate=False)))


def test_accelerate_swaps_in_place_keeps_the_state_dict_and_says_what_it_did():
    model = model_of("modern")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert accelerate(model) is model
    kinds = {type(m) for m in model.modules()}
    assert {FastAttention, FastSwiGLU, FastLinear} <= kinds
    assert model.state_dict().keys() == before.keys()
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())
    with pytest.warns(AccelerateWarning, match="accelerated already; it is returned as it is"):
        assert accelerate(model) is model
    with pytest.warns(AccelerateWarning, match="is in training mode: its training paths apply now"):
        accelerate(model_of("gpt").train())
    with pytest.raises(TypeError, match=r"accelerate: model must be a torch nn\.Module, got str"):
        accelerate("GPT")


def test_a_feed_forwards_twin_is_the_fast_one():
    model = accelerate(model_of("gpt"))
    assert all(type(block.ff) is FastFeedForward for block in model.blocks)


def test_the_twin_follows_the_models_weights_and_is_made_again_when_a_module_is_swapped():
    model = model_of("gpt")
    idx = torch.randint(0, 97, (1, 7))
    twin = accelerated(model)
    assert accelerated(model) is twin  # kept while the model's modules and parameters stay the same objects
    with torch.no_grad():
        model.blocks[0].attn.W_query.weight.mul_(2.0)  # in place: the twin shares the tensor, and sees it
        assert torch.allclose(accelerated(model)(idx).logits, model(idx).logits, atol=1e-5, rtol=0)
    model.head = torch.nn.Linear(32, 97, bias=False)
    assert accelerated(model) is not twin  # a new module: a new twin
    with torch.no_grad():
        assert torch.allclose(accelerated(model)(idx).logits, model(idx).logits, atol=1e-5, rtol=0)


def test_the_twin_leaves_the_model_and_its_hooks_alone():
    model = model_of("gpt")
    seen = []
    handle = model.blocks[0].attn.out_proj.register_forward_pre_hook(lambda m, args: seen.append(1))
    generate(model, torch.zeros(1, 3, dtype=torch.long), 4, GREEDY)
    assert type(model.blocks[0].attn).__name__ == "MultiHeadAttention" and type(model.head) is torch.nn.Linear
    handle.remove()
    generate(model, torch.zeros(1, 3, dtype=torch.long), 4, GREEDY)
    assert len(seen) == 4  # the twin ran with the hook (prefill and three steps), then without it


def test_a_quantized_model_is_accelerated_around_its_int8_maps():
    from attnlab.fast.quantized_linear import Int8Linear
    from attnlab.models import quantize

    model = quantize(model_of("gpt"), "int8")
    idx = torch.randint(0, 97, (2, 9))
    twin = accelerated(model)
    assert all(type(b.attn.W_query) is Int8Linear for b in twin.blocks)
    with torch.no_grad():
        assert torch.allclose(twin(idx).logits, model(idx).logits, atol=1e-5, rtol=0)


def test_an_encoder_is_accelerated_for_inference_too(monkeypatch):
    encoder = TransformerEncoder(EncoderConfig(**SMALL["encoder"])).eval()
    twin = accelerated(encoder)
    assert twin.config is encoder.config and not is_accelerated(encoder)


def test_configs_of_every_decoder_build_the_plain_modules():
    for config in (GPTConfig(**SMALL["gpt"]), ModernDecoderConfig(**SMALL["modern"])):
        model = ARCHITECTURES["gpt" if isinstance(config, GPTConfig) else "modern"].model(config)
        assert not is_accelerated(model)
        assert all(type(m) is torch.nn.Linear for m in model.modules() if isinstance(m, torch.nn.Linear))
