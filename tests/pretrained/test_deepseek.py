"""load_causal_lm: DeepSeek-V2, V3 and V3.2 checkpoints computed as transformers computes them.

Each case is a small random model written by transformers' ``save_pretrained`` with its family's features on: MLA
with and without a query latent, both rotary layouts, YaRN with DeepSeek's mscale, the attention's biases, dense
layers before the mixtures, the experts in groups (V3's sigmoid router with its correction bias, V2's softmax
``greedy`` and ``group_limited_greedy``), shared experts, V3.2's sparse attention with its indexer choosing fewer
keys than the sequence holds. V3 is also written in 20 KB shards and in bfloat16 (compared
with the transformers model holding the same rounded weights, in float32). Weights of order 1 (tests/hf_checkpoints.py)
and a correction bias that changes choices. Logits agree to 1e-4 on a left-padded batch (each row also equal to
itself alone); greedy decoding gives the same 40 tokens as ``generate``, alone and in a left-padded batch; the latent
cache equals recomputing. The sequences stay within ``max_position_embeddings`` (64).
"""

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from attnlab.generation import GenerationConfig, generate
from attnlab.models.caches import LatentCache
from attnlab.models.modern.deepseek import DeepseekConfig, DeepseekModel
from attnlab.pretrained import load_causal_lm
from hf_checkpoints import (
    VOCAB,
    assert_left_padded_batch_equals,
    cached_and_full_logits,
    left_padded,
    order_one_weights,
    write_tokenizer,
)

transformers = pytest.importorskip("transformers")
GREEDY = GenerationConfig(temperature=0)
ATOL = 1e-4
YARN = dict(rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=16, mscale=0.707,
            mscale_all_dim=1.0, beta_fast=32.0, beta_slow=1.0)
COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=3,
              num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8,
              v_head_dim=12, n_routed_experts=8, num_experts_per_tok=3, first_k_dense_replace=1,
              max_position_embeddings=64, bos_token_id=None, eos_token_id=None, pad_token_id=None,
              attn_implementation="eager")
#: name -> (transformers' model class, its config's fields beyond COMMON)
FAMILIES = {
    "v3": ("DeepseekV3ForCausalLM", dict(q_lora_rank=24, n_group=4, topk_group=2, n_shared_experts=1,
                                         routed_scaling_factor=2.5, rope_parameters=YARN)),
    "v3-no-q-latent": ("DeepseekV3ForCausalLM", dict(q_lora_rank=None, n_group=2, topk_group=1, n_shared_experts=2,
                                                     routed_scaling_factor=1.5, norm_topk_prob=False,
                                                     rope_interleave=False)),
    "v2": ("DeepseekV2ForCausalLM", dict(q_lora_rank=24, n_group=4, topk_group=2, n_shared_experts=1,
                                         topk_method="group_limited_greedy", routed_scaling_factor=1.5,
                                         attention_bias=True, mlp_bias=True)),
    "v2-lite": ("DeepseekV2ForCausalLM", dict(q_lora_rank=None, n_shared_experts=2, topk_method="greedy",
                                              rope_parameters=YARN)),
    # the sparse attention: each query attends to the 6 keys its indexer ranks highest (16 indexer heads: a score
    # that is exactly 0, a tie torch.topk and the stable choice may break apart, is rare)
    "v32": ("DeepseekV32ForCausalLM", dict(q_lora_rank=24, n_group=4, topk_group=2, n_shared_experts=1,
                                           routed_scaling_factor=2.5, rope_parameters=YARN, index_topk=6,
                                           index_n_heads=16, index_head_dim=12)),
}
CASES = [("v3", "sharded"), ("v3", "bf16"), ("v3-no-q-latent", "plain"), ("v2", "plain"), ("v2-lite", "plain"),
         ("v32", "plain")]
IDS = [f"{name}-{storage}" for name, storage in CASES]


def hf_model(name: str, seed: int = 0, **changes):
    cls, fields = FAMILIES[name]
    config_class = {"DeepseekV2ForCausalLM": transformers.DeepseekV2Config,
                    "DeepseekV3ForCausalLM": transformers.DeepseekV3Config,
                    "DeepseekV32ForCausalLM": transformers.DeepseekV32Config}[cls]
    torch.manual_seed(seed)
    model = getattr(transformers, cls)(config_class(**{**COMMON, **fields, **changes})).eval()
    order_one_weights(model, seed)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():  # a correction bias large enough to change which experts are chosen
        for buffer_name, b in model.named_buffers():
            if buffer_name.endswith("e_score_correction_bias"):
                b.copy_(torch.randn(b.shape, generator=g) * 0.1)
    return model


