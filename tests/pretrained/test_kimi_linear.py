"""load_causal_lm: Kimi Linear checkpoints computed as transformers' Kimi Linear computes them.

Each case is a small random model written by transformers' ``save_pretrained`` with the family's features on: KDA
layers (a decay per key channel) beside MLA layers without RoPE, with and without a query latent, the attention's
biases; a dense first layer (two in one case) then DeepSeek-V3's mixture (sigmoid router, correction bias moved off
zero so that it changes choices, experts in groups, shared experts, routed_scaling_factor, with and without
renormalised weights). One is written in 20 KB shards, one in bfloat16 (compared with the transformers model holding
the same rounded weights, in float32), one as Moonshot's own config.json reads (``linear_attn_config``'s layer
lists from 1, ``first_k_dense_replace``, the dense feed-forward under ``mlp``). Weights of order 1
(tests/hf_checkpoints.py).

transformers' Kimi Linear runs on the CPU with its own PyTorch forms of the chunked KDA and the short convolution
(no fla kernels needed), and it takes left padding: a padded token's input is zeroed before the KDA layers (their
memory stays at zero until the first real token) and the MLA layers mask it. So: logits agree to 1e-4 on left-padded
batches of 16 and 90 tokens (90: two chunks of the delta rule's 64, in transformers and here; 16: here in chunks of
5 as well), each row also equal to itself alone; 40 greedy tokens equal ``generate``'s, alone and in a left-padded
batch; the cache (float32 memories, latents) equals recomputing.
"""

import dataclasses
import json
import shutil

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from attnlab.attention.kimi_delta import KimiDeltaAttention
from attnlab.attention.latent import LatentAttention
from attnlab.generation import GenerationConfig
from attnlab.models.caches import HybridCache, LatentLayerCache, RecurrentLayerCache
from attnlab.models.modern.kimi_linear import KimiLinearModel
from attnlab.pretrained import load_causal_lm
from hf_checkpoints import (
    VOCAB,
    assert_left_padded_batch_equals,
    cached_and_full_logits,
    greedy_equals_generate,
    left_padded,
    written_and_loaded,
)

transformers = pytest.importorskip("transformers")
GREEDY = GenerationConfig(temperature=0)
ATOL = 1e-4
COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=4,
              num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8,
              v_head_dim=12, num_local_experts=8, num_experts_per_tok=3, n_group=4, topk_group=2,
              linear_num_heads=2, linear_head_dim=8, max_position_embeddings=160, rms_norm_eps=1e-5,
              bos_token_id=None, eos_token_id=None, pad_token_id=None)
#: name -> transformers' config fields beyond COMMON
FAMILIES = {
    # KDA, KDA, KDA, MLA; no query latent; one dense layer, then the mixture
    "kimi_linear": dict(q_lora_rank=None, layer_types=["linear_attention"] * 3 + ["full_attention"]),
    # MLA in layers 2 and 5 of 5 (from 1), a query latent and biases, two dense layers, two shared experts, weights
    # not renormalised, a 3-tap convolution: written as Moonshot's linear_attn_config
    "kimi_linear-q-latent": dict(
        num_hidden_layers=5, q_lora_rank=24, attention_bias=True, n_shared_experts=2, norm_topk_prob=False,
        routed_scaling_factor=1.5, first_k_dense_replace=2, n_group=2, topk_group=1,
        linear_attn_config=dict(kda_layers=[1, 3, 4], full_attn_layers=[2, 5], num_heads=2, head_dim=8,
                                short_conv_kernel_size=3)),
}
CASES = [("kimi_linear", "sharded"), ("kimi_linear", "bf16"), ("kimi_linear-q-latent", "plain")]
IDS = [f"{name}-{storage}" for name, storage in CASES]


def hf_config(name: str):
    return transformers.KimiLinearConfig(**{**COMMON, **FAMILIES[name]})


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """(name, storage) -> (directory, transformers model, attnlab model); written once for the module."""
    written = written_and_loaded(tmp_path_factory.mktemp("hf-kimi-linear"), CASES, hf_config)
    return {key: (d, hf, model) for key, (d, hf, model, _) in written.items()}


