"""load_causal_lm: Qwen3, Gemma 2, Gemma 3 and Phi-3, and the options the first families refused, computed as
transformers does.

Each family is written twice by transformers' ``save_pretrained`` (tests/hf_checkpoints.py): once in 20 KB shards,
once in bfloat16 (compared with the transformers model holding the same rounded weights, in float32). Logits agree
to 1e-4 on a left-padded batch (each row also equal to itself alone); greedy decoding gives the same 40 tokens as
``generate`` there, alone and in a left-padded batch; the KV cache equals recomputing. The sequences stay within
``max_position_embeddings`` (64).
"""

import json

import pytest
import torch
from safetensors import safe_open

from attnlab.generation import GenerationConfig, generate
from attnlab.inspect import capture, explain
from attnlab.models import GPT, ModernDecoder
from attnlab.pretrained import load_causal_lm
from hf_checkpoints import (
    NEWER,
    OPTIONS,
    assert_left_padded_batch_equals,
    cached_and_full_logits,
    greedy_equals_generate,
    hf_positions,
    left_padded,
    written_and_loaded,
)

pytest.importorskip("transformers")
GREEDY = GenerationConfig(temperature=0)
UNCACHED = GREEDY.replace(use_cache=False)  # the whole window recomputed at every step
ATOL = 1e-4
CASES = [(arch, storage) for arch in NEWER for storage in ("sharded", "bf16")] + [(o, "plain") for o in OPTIONS]
IDS = [f"{arch}-{storage}" for arch, storage in CASES]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """(arch, storage) -> (directory, transformers model, attnlab model, tokenizer); written once for the module."""
    return written_and_loaded(tmp_path_factory.mktemp("hf-newer"), CASES)


def test_each_family_becomes_the_model_with_its_options(checkpoints):
    def config(arch, storage="sharded"):
        return checkpoints[arch, storage][2].config

    assert config("qwen3").qk_norm == "head"
    gemma2 = config("gemma2")
    assert (gemma2.attn_softcap, gemma2.final_softcap, gemma2.query_pre_attn_scalar) == (3.0, 2.0, 16)
    assert gemma2.layer_types == ["sliding_attention", "full_attention"] and gemma2.sliding_window == 4
    assert (gemma2.norm_unit_offset, gemma2.sandwich_norm, gemma2.activation, gemma2.embed_scale) == \
        (True, True, "gelu_tanh", True)
    gemma3 = config("gemma3")
    assert gemma3.layer_types == ["sliding_attention"] * 5 + ["full_attention"] and gemma3.qk_norm == "head"
    assert (gemma3.rope_base, gemma3.rope_local_base) == (50.0, 10000.0)
    phi3 = config("phi3")
    assert phi3.sliding_window == 5 and phi3.layer_types is None and phi3.rope_scaling["type"] == "longrope"
    assert (phi3.rope_scaling["factor"], phi3.rope_scaling["original_max_position_embeddings"]) == (2.0, 32)
    assert config("llama-mlp-bias", "plain").mlp_bias
    assert config("qwen2-mixed-windows", "plain").layer_types == ["full_attention"] + ["sliding_attention"] * 2
    assert config("gpt2-inverse-layer-scale", "plain").scale_attn_by_inverse_layer_idx
    scaled = config("gemma3-scaled-global", "plain")
    assert scaled.rope_scaling == {"type": "linear", "factor": 4.0} and scaled.rope_local_base == 10000.0
    for (arch, storage), (d, _, model, _) in checkpoints.items():
        assert isinstance(model, GPT if arch.startswith("gpt2") else ModernDecoder)
        files = sorted(d.glob("*.safetensors"))
        assert (len(files) > 1) == (storage == "sharded"), arch
        if storage == "bf16":
            with safe_open(str(files[0]), framework="pt") as f:
                assert f.get_tensor(next(iter(f.keys()))).dtype == torch.bfloat16
    model = checkpoints["gemma3", "sharded"][2]  # local layers turn q and k with their own base
    assert model.blocks[0].attn.rotary.base == 10000.0 and model.blocks[5].attn.rotary.base == 50.0


@pytest.mark.parametrize(("arch", "storage"), CASES, ids=IDS)
def test_left_padded_batch_equals_transformers_and_each_row_alone(arch, storage, checkpoints):
    _, hf, model, _ = checkpoints[arch, storage]
    assert_left_padded_batch_equals(model, hf, ATOL)


def test_phi3_longrope_past_its_original_length_equals_transformers(checkpoints):
    """40 positions > L₀ = 32: LongRoPE's long factors, in one forward (24-token batches stay on the short ones)."""
    _, hf, model, _ = checkpoints["phi3", "sharded"]
    ids, mask = left_padded((40, 33), 40, seed=4)
    with torch.no_grad():
        got = model(ids, attention_mask=mask).logits
        want = hf(ids, attention_mask=mask, position_ids=hf_positions(mask)).logits
    torch.testing.assert_close(got[mask.bool()], want[mask.bool()], atol=ATOL, rtol=0)
    short = model.rotary.inv_freq(32)
    assert not torch.allclose(model.rotary.inv_freq(40), short)  # the long factors were in force


