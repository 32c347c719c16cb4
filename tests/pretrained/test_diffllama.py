"""load_causal_lm on DiffLlama checkpoints written by transformers (fp32 in 20 KB shards, and bf16): its differential
attention, its λ of every layer and depth, computed as transformers' DiffLlamaForCausalLM does (tests/hf_parity.py:
logits ≤ 1e-4 on a left-padded batch, 40 greedy tokens alone and batched, the cache = recomputation), and the fields
it cannot honour named with their values."""

import json
import shutil

import pytest
import torch

from attnlab.attention.differential import DifferentialAttention
from attnlab.models import ModernDecoder
from attnlab.models.modern.diffllama import DiffLlamaConfig
from attnlab.pretrained import load_causal_lm
from hf_parity import (
    assert_cache_equals_recomputation,
    assert_greedy_equals_generate,
    assert_logits_equal_transformers,
    written_and_loaded,
)

pytest.importorskip("transformers")
STORAGES = ("sharded", "bf16")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """storage -> (directory, transformers model, attnlab model)."""
    written = written_and_loaded(tmp_path_factory.mktemp("hf-diffllama"), [("diffllama", s) for s in STORAGES])
    return {storage: written["diffllama", storage] for storage in STORAGES}


def test_the_checkpoint_becomes_a_differential_decoder_with_its_lambdas(checkpoints):
    _, hf, model = checkpoints["sharded"]
    assert isinstance(model, ModernDecoder) and isinstance(model.config, DiffLlamaConfig)
    assert (model.config.num_heads, model.config.num_kv_heads, model.config.head_dim) == (8, 4, 8)
    for i, block in enumerate(model.blocks):
        theirs = hf.model.layers[i].self_attn
        assert type(block.attn) is DifferentialAttention and block.attn.lambda_init == theirs.lambda_init
        assert torch.equal(block.attn.lambda_q2, theirs.lambda_q2)
    assert len(sorted(checkpoints["sharded"][0].glob("*.safetensors"))) > 1


@pytest.mark.parametrize("storage", STORAGES)
def test_left_padded_batch_equals_transformers_and_each_row_alone(storage, checkpoints):
    _, hf, model = checkpoints[storage]
    assert_logits_equal_transformers(hf, model)


@pytest.mark.parametrize("storage", STORAGES)
def test_greedy_40_tokens_equal_transformers(storage, checkpoints):
    _, hf, model = checkpoints[storage]
    assert_greedy_equals_generate(hf, model)


@pytest.mark.parametrize("storage", STORAGES)
def test_kv_cache_equals_recomputation(storage, checkpoints):
    assert_cache_equals_recomputation(checkpoints[storage][2])


def edited(checkpoints, tmp_path, **fields):
    d = tmp_path / "bad"
    shutil.copytree(checkpoints["bf16"][0], d)
    raw = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**raw, **fields}))
    return d


@pytest.mark.parametrize(("fields", "match"), [
    (dict(attention_dropout=0.1), r"cannot honour attention_dropout=0\.1: differential attention has no dropout"),
    (dict(hidden_act="gelu"), r"cannot honour hidden_act='gelu': the SwiGLU feed-forward gates with SiLU"),
    (dict(num_key_value_heads=1), r"DiffLlamaConfig: differential attention pairs its heads .* so num_kv_heads must "
                                  r"be even, got num_kv_heads=1"),
    (dict(lambda_std_dev=-1.0), r"DiffLlamaConfig: lambda_std must be a finite number > 0, got -1\.0"),
    (dict(use_sliding_window=True), r"cannot honour use_sliding_window=True: attnlab does not implement this field of "
                                    r"a diffllama config"),
])
def test_config_fields_it_cannot_honour_are_named_with_their_value(checkpoints, tmp_path, fields, match):
    with pytest.raises(ValueError, match=match):
        load_causal_lm(edited(checkpoints, tmp_path, **fields))


def test_a_lambda_of_the_wrong_size_is_named(checkpoints, tmp_path):
    from safetensors.torch import load_file, save_file

    d = edited(checkpoints, tmp_path)
    name = "model.layers.2.self_attn.lambda_k1"
    shard = sorted(d.glob("*.safetensors"))[0]
    save_file({**load_file(shard), name: torch.ones(16)}, shard)
    with pytest.raises(ValueError, match=rf"tensor '{name}' has shape \(16,\), but the model in config.json expects "
                                         r"\(8,\)"):
        load_causal_lm(d)
