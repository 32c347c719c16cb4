"""load_causal_lm on Gemma 4 text checkpoints written by transformers (fp32 in one file and in 20 KB shards, bf16,
and one without its options): sliding and global layers with heads of their own, k_eq_v, shared-KV layers,
proportional RoPE, per-layer inputs and the final soft-cap, computed as transformers' Gemma4ForCausalLM does
(tests/hf_parity.py: logits ≤ 1e-4 on a left-padded batch, 40 greedy tokens alone and batched, the cache =
recomputation past the window), and the fields it cannot honour named with their values."""

import json
import shutil

import pytest

from attnlab.models.modern.gemma4 import Gemma4Config, Gemma4Decoder
from attnlab.pretrained import load_causal_lm
from hf_parity import (
    assert_cache_equals_recomputation,
    assert_greedy_equals_generate,
    assert_logits_equal_transformers,
    written_and_loaded,
)

pytest.importorskip("transformers")
CASES = [("gemma4", "plain"), ("gemma4", "sharded"), ("gemma4", "bf16"), ("gemma4-plain", "plain")]
IDS = [f"{arch}-{storage}" for arch, storage in CASES]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """(arch, storage) -> (directory, transformers model, attnlab model)."""
    return written_and_loaded(tmp_path_factory.mktemp("hf-gemma4"), CASES)


def test_every_option_is_read(checkpoints):
    model = checkpoints["gemma4", "sharded"][2]
    c = model.config
    assert isinstance(model, Gemma4Decoder) and isinstance(c, Gemma4Config)
    assert (c.head_dim, c.num_kv_heads, c.global_head_dim, c.num_global_kv_heads) == (8, 2, 16, 1)
    assert c.k_eq_v and c.num_kv_shared_layers == 2 and c.double_wide_mlp and c.d_layer_input == 8
    assert (c.rope_base, c.rope_local_base, c.global_rope_fraction) == (1000000.0, 10000.0, 0.25)
    assert c.sliding_window == 5 and c.final_softcap == 10.0 and c.layer_types[-1] == "full_attention"
    plain = checkpoints["gemma4-plain", "plain"][2].config
    assert not plain.k_eq_v and plain.num_kv_shared_layers == 0 and plain.d_layer_input == 0
    assert plain.num_global_kv_heads == 2  # without k_eq_v transformers keeps the sliding layers' heads


@pytest.mark.parametrize(("arch", "storage"), CASES, ids=IDS)
def test_left_padded_batch_equals_transformers_and_each_row_alone(arch, storage, checkpoints):
    _, hf, model = checkpoints[arch, storage]
    assert_logits_equal_transformers(hf, model)


@pytest.mark.parametrize(("arch", "storage"), CASES, ids=IDS)
def test_greedy_40_tokens_equal_transformers(arch, storage, checkpoints):
    _, hf, model = checkpoints[arch, storage]
    assert_greedy_equals_generate(hf, model)


@pytest.mark.parametrize(("arch", "storage"), CASES, ids=IDS)
def test_kv_cache_equals_recomputation(arch, storage, checkpoints):
    assert_cache_equals_recomputation(checkpoints[arch, storage][2])


def edited(checkpoints, tmp_path, **fields):
    """The bf16 checkpoint with ``fields`` set in its config.json (None: removed)."""
    d = tmp_path / "edited"
    shutil.copytree(checkpoints["gemma4", "bf16"][0], d)
    raw = json.loads((d / "config.json").read_text())
    raw.update(fields)
    (d / "config.json").write_text(json.dumps({k: v for k, v in raw.items() if v is not None}))
    return d


def test_the_older_global_fields_read_as_per_layer_config(checkpoints, tmp_path):
    d = edited(checkpoints, tmp_path, per_layer_config=None, global_head_dim=16, num_global_key_value_heads=1)
    c = load_causal_lm(d)[0].config
    assert (c.global_head_dim, c.num_global_kv_heads) == (16, 1)



def test_the_last_layer_is_global_whatever_the_file_says(checkpoints, tmp_path):
    """transformers forces the last layer to full_attention (with a warning); so does the loader."""
    d = edited(checkpoints, tmp_path, layer_types=["sliding_attention", "sliding_attention", "full_attention"]
               + ["sliding_attention"] * 3)
    assert load_causal_lm(d)[0].config.layer_types[-1] == "full_attention"


@pytest.mark.parametrize(("fields", "match"), [
    (dict(enable_moe_block=True), r"cannot honour enable_moe_block=True: the decoder attends causally, with one "
                                  r"feed-forward a layer"),
    (dict(num_experts=4), r"cannot honour num_experts=4: attnlab does not implement this field of a gemma4_text "
                          r"config"),
    (dict(use_bidirectional_attention="all"), r"cannot honour use_bidirectional_attention='all'"),
    (dict(hidden_activation="silu"), r"cannot honour hidden_activation='silu': Gemma's feed-forward gates with "
                                     r"GELU's tanh form"),
    (dict(vocab_size_per_layer_input=100), r"cannot honour vocab_size_per_layer_input=100: the per-layer table has "
                                           r"a row per token of the vocabulary \(300\)"),
    (dict(rope_parameters={"full_attention": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 2.0}}),
     r"cannot honour rope_parameters=.*: the global layers' RoPE is plain or proportional"),
    (dict(rope_parameters={"sliding_attention": {"rope_type": "linear", "rope_theta": 1e4, "factor": 2.0}}),
     r"cannot honour rope_parameters=.*: the sliding layers' RoPE is plain"),
    (dict(per_layer_config={"2": {"head_dim": 16}}), r"cannot honour per_layer_config=\{'2': \{'head_dim': 16\}\}: "
                                                     r"the same head_dim \(and num_key_value_heads\) on every "
                                                     r"full_attention layer, and on no other"),
    (dict(layer_types=["full_attention"] * 3), r"cannot honour layer_types=\[.*\]: one of sliding_attention, "
                                               r"full_attention per layer \(6\)"),
    (dict(num_kv_shared_layers=5), r"Gemma4Config: layer 2 shares the keys of the last earlier layer of its kind "
                                   r"\(full_attention\), but none of the first 1 layers is one"),
    (dict(hidden_size_per_layer_input=-2), r"d_layer_input must be an int >= 0"),
])
def test_config_fields_it_cannot_honour_are_named_with_their_value(checkpoints, tmp_path, fields, match):
    with pytest.raises(ValueError, match=match):
        load_causal_lm(edited(checkpoints, tmp_path, **fields))


def test_transformers_default_config_reads_as_the_preset(tmp_path):
    """config.json as transformers writes Gemma4TextConfig() (its per_layer_config, its rope per layer type) is the
    preset gemma-4-text, field for field."""
    import transformers

    from attnlab.pretrained.gemma4 import read_config

    path = tmp_path / "config.json"
    transformers.Gemma4TextConfig().to_json_file(path)
    raw = json.loads(path.read_text())
    assert set(raw["per_layer_config"]) == {"05", "11", "17", "23", "29"}  # padded to one width
    assert read_config(raw, path) == Gemma4Config.from_preset("gemma-4-text")