def test_each_checkpoint_becomes_the_model_with_its_features(checkpoints):
    kimi = checkpoints["kimi_linear", "sharded"][2]
    c = kimi.config
    assert isinstance(kimi, KimiLinearModel) and c.layer_types == ["linear_attention"] * 3 + ["full_attention"]
    assert all(isinstance(b.attn, KimiDeltaAttention) for b in kimi.blocks[:3])
    mla = kimi.blocks[3].attn
    assert isinstance(mla, LatentAttention) and mla.rotary is None and mla.scale == 16 ** -0.5  # no RoPE
    assert c.moe_layer_flags == (False, True, True, True) and (c.n_group, c.topk_group) == (4, 2)
    assert kimi.blocks[1].ff.router.e_score_correction_bias.abs().max() > 0.05     # loaded, not left at zeros
    q = checkpoints["kimi_linear-q-latent", "plain"][2]
    assert q.config.layer_types == ["linear_attention", "full_attention", "linear_attention", "linear_attention",
                                    "full_attention"]
    assert q.config.moe_layer_flags == (False, False, True, True, True)
    assert (q.config.q_lora_rank, q.config.attention_bias, q.config.linear_conv_kernel) == (24, True, 3)
    assert not q.config.norm_topk_prob and q.blocks[2].ff.spec.d_shared == 32
    assert len(sorted(checkpoints["kimi_linear", "sharded"][0].glob("*.safetensors"))) > 1
    with safe_open(str(next(checkpoints["kimi_linear", "bf16"][0].glob("*.safetensors"))), framework="pt") as f:
        assert f.get_tensor("model.embed_tokens.weight").dtype == torch.bfloat16


def rechunked(model, chunk_size):
    """The same model with the delta rule in chunks of ``chunk_size`` (the spec is the module's recipe)."""
    for block in model.blocks:
        if isinstance(block.attn, KimiDeltaAttention):
            block.attn.spec = dataclasses.replace(block.attn.spec, chunk_size=chunk_size)
    return model


#: a row alone starts its chunks elsewhere than in the padded batch: the same sums in another order, and the per-channel
#: decays' exp(Σ log α) round more than one decay per head (logits up to ~5; transformers' own padded and lone rows
#: differ by 1.6e-4 at 90 tokens in the bf16 case)
ALONE = 2.5e-4


@pytest.mark.parametrize(("name", "storage"), CASES, ids=IDS)
@pytest.mark.parametrize(("t", "lengths", "chunk"), [(16, (16, 11, 5), 5), (16, (16, 11, 5), 64), (90, (90, 83), 64)])
def test_left_padded_batch_equals_transformers_and_each_row_alone(name, storage, t, lengths, chunk, checkpoints):
    """Left-padded rows equal to transformers' (1e-4) and to themselves alone; each row alone, without padding, equal
    to transformers' row alone (1e-4)."""
    _, hf, model = checkpoints[name, storage]
    try:
        assert_left_padded_batch_equals(rechunked(model, chunk), hf, ATOL, lengths, seed=t, alone_atol=ALONE)
        ids = left_padded(lengths, t, seed=t)[0]
        with torch.no_grad():
            for i, n in enumerate(lengths):
                row = ids[i : i + 1, t - n :]
                torch.testing.assert_close(model(row).logits, hf(row).logits, atol=ATOL, rtol=0)
    finally:
        rechunked(model, 64)


@pytest.mark.parametrize(("name", "storage"), CASES, ids=IDS)
def test_greedy_40_tokens_equal_transformers(name, storage, checkpoints):
    _, hf, model = checkpoints[name, storage]
    greedy_equals_generate(hf, model, GREEDY)


@pytest.mark.parametrize(("name", "storage"), CASES[1:], ids=IDS[1:])   # the shards hold the bf16 case's weights
@pytest.mark.parametrize(("t", "lengths", "prefix"), [(16, (16, 11), 10), (90, (90, 77), 70)])
def test_cache_equals_recomputation(name, storage, t, lengths, prefix, checkpoints):
    """The prefix in one call (70 tokens: two chunks), then a token at a time from the cached memories and latents."""
    model = checkpoints[name, storage][2]
    ids, mask = left_padded(lengths, t, seed=2)
    cached, full = cached_and_full_logits(model, ids, mask, prefix)
    real = mask.bool()
    scale = float(full[real].abs().max().clamp(min=1))  # 1e-5 of the largest logit: float32 rounding
    torch.testing.assert_close(cached[real], full[real], atol=1e-5 * scale, rtol=0)
    cache = model.new_cache(2)
    with torch.no_grad():
        model(ids, attention_mask=mask, kv_cache=cache)
    c = model.config
    assert isinstance(cache, HybridCache)
    assert [type(layer) for layer in cache.layers] == [LatentLayerCache if kind == "full_attention" else
                                                       RecurrentLayerCache for kind in c.layer_types]
    assert cache.filled_nbytes() == c.cache_bytes(t, batch=2, dtype=torch.float32)