def write(name: str, directory, storage: str = "plain", **changes):
    model = hf_model(name, **changes)
    if storage == "bf16":  # the reference reads the file back: the same rounded weights, in float32
        model.to(torch.bfloat16).save_pretrained(directory)
        model = type(model).from_pretrained(directory, dtype=torch.float32, attn_implementation="eager").eval()
    else:
        model.save_pretrained(directory, **({"max_shard_size": "20KB"} if storage == "sharded" else {}))
    write_tokenizer(directory / "tokenizer.json")
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = None
    return model


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """(name, storage) -> (directory, transformers model, attnlab model); written once for the module."""
    root = tmp_path_factory.mktemp("hf-deepseek")
    out = {}
    for name, storage in CASES:
        d = root / f"{name}-{storage}"
        hf = write(name, d, storage)
        out[name, storage] = (d, hf, load_causal_lm(d)[0])
    return out


def test_each_checkpoint_becomes_the_model_with_its_features(checkpoints):
    v3 = checkpoints["v3", "sharded"][2]
    c = v3.config
    assert isinstance(v3, DeepseekModel) and isinstance(c, DeepseekConfig)
    assert (c.q_lora_rank, c.kv_lora_rank, c.scoring_func, c.topk_method, c.n_group, c.topk_group) == \
        (24, 16, "sigmoid", "noaux_tc", 4, 2)
    assert c.rope_scaling["type"] == "yarn" and c.rope_scaling["mscale_all_dim"] == 1.0
    assert c.moe_layer_flags == (False, True, True)
    assert type(v3.blocks[0].ff).__name__ == "SwiGLU" and type(v3.blocks[1].ff).__name__ == "MixtureOfExperts"
    assert v3.blocks[1].ff.router.e_score_correction_bias.abs().max() > 0.05     # loaded, not left at zeros
    v2 = checkpoints["v2", "plain"][2].config
    assert (v2.scoring_func, v2.topk_method, v2.attention_bias, v2.mlp_bias) == \
        ("softmax", "group_limited_greedy", True, True)
    lite = checkpoints["v2-lite", "plain"][2]
    assert lite.config.q_lora_rank is None and hasattr(lite.blocks[0].attn, "q_proj")
    assert not checkpoints["v3-no-q-latent", "plain"][2].config.rope_interleave
    v32 = checkpoints["v32", "plain"][2]
    assert (v32.config.index_topk, v32.config.index_n_heads, v32.config.index_head_dim) == (6, 16, 12)
    assert type(v32.blocks[0].attn).__name__ == "SparseLatentAttention"
    files = sorted(checkpoints["v3", "sharded"][0].glob("*.safetensors"))
    assert len(files) > 1
    with safe_open(str(next(checkpoints["v3", "bf16"][0].glob("*.safetensors"))), framework="pt") as f:
        assert f.get_tensor("model.embed_tokens.weight").dtype == torch.bfloat16


@pytest.mark.parametrize(("name", "storage"), CASES, ids=IDS)
def test_left_padded_batch_equals_transformers_and_each_row_alone(name, storage, checkpoints):
    _, hf, model = checkpoints[name, storage]
    assert_left_padded_batch_equals(model, hf, ATOL)


@pytest.mark.parametrize(("name", "storage"), CASES[1:], ids=IDS[1:])   # the shards hold v3's very weights
def test_greedy_40_tokens_equal_transformers(name, storage, checkpoints):
    _, hf, model = checkpoints[name, storage]
    prompt = torch.randint(1, VOCAB, (1, 8), generator=torch.Generator().manual_seed(3))
    want = hf.generate(prompt, max_new_tokens=40, do_sample=False)
    assert torch.equal(generate(model, prompt, 40, GREEDY), want)
    ids, mask = left_padded((9, 4), 9, seed=1)
    want_batch = hf.generate(ids, attention_mask=mask, max_new_tokens=40, do_sample=False)
    assert torch.equal(generate(model, ids, 40, GREEDY, attention_mask=mask), want_batch)


@pytest.mark.parametrize(("name", "storage"), CASES[::2] + CASES[-1:], ids=IDS[::2] + IDS[-1:])
def test_the_latent_cache_equals_recomputation(name, storage, checkpoints):
    model = checkpoints[name, storage][2]
    ids, mask = left_padded((30, 21), 30, seed=2)
    cached, full = cached_and_full_logits(model, ids, mask, prefix=12)
    torch.testing.assert_close(cached[mask.bool()], full[mask.bool()], atol=1e-5, rtol=0)
    cache = model.new_cache(2)
    assert isinstance(cache, LatentCache)
    with torch.no_grad():
        model(ids, attention_mask=mask, kv_cache=cache)
    c = model.config                  # the latent and the rope key (V3.2: and the indexer's key), whatever the heads
    per_layer = c.kv_lora_rank + c.qk_rope_head_dim + (c.index_head_dim if name == "v32" else 0)
    assert cache.filled_nbytes() == 2 * 30 * c.num_layers * per_layer * 4
    assert c.cache_bytes_per_token(torch.float32) == c.num_layers * (16 + 8 + (12 if name == "v32" else 0)) * 4