@pytest.mark.parametrize(("arch", "storage"), CASES, ids=IDS)
def test_greedy_40_tokens_equal_transformers(arch, storage, checkpoints):
    """Phi-3 runs past L₀ = 32 here, where transformers' Phi-3 drops its cache once and recomputes every key with
    LongRoPE's long factors: attnlab's cached decoding does the same, and equals its decoding without a cache
    (docs/newest-attention.md)."""
    _, hf, model, _ = checkpoints[arch, storage]
    cases = greedy_equals_generate(hf, model, GREEDY)
    if arch == "phi3":
        for idx, mask, want in cases:
            assert torch.equal(generate(model, idx, 40, UNCACHED, attention_mask=mask), want)


@pytest.mark.parametrize(("arch", "storage"), CASES, ids=IDS)
def test_kv_cache_equals_recomputation(arch, storage, checkpoints):
    model = checkpoints[arch, storage][2]
    ids, mask = left_padded((16, 11), 16, seed=2)
    cached, full = cached_and_full_logits(model, ids, mask, 10)
    real = mask.bool()
    # 1e-5 of the largest logit: Gemma 3's six sandwich-normed layers give logits up to ~10, and float32 rounding
    # grows with them
    scale = float(full[real].abs().max().clamp(min=1))
    torch.testing.assert_close(cached[real], full[real], atol=1e-5 * scale, rtol=0)


@pytest.mark.parametrize("arch", NEWER)
def test_capture_and_explain_see_what_the_model_computed(arch, checkpoints):
    _, _, model, tokenizer = checkpoints[arch, "sharded"]
    cap = capture(model, "To be, or not to be, that is the question", tokenizer=tokenizer)
    last = cap.num_layers - 1
    for layer in (0, last):
        for head in range(cap.num_heads):
            e = explain(cap, cap.seq_len - 1, layer=layer, head=head)
            assert e.max_abs_diff_weights < 1e-5 and e.max_abs_diff_context < 1e-5, (layer, head)


# ---- bad input: a clear error, never a silently wrong model ------------------------------------------------------
def edited(checkpoints, tmp_path, key, config=None, tensors=None):
    """A copy of a checkpoint with config.json fields replaced, or a tensor of its first shard replaced."""
    import shutil

    from safetensors.torch import load_file, save_file

    d = tmp_path / "bad"
    shutil.copytree(checkpoints[key][0], d)
    if config is not None:
        raw = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**raw, **config}))
    if tensors is not None:
        shard = sorted(d.glob("*.safetensors"))[0]
        save_file(tensors(load_file(shard)), shard)
    return d


@pytest.mark.parametrize(("key", "config", "match"), [
    (("gemma2", "bf16"), {"attn_logit_softcapping": 0.0}, r"cannot honour attn_logit_softcapping=0\.0: a soft-cap"),
    (("gemma2", "bf16"), {"final_logit_softcapping": -30.0}, r"cannot honour final_logit_softcapping=-30\.0"),
    (("gemma3", "bf16"), {"use_bidirectional_attention": True}, r"cannot honour use_bidirectional_attention=True"),
    (("qwen3", "bf16"), {"quantization_config": {"quant_method": "awq"}},
     r"cannot honour quantization_config=\{'quant_method': 'awq'\}: attnlab does not implement this field of a "
     r"qwen3 config"),
    (("phi3", "bf16"), {"rope_parameters": {"rope_type": "ntk", "rope_theta": 1e4}}, r"cannot honour rope type='ntk'"),
    (("phi3", "bf16"), {"rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4, "short_factor": [1.0] * 4}},
     r"cannot honour rope scaling=.*longrope needs short_factor and long_factor"),
    (("phi3", "bf16"), {"rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4, "short_factor": [1.0] * 4,
                                            "long_factor": [1.0] * 3}},
     r"longrope's long_factor needs head_dim/2 = 4 numbers \(one per frequency\), got 3"),
])
def test_config_fields_it_cannot_honour_are_named_with_their_value(checkpoints, tmp_path, key, config, match):
    with pytest.raises(ValueError, match=match):
        load_causal_lm(edited(checkpoints, tmp_path, key, config=config))


def test_a_checkpoint_whose_shapes_disagree_with_its_config_names_the_tensor(checkpoints, tmp_path):
    name = "model.layers.0.self_attn.q_norm.weight"  # Qwen3's per-head norm: head_dim = 8
    d = edited(checkpoints, tmp_path, ("qwen3", "bf16"), tensors=lambda t: {**t, name: torch.ones(32)})
    with pytest.raises(ValueError, match=rf"tensor '{name}' has shape \(32,\), but the model in config.json expects "
                                         r"\(8,\)"):
        load_causal_lm(d)
    name = "model.layers.1.self_attn.qkv_proj.weight"  # Phi-3's fused q, k, v: 32 + 2 · 16 rows
    d = edited(checkpoints, tmp_path / "2", ("phi3", "bf16"), tensors=lambda t: {**t, name: torch.ones(96, 32)})
    with pytest.raises(ValueError, match=rf"tensor '{name}' has shape \(96, 32\), but the model in config.json "
                                         r"expects \(64, 32\)"):
        load_causal_lm(d)
