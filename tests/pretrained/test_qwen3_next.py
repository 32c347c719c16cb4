"""load_causal_lm: Qwen3-Next (every layer a dense SwiGLU: ``mlp_only_layers``) and Qwen3.5's language model, 3:1
hybrids of Gated DeltaNet and gated attention, computed as transformers does.

Each is written by transformers' ``save_pretrained`` (tests/hf_checkpoints.py) in 20 KB shards and in bfloat16, with
partial RoPE on half of each head (Qwen3.5's written as multimodal RoPE, ``mrope_section``). Logits agree to 1e-4
on left-padded batches of 16 and 90 tokens (90: two chunks of the delta rule's 64, in transformers and here; 16:
here in chunks of 5 as well), each row also equal to itself alone; greedy decoding gives the same 40 tokens as
``generate``, alone and in a left-padded batch; the cache (float32 memories, keys and values) equals recomputing.
"""

import dataclasses
import json
import shutil

import pytest
import torch

from attnlab.attention.delta_net import GatedDeltaNet
from attnlab.generation import GenerationConfig
from attnlab.models.modern.hybrid import HybridDecoder
from attnlab.pretrained import load_causal_lm
from hf_checkpoints import (
    VOCAB,
    cached_and_full_logits,
    greedy_equals_generate,
    hf_positions,
    left_padded,
    written_and_loaded,
)

transformers = pytest.importorskip("transformers")
GREEDY = GenerationConfig(temperature=0)
ATOL = 1e-4
FAMILIES = ("qwen3_next", "qwen3_5_text")
CASES = [(family, storage) for family in FAMILIES for storage in ("sharded", "bf16")]
IDS = [f"{family}-{storage}" for family, storage in CASES]


def hf_config(family: str):
    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=8, max_position_embeddings=160, linear_num_key_heads=2,
                  linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=6, rms_norm_eps=1e-6,
                  bos_token_id=None, eos_token_id=None, pad_token_id=None)
    rope = dict(rope_type="default", rope_theta=1000.0, partial_rotary_factor=0.5)
    if family == "qwen3_next":  # a mixture of experts is written into the config, and every layer kept dense
        return transformers.Qwen3NextConfig(**common, rope_parameters=rope, num_experts=4, num_experts_per_tok=2,
                                            mlp_only_layers=[0, 1, 2, 3])
    return transformers.Qwen3_5TextConfig(**common, rope_parameters={**rope, "mrope_section": [1, 1, 0],
                                                                     "mrope_interleaved": True})


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """(family, storage) -> (directory, transformers model, attnlab model, tokenizer); written once for the module."""
    return written_and_loaded(tmp_path_factory.mktemp("hf-qwen3-next"), CASES, hf_config)


def test_each_becomes_a_hybrid_with_its_options(checkpoints):
    for (family, _), (d, _, model, _) in checkpoints.items():
        c = model.config
        assert isinstance(model, HybridDecoder) and c.layer_types == ["linear_attention"] * 3 + ["full_attention"]
        assert (c.partial_rotary_factor, c.rotary_dim, c.linear_value_head_dim) == (0.5, 4, 6)
        assert json.loads((d / "config.json").read_text())["model_type"] == family
        assert all(isinstance(b.attn, GatedDeltaNet) for b in model.blocks[:3])
        assert model.blocks[3].attn.spec.output_gate


def rechunked(model, chunk_size):
    """The same model with the delta rule in chunks of ``chunk_size`` (the spec is the module's recipe)."""
    for block in model.blocks:
        if isinstance(block.attn, GatedDeltaNet):
            block.attn.spec = dataclasses.replace(block.attn.spec, chunk_size=chunk_size)
    return model


@pytest.mark.parametrize(("family", "storage"), CASES, ids=IDS)
@pytest.mark.parametrize(("t", "lengths", "chunk"), [(16, (16, 11, 5), 5), (16, (16, 11, 5), 64), (90, (90, 83), 64)])
def test_left_padded_batch_equals_transformers_and_each_row_alone(family, storage, t, lengths, chunk, checkpoints):
    _, hf, model, _ = checkpoints[family, storage]
    ids, mask = left_padded(lengths, t, seed=t)
    try:
        rechunked(model, chunk)
        with torch.no_grad():
            got = model(ids, attention_mask=mask).logits
            want = hf(ids, attention_mask=mask, position_ids=hf_positions(mask)).logits
            assert want[mask.bool()].std() > 0.3  # logits of order 1: a wrong weight could not hide
            # a row alone starts its chunks elsewhere than in the padded batch: the same sums in another order, so
            # 2e-5 of the largest logit (~10; transformers' own padded and lone rows differ by 1.3e-4 at 90 tokens)
            alone_tolerance = max(ATOL, 2e-5 * float(got[mask.bool()].abs().max()))
            for i, n in enumerate(lengths):
                real = slice(t - n, t)
                torch.testing.assert_close(got[i, real], want[i, real], atol=ATOL, rtol=0)
                alone = model(ids[i : i + 1, real]).logits[0]
                torch.testing.assert_close(got[i, real], alone, atol=alone_tolerance, rtol=0)
    finally:
        rechunked(model, 64)