def as_moonshot_wrote_it(d, tmp_path):
    """The checkpoint with Moonshot's config.json (``linear_attn_config``, ``first_k_dense_replace``, its router
    fields; no ``layer_types``, ``mlp_layer_types`` nor flat ``linear_*``) and its dense layer's tensors under
    ``mlp``, as moonshotai/Kimi-Linear-48B-A3B-Instruct stores them."""
    out = tmp_path / "moonshot"
    shutil.copytree(d, out)
    raw = json.loads((out / "config.json").read_text())
    for field in ("layer_types", "mlp_layer_types", "linear_num_heads", "linear_head_dim", "linear_conv_kernel_dim"):
        raw.pop(field)
    raw |= dict(linear_attn_config=dict(kda_layers=[1, 2, 3], full_attn_layers=[4], num_heads=2, head_dim=8,
                                        short_conv_kernel_size=4),
                first_k_dense_replace=1, mla_use_nope=True, moe_router_activation_func="sigmoid", moe_layer_freq=1,
                use_grouped_topk=True, num_nextn_predict_layers=0, head_dim=72, rope_theta=10000.0, rope_scaling=None)
    (out / "config.json").write_text(json.dumps(raw))
    tensors = load_file(out / "model.safetensors")
    save_file({k.replace("layers.0.block_sparse_moe.", "layers.0.mlp."): v for k, v in tensors.items()},
              out / "model.safetensors")
    return out


def test_moonshots_own_config_and_names_load_the_same_model(checkpoints, tmp_path):
    """...and transformers reads that directory as the same model too."""
    d, hf, model = checkpoints["kimi_linear", "bf16"]
    moonshot = as_moonshot_wrote_it(d, tmp_path)
    theirs = load_causal_lm(moonshot)[0]
    assert theirs.config.layer_types == model.config.layer_types
    reference = transformers.KimiLinearForCausalLM.from_pretrained(moonshot, dtype=torch.float32).eval()
    ids, mask = left_padded((20, 9), 20, seed=4)
    with torch.no_grad():
        got = theirs(ids, attention_mask=mask).logits
        torch.testing.assert_close(got, model(ids, attention_mask=mask).logits, atol=0, rtol=0)
        for want in (hf(ids, attention_mask=mask).logits, reference(ids, attention_mask=mask).logits):
            torch.testing.assert_close(got[mask.bool()], want[mask.bool()], atol=ATOL, rtol=0)


def test_the_parameter_count_of_the_48b_preset_is_transformers(tmp_path):
    """moonshotai/Kimi-Linear-48B-A3B's config.json read by the loader: the preset's config, 49,122,675,072
    parameters (transformers' count of the same config on the meta device: tests/models/test_kimi_linear.py)."""
    from attnlab.models.modern.kimi_linear import KimiLinearConfig
    from attnlab.pretrained.kimi_linear import read_config

    full = [4, 8, 12, 16, 20, 24, 27]
    raw = dict(architectures=["KimiLinearForCausalLM"], model_type="kimi_linear", vocab_size=163840,
               hidden_size=2304, intermediate_size=9216, moe_intermediate_size=1024, num_hidden_layers=27,
               num_attention_heads=32, num_key_value_heads=32, head_dim=72, model_max_length=1048576,
               rms_norm_eps=1e-5, kv_lora_rank=512, q_lora_rank=None, qk_nope_head_dim=128, qk_rope_head_dim=64,
               v_head_dim=128, mla_use_nope=True, num_experts=256, num_experts_per_token=8, num_shared_experts=1,
               num_expert_group=1, topk_group=1, moe_renormalize=True, moe_router_activation_func="sigmoid",
               routed_scaling_factor=2.446, first_k_dense_replace=1, moe_layer_freq=1, use_grouped_topk=True,
               num_nextn_predict_layers=0, tie_word_embeddings=False, rope_theta=10000.0, rope_scaling=None,
               hidden_act="silu", linear_attn_config=dict(full_attn_layers=full, kda_layers=[
                   i for i in range(1, 28) if i not in full], num_heads=32, head_dim=128, short_conv_kernel_size=4))
    config = read_config(raw, tmp_path / "config.json")
    preset = KimiLinearConfig.from_preset("kimi-linear-48b-a3b")
    assert dataclasses.replace(config, mlp_layer_types=None) == preset
    with torch.device("meta"):
        assert KimiLinearModel(config).num_parameters() == 49_122_675_072