def test_the_multi_token_prediction_layer_is_skipped(tmp_path):
    """DeepSeek-V3's files hold its MTP module as layer num_hidden_layers; transformers skips it, and so does the
    loader (a tensor of any other unknown layer is still refused)."""
    hf = write("v3", tmp_path, num_nextn_predict_layers=1)
    save_file({"model.layers.3.eh_proj.weight": torch.zeros(32, 64)}, str(tmp_path / "mtp.safetensors"))
    (tmp_path / "model.safetensors").rename(tmp_path / "main.safetensors")
    names = {}
    for file in ("main.safetensors", "mtp.safetensors"):
        with safe_open(str(tmp_path / file), framework="pt") as f:
            names |= dict.fromkeys(f.keys(), file)
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": names}))
    model = load_causal_lm(tmp_path)[0]
    ids = torch.randint(1, VOCAB, (1, 10), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, hf(ids).logits, atol=ATOL, rtol=0)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "num_nextn_predict_layers": 0}))
    with pytest.raises(ValueError, match=r"unexpected tensor 'model\.layers\.3\.eh_proj\.weight'"):
        load_causal_lm(tmp_path)


@pytest.mark.parametrize(("preset", "family", "count"), [("deepseek-v3", "DeepseekV3", 671_026_404_352),
                                                         ("deepseek-v3.2", "DeepseekV32", 671_877_929_216)])
def test_the_real_size_presets_have_transformers_parameter_count(preset, family, count):
    """DeepSeek-V3 (671B without its MTP module) and V3.2 (its indexers too), both built on the meta device from the
    same config."""
    config = DeepseekConfig.from_preset(preset)
    yarn = dict(rope_type="yarn", rope_theta=10000.0, factor=40.0, original_max_position_embeddings=4096,
                beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0)
    with torch.device("meta"):
        ours = DeepseekModel(config).num_parameters()
        theirs = getattr(transformers, f"{family}ForCausalLM")(getattr(transformers, f"{family}Config")(
            rope_parameters=yarn, max_position_embeddings=163840)).num_parameters()
    assert ours == theirs == count


def _config_json(tmp_path, name="v3", **changes):
    """A written checkpoint's directory with ``changes`` made to its config.json (None: the field removed)."""
    if not (tmp_path / "config.json").exists():
        write(name, tmp_path)
    raw = json.loads((tmp_path / "config.json").read_text())
    raw.update(changes)
    (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in raw.items() if v is not None}))
    return tmp_path


@pytest.mark.parametrize(("name", "changes", "match"), [
    ("v3", dict(n_group=3), r"n_routed_experts=8 must be divisible by n_group=3"),
    ("v3", dict(scoring_func="softmax"), r"scoring_func='softmax': a deepseek_v3 router scores with sigmoid"),
    ("v3", dict(topk_method="greedy"), r"topk_method='greedy': a deepseek_v3 router chooses by noaux_tc"),
    ("v2", dict(norm_topk_prob=True), r"norm_topk_prob=True"),
    ("v2", dict(moe_layer_freq=2), r"moe_layer_freq=2"),
    ("v3", dict(quantization_config={"quant_method": "fp8"}), r"quantization_config=.*deepseek_v3 config"),
    ("v3", dict(num_key_value_heads=2), r"num_key_value_heads=2"),
    ("v3", dict(head_dim=16), r"head_dim=16: expected 8"),
    ("v3", dict(hidden_act="gelu"), r"hidden_act='gelu'"),
    ("v2", dict(rope_interleave=False), r"rope_interleave=False.*deepseek_v2 config"),
    ("v3", dict(topk_group=5), r"topk_group=5 must be at most n_group=4"),
    ("v32", dict(index_topk=0), r"index_topk=0: each query attends to index_topk > 0 keys"),
    ("v32", dict(layer_types=["indexed_attention"] * 2), r"layer_types=\['indexed_attention', 'indexed_attention'\]: "
                                                         r"every layer here is indexed_attention \(3 of them\)"),
    ("v32", dict(mlp_layer_types=["dense"] * 3), r"mlp_layer_types=.*expected \['dense', 'sparse', 'sparse'\]"),
    ("v32", dict(mlp_bias=True), r"mlp_bias=True: DeepSeek-V3.2's feed-forwards have no biases"),
])
def test_bad_configs_are_refused_by_name(tmp_path, name, changes, match):
    with pytest.raises(ValueError, match=match):
        load_causal_lm(_config_json(tmp_path, name, **changes))


def test_an_unsupported_architecture_names_the_supported_ones(tmp_path):
    d = _config_json(tmp_path, architectures=["DeepseekForCausalLM"], model_type="deepseek")
    with pytest.raises(ValueError, match=r"unsupported architecture \['DeepseekForCausalLM'\].*"
                                         r"DeepseekV2ForCausalLM, DeepseekV32ForCausalLM, DeepseekV3ForCausalLM"):
        load_causal_lm(d)