@pytest.mark.parametrize(("family", "storage"), CASES, ids=IDS)
def test_greedy_40_tokens_equal_transformers(family, storage, checkpoints):
    _, hf, model, _ = checkpoints[family, storage]
    greedy_equals_generate(hf, model, GREEDY)


@pytest.mark.parametrize(("family", "storage"), CASES, ids=IDS)
@pytest.mark.parametrize(("t", "lengths", "prefix"), [(16, (16, 11), 10), (90, (90, 77), 70)])
def test_cache_equals_recomputation(family, storage, t, lengths, prefix, checkpoints):
    """The prefix in one call (70 tokens: two chunks), then a token at a time from the cached memories."""
    model = checkpoints[family, storage][2]
    ids, mask = left_padded(lengths, t, seed=2)
    cached, full = cached_and_full_logits(model, ids, mask, prefix)
    real = mask.bool()
    scale = float(full[real].abs().max().clamp(min=1))  # 1e-5 of the largest logit: float32 rounding
    torch.testing.assert_close(cached[real], full[real], atol=1e-5 * scale, rtol=0)


# ---- bad input: a clear error, never a silently wrong model ------------------------------------------------------
def edited(checkpoints, tmp_path, key, **changes):
    d = tmp_path / "bad"
    shutil.copytree(checkpoints[key][0], d)
    raw = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**raw, **changes}))
    return d


NEXT, NEXT5 = ("qwen3_next", "bf16"), ("qwen3_5_text", "bf16")


@pytest.mark.parametrize(("key", "changes", "match"), [
    # config.json makes layers 2 and 3 mixtures of experts (tests/pretrained/test_qwen3_next_moe.py) where the
    # checkpoint holds their dense SwiGLUs
    (NEXT, {"mlp_only_layers": [0, 1]}, r"unexpected tensor 'model\.layers\.2\.mlp\.down_proj\.weight'"),
    (NEXT5, {"rope_parameters": {"rope_type": "default", "rope_theta": 1e3, "partial_rotary_factor": 0.5,
                                 "mrope_section": [2, 1, 0]}},
     r"cannot honour mrope_section=\[2, 1, 0\]: multimodal RoPE gives each of the 2 turned frequency pairs"),
    (NEXT5, {"rope_parameters": {"rope_type": "default", "rope_theta": 1e3, "partial_rotary_factor": 0.5,
                                 "mrope_interleaved": "yes"}}, r"cannot honour mrope_interleaved='yes'"),
    (NEXT5, {"attn_output_gate": False}, r"cannot honour attn_output_gate=False"),
    (NEXT5, {"use_sliding_window": True}, r"cannot honour use_sliding_window=True"),
    (NEXT5, {"mamba_ssm_dtype": "bfloat16"}, r"cannot honour mamba_ssm_dtype='bfloat16': the memory is kept in "
                                             r"float32"),
    (NEXT5, {"hidden_act": "gelu"}, r"cannot honour hidden_act='gelu'"),
    (NEXT5, {"num_experts": 8}, r"cannot honour num_experts=8: attnlab does not implement this field of a "
                                r"qwen3_5_text config"),
    (NEXT5, {"layer_types": ["linear_attention", "full_attention"]}, r"layer_types must list num_layers=4 entries"),
    (NEXT, {"linear_num_value_heads": 3}, r"linear_num_value_heads=3 must be a multiple of linear_num_key_heads=2"),
])
def test_config_fields_it_cannot_honour_are_named_with_their_value(checkpoints, tmp_path, key, changes, match):
    with pytest.raises(ValueError, match=match):
        load_causal_lm(edited(checkpoints, tmp_path, key, **changes))


def test_a_linear_head_size_the_tensors_do_not_have_names_the_tensor(checkpoints, tmp_path):
    """config.json says value heads of 8 where the checkpoint's are 6 wide: the first tensor it shows in."""
    with pytest.raises(ValueError, match=r"tensor 'model\.layers\.0\.linear_attn\.\w+\.weight' has shape "
                                         r"\(\d+(, \d+)*\), but the model in config.json expects"):
        load_causal_lm(edited(checkpoints, tmp_path, NEXT5, linear_value_head_dim=8))