# ---- bad input: a clear error, never a silently wrong model ------------------------------------------------------
def edited(checkpoints, tmp_path, key=("kimi_linear", "bf16"), **changes):
    """A copy of a written checkpoint with ``changes`` made to its config.json (None: the field removed)."""
    d = tmp_path / "bad"
    shutil.copytree(checkpoints[key][0], d)
    raw = {**json.loads((d / "config.json").read_text()), **changes}
    (d / "config.json").write_text(json.dumps({k: v for k, v in raw.items() if v is not None}))
    return d


LISTS = dict(num_heads=2, head_dim=8, short_conv_kernel_size=4)


@pytest.mark.parametrize(("changes", "match"), [
    (dict(linear_attn_config=dict(LISTS, kda_layers=[1, 2, 3], full_attn_layers=[5])),
     r"cannot honour linear_attn_config\['kda_layers', 'full_attn_layers'\]=\[\[1, 2, 3\], \[5\]\]: the two lists "
     r"together number every layer from 1 to num_hidden_layers=4 once"),
    (dict(linear_attn_config=dict(LISTS, kda_layers=[0, 1, 2], full_attn_layers=[3])), r"from 1 to"),
    (dict(linear_attn_config=dict(LISTS, kda_layers=["1", 2, 3], full_attn_layers=[4])), r"from 1 to"),
    (dict(linear_attn_config=dict(LISTS, kda_layers=[1, 2, 3])), r"linear_attn_config\['kda_layers'\]=\[1, 2, 3\]: "
                                                                 r"give kda_layers and full_attn_layers together"),
    (dict(linear_attn_config=dict(LISTS, kda_layers=[1, 2, 4], full_attn_layers=[3])),
     r"cannot honour layer_types=.*linear_attn_config's lists say"),
    (dict(linear_attn_config=dict(LISTS, gate_lower_bound=-5.0)), r"linear_attn_config\['gate_lower_bound'\]=-5.0"),
    (dict(linear_attn_config=dict(num_heads=4)), r"cannot honour linear_num_heads=2: "
                                                 r"linear_attn_config\['num_heads'\]=4 says otherwise"),
    (dict(linear_head_dim=6), r"tensor 'model\.layers\.0\.self_attn\.[\w.]+' has shape"),
    (dict(num_experts=6), r"n_routed_experts=6 must be divisible by n_group=4"),
    (dict(num_expert_group=3), r"n_routed_experts=8 must be divisible by n_group=3"),
    (dict(topk_group=5), r"topk_group=5 must be at most n_group=4"),
    (dict(n_group=2), r"cannot honour num_expert_group=4: n_group=2 says otherwise"),
    (dict(mla_use_nope=False), r"mla_use_nope=False: Kimi Linear's MLA layers carry no RoPE"),
    (dict(rope_scaling={"type": "yarn", "factor": 4.0}), r"rope_scaling=.*no layer turns by RoPE"),
    (dict(moe_router_activation_func="softmax"), r"moe_router_activation_func='softmax'"),
    (dict(moe_layer_freq=2), r"moe_layer_freq=2"),
    (dict(use_grouped_topk=False), r"use_grouped_topk=False"),
    (dict(num_nextn_predict_layers=1), r"num_nextn_predict_layers=1"),
    (dict(num_key_value_heads=2), r"num_key_value_heads=2"),
    (dict(qk_head_dim=12), r"qk_head_dim=12: expected 16"),
    (dict(hidden_act="gelu"), r"hidden_act='gelu'"),
    (dict(layer_types=["linear_attention"] * 3), r"layer_types must list num_layers=4 entries"),
    (dict(mlp_layer_types=["dense", "moe", "sparse", "sparse"]), r"mlp_layer_types must list num_layers=4 entries"),
    (dict(first_k_dense_replace=2), r"mlp_layer_types=.*first_k_dense_replace=2 says"),
    (dict(quantization_config={"quant_method": "fp8"}), r"quantization_config=.*kimi_linear config"),
])
def test_bad_configs_are_refused_by_name(checkpoints, tmp_path, changes, match):
    with pytest.raises(ValueError, match=match):
        load_causal_lm(edited(checkpoints, tmp_path, **changes))


def test_an_unsupported_architecture_names_the_supported_ones(checkpoints, tmp_path):
    d = edited(checkpoints, tmp_path, architectures=["KimiForCausalLM"], model_type="kimi")
    with pytest.raises(ValueError, match=r"unsupported architecture \['KimiForCausalLM'\].*KimiLinearForCausalLM"):
        load_causal_lm(d)
