"""load_causal_lm on SmolLM3 checkpoints written by transformers (fp32 in 20 KB shards, bf16, and with the window
option on its NoPE layers): every fourth layer without RoPE, computed as transformers' SmolLM3ForCausalLM does
(tests/hf_parity.py: logits ≤ 1e-4 on a left-padded batch, 40 greedy tokens alone and batched, the cache =
recomputation), and the fields it cannot honour named with their values."""

import json
import shutil

import pytest

from attnlab.models import ModernDecoder
from attnlab.models.modern.smollm3 import SmolLM3Config
from attnlab.pretrained import load_causal_lm
from hf_parity import (
    assert_cache_equals_recomputation,
    assert_greedy_equals_generate,
    assert_logits_equal_transformers,
    written_and_loaded,
)

pytest.importorskip("transformers")
CASES = [("smollm3", "sharded"), ("smollm3", "bf16"), ("smollm3-windowed", "plain")]
IDS = [f"{arch}-{storage}" for arch, storage in CASES]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """(arch, storage) -> (directory, transformers model, attnlab model)."""
    return written_and_loaded(tmp_path_factory.mktemp("hf-smollm3"), CASES)


def test_the_nope_layers_and_the_window_are_read(checkpoints):
    model = checkpoints["smollm3", "sharded"][2]
    assert isinstance(model, ModernDecoder) and isinstance(model.config, SmolLM3Config)
    assert model.config.nope_layers == [3] and model.config.rope_base == 1000.0
    assert [block.attn.rotary is None for block in model.blocks] == [False, False, False, True]
    windowed = checkpoints["smollm3-windowed", "plain"][2]
    assert windowed.config.nope_layers == [1, 3] and windowed.config.sliding_window == 5
    assert [block.attn.spec.sliding_window for block in windowed.blocks] == [None, 5, None, 5]


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


def test_the_rope_base_defaults_to_smollm3s_own(checkpoints, tmp_path):
    d = tmp_path / "no-rope"
    shutil.copytree(checkpoints["smollm3", "bf16"][0], d)
    raw = json.loads((d / "config.json").read_text())
    raw.pop("rope_parameters")
    (d / "config.json").write_text(json.dumps(raw))
    assert load_causal_lm(d)[0].config.rope_base == 2000000.0


@pytest.mark.parametrize(("fields", "match"), [
    (dict(no_rope_layers=[1, 1, 0]), r"cannot honour no_rope_layers=\[1, 1, 0\]: one flag per layer \(4\), 1 where the "
                                     r"layer uses RoPE, 0 where it does not"),
    (dict(no_rope_layers=[1, 2, 1, 0]), r"cannot honour no_rope_layers=\[1, 2, 1, 0\]"),
    (dict(no_rope_layers=None, no_rope_layer_interval=0), r"cannot honour no_rope_layer_interval=0: an int >= 1"),
    (dict(layer_types=["full_attention"] * 3 + ["sliding_attention"], sliding_window=4),
     r"cannot honour layer_types=\[.*\]: sliding_attention layers need use_sliding_window and a sliding_window"),
    (dict(use_sliding_window=True, sliding_window=4, layer_types=["sliding_attention"] * 2),
     r"SmolLM3Config: layer_types must list num_layers=4 entries"),
    (dict(hidden_act="relu"), r"cannot honour hidden_act='relu'"),
    (dict(attn_logit_softcapping=30.0), r"cannot honour attn_logit_softcapping=30\.0: attnlab does not implement this "
                                        r"field of a smollm3 config"),
])
def test_config_fields_it_cannot_honour_are_named_with_their_value(checkpoints, tmp_path, fields, match):
    d = tmp_path / "bad"
    shutil.copytree(checkpoints["smollm3", "bf16"][0], d)
    raw = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**raw, **fields}))
    with pytest.raises(ValueError, match=match):
        load_causal_lm(d)
