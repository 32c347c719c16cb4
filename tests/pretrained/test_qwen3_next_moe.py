"""load_causal_lm: Qwen3-Next and Qwen3.5-MoE with their mixtures of experts, computed as transformers does.

Each case is a 3:1 hybrid (three Gated DeltaNet layers, then gated attention) whose feed-forwards are transformers'
``Qwen3NextSparseMoeBlock`` (8 experts, a softmax over all of them, the top 3, a shared expert gated by σ(x · w))
except the layers ``mlp_only_layers`` keeps dense: layer 0 dense and 1-3 mixtures, renormalised top-k
(``norm_topk_prob``), written by ``save_pretrained`` in 20 KB float32 shards and in bfloat16; and a mixture in every
second layer (``decoder_sparse_step`` 2), the top-k weights as the softmax gave them, in one float32 file; and
Qwen3.5-MoE's language model (every layer a mixture, its multimodal RoPE), in bfloat16. Weights of
order 1 (tests/hf_checkpoints.py: matrices std 0.1, the router's too, and every 1-D parameter perturbed), so the
router's choice is far from flat. Logits agree to 1e-4 on left-padded batches of 16 and 90 tokens (two chunks of the
delta rule) and on each row alone; greedy decoding gives the same 40 tokens as ``generate``, alone and
in a left-padded batch; the cache equals recomputing; the experts' readable loop and their batched form give the
same logits.
"""

import dataclasses
import json
import shutil

import pytest
import torch
from safetensors import safe_open

from attnlab.generation import GenerationConfig
from attnlab.layers.moe import MixtureOfExperts
from attnlab.layers.swiglu import SwiGLU
from attnlab.models.modern.hybrid import HybridDecoder
from attnlab.models.modern.qwen3_next import Qwen3NextConfig
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
#: name -> the mixture's fields (Qwen3-Next's; Qwen3.5-MoE's config has no others)
CONFIGS = {
    "moe": dict(mlp_only_layers=[0], decoder_sparse_step=1, norm_topk_prob=True),
    "moe-every-second": dict(mlp_only_layers=[], decoder_sparse_step=2, norm_topk_prob=False),
    "qwen3.5-moe": {},
}
CASES = [("moe", "sharded"), ("moe", "bf16"), ("moe-every-second", "plain"), ("qwen3.5-moe", "bf16")]
IDS = [f"{name}-{storage}" for name, storage in CASES]
#: how many of the 4 layers are mixtures
MIXTURES = {"moe": 3, "moe-every-second": 2, "qwen3.5-moe": 4}


def family(name: str) -> str:
    return "qwen3_5_moe_text" if name == "qwen3.5-moe" else "qwen3_next"


def hf_config(name: str):
    common = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=8, max_position_embeddings=160, linear_num_key_heads=2, linear_num_value_heads=4,
                  linear_key_head_dim=8, linear_value_head_dim=6, rms_norm_eps=1e-6, num_experts=8,
                  num_experts_per_tok=3, moe_intermediate_size=12, shared_expert_intermediate_size=20,
                  bos_token_id=None, eos_token_id=None, pad_token_id=None)
    rope = dict(rope_type="default", rope_theta=1000.0, partial_rotary_factor=0.5)
    if family(name) == "qwen3_5_moe_text":
        return transformers.Qwen3_5MoeTextConfig(**common, rope_parameters={**rope, "mrope_section": [1, 1, 0],
                                                                            "mrope_interleaved": True})
    return transformers.Qwen3NextConfig(**common, intermediate_size=48, rope_parameters=rope, **CONFIGS[name])


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """(name, storage) -> (directory, transformers model, attnlab model, tokenizer); written once for the module
    (``written_and_loaded`` takes the model class from the first part of ``<family>-<name>``)."""
    root = tmp_path_factory.mktemp("hf-qwen3-next-moe")
    named = [(f"{family(name)}-{name}", storage) for name, storage in CASES]
    loaded = written_and_loaded(root, named, lambda arch: hf_config(arch.split("-", 1)[1]), std=0.1)
    return {(name, storage): loaded[f"{family(name)}-{name}", storage] for name, storage in CASES}


def test_each_layer_has_the_feed_forward_transformers_gives_it(checkpoints):
    for (name, _), (d, hf, model, _) in checkpoints.items():
        assert isinstance(model, HybridDecoder) and isinstance(model.config, Qwen3NextConfig)
        theirs = [type(layer.mlp).__name__.endswith("SparseMoeBlock") for layer in hf.model.layers]
        assert [type(block.ff) for block in model.blocks] == [MixtureOfExperts if t else SwiGLU for t in theirs]
        assert sum(theirs) == MIXTURES[name]
        moe = next(block.ff for block in model.blocks if isinstance(block.ff, MixtureOfExperts))
        s = moe.spec
        assert (s.num_experts, s.top_k, s.d_expert, s.d_shared, s.scoring, s.shared_gate, s.float32_router) == \
            (8, 3, 12, 20, "softmax", True, False)
        assert s.norm_topk_prob == (name != "moe-every-second")
        assert json.loads((d / "config.json").read_text())["model_type"] == family(name)
        with safe_open(str(next(d.glob("*.safetensors"))), framework="pt") as f:  # one tensor per expert on disk
            assert not any(k.endswith("experts.gate_up_proj") for k in f.keys())  # noqa: SIM118
    assert len(list(checkpoints["moe", "sharded"][0].glob("*.safetensors"))) > 1


def test_the_routers_choices_are_far_from_flat(checkpoints):
    """Every expert chosen by some token, and the chosen weights spread (at transformers' init each is ~1/3)."""
    _, _, model, _ = checkpoints["moe", "sharded"]
    ids, _ = left_padded((40,), 40, seed=4)
    seen = {}
    hooks = [block.ff.router.register_forward_hook(lambda m, i, out, b=b: seen.__setitem__(b, out))
             for b, block in enumerate(model.blocks) if isinstance(block.ff, MixtureOfExperts)]
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for hook in hooks:
            hook.remove()
    for weights, chosen in seen.values():
        assert chosen.unique().numel() == 8
        assert float(weights[:, 0].max() - weights[:, 0].min()) > 0.3


@pytest.mark.parametrize(("name", "storage"), CASES, ids=IDS)
@pytest.mark.parametrize(("t", "lengths"), [(16, (16, 11, 5)), (90, (90, 83))])
def test_logits_equal_transformers_with_and_without_left_padding(name, storage, t, lengths, checkpoints):
    """A left-padded batch, and each row alone: both against transformers' logits of the same input (a padded row
    and the same row alone start the delta rule's chunks at other tokens, and transformers' own two differ by up to
    1.6e-4 at 90 tokens: each is compared with its own reference)."""
    _, hf, model, _ = checkpoints[name, storage]
    assert_left_padded_batch_equals(model, hf, ATOL, lengths, seed=t, alone_reference=True)


@pytest.mark.parametrize(("name", "storage"), CASES, ids=IDS)
def test_greedy_40_tokens_equal_transformers(name, storage, checkpoints):
    _, hf, model, _ = checkpoints[name, storage]
    greedy_equals_generate(hf, model, GREEDY)


@pytest.mark.parametrize(("name", "storage"), CASES[1:], ids=IDS[1:])  # the shards hold the bf16 file's weights
def test_cache_equals_recomputation(name, storage, checkpoints):
    """70 tokens in one call (two chunks of the delta rule), then one at a time from the cached memories."""
    model = checkpoints[name, storage][2]
    ids, mask = left_padded((90, 77), 90, seed=2)
    cached, full = cached_and_full_logits(model, ids, mask, 70)
    real = mask.bool()
    scale = float(full[real].abs().max().clamp(min=1))  # 1e-5 of the largest logit: float32 rounding
    torch.testing.assert_close(cached[real], full[real], atol=1e-5 * scale, rtol=0)


def with_experts_in(model, form):
    """The same model with every mixture's experts computed in ``form`` (the spec is the module's recipe)."""
    for block in model.blocks:
        if isinstance(block.ff, MixtureOfExperts):
            block.ff.spec = dataclasses.replace(block.ff.spec, form=form)
    return model


@pytest.mark.parametrize(("name", "storage"), CASES[1:], ids=IDS[1:])
def test_the_experts_batched_form_equals_their_loop(name, storage, checkpoints):
    model = checkpoints[name, storage][2]
    ids, mask = left_padded((30, 19), 30, seed=6)
    try:
        with torch.no_grad():
            loop = with_experts_in(model, "loop")(ids, attention_mask=mask).logits
            batched = with_experts_in(model, "batched")(ids, attention_mask=mask).logits
    finally:
        with_experts_in(model, "loop")
    torch.testing.assert_close(batched, loop, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("preset", "family", "count", "mixtures"), [
    ("qwen3-next-80b-a3b", "Qwen3Next", 79_674_391_296, 48), ("qwen3.5-35b-a3b", "Qwen3_5Moe", 34_660_610_688, 40)])
def test_the_real_size_presets_have_transformers_parameter_count(preset, family, count, mixtures):
    """transformers' config defaults are Qwen3-Next-80B-A3B and Qwen3.5-35B-A3B: both built on the meta device."""
    config_class = getattr(transformers, f"{family}Config" if family == "Qwen3Next" else f"{family}TextConfig")
    with torch.device("meta"):
        ours = HybridDecoder(Qwen3NextConfig.from_preset(preset))
        theirs = getattr(transformers, f"{family}ForCausalLM")(config_class())
    assert ours.num_parameters() == theirs.num_parameters() == count
    c = ours.config
    assert c.layer_types == theirs.config.layer_types and c.moe_layer_flags == (True,) * mixtures
    # a quarter of the layers full, each 2 key/value heads of 256 in bfloat16
    assert c.cache_bytes_per_token() == mixtures // 4 * 2 * 2 * 256 * 2


# ---- bad input: one line naming the field, never a silently wrong model --------------------------------------------
def edited(checkpoints, tmp_path, name="moe-every-second", **changes):
    d = tmp_path / "bad"
    shutil.copytree(checkpoints[name, "bf16" if name == "qwen3.5-moe" else "plain"][0], d)
    raw = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**raw, **changes}))
    return d


@pytest.mark.parametrize(("changes", "match"), [
    ({"num_experts_per_tok": 9}, r"num_experts_per_tok=9 must be at most num_experts=8"),
    ({"num_experts": -1}, r"num_experts must be an int >= 0 \(0: every layer dense\), got -1"),
    ({"mlp_only_layers": [1, 4]}, r"mlp_only_layers must list layer indices in \[0, 4\), got \[1, 4\]"),
    ({"decoder_sparse_step": -2}, r"decoder_sparse_step must be a positive int, got -2"),
    ({"shared_expert_intermediate_size": 0}, r"shared_expert_intermediate_size must be a positive int, got 0"),
    ({"norm_topk_prob": "yes"}, r"norm_topk_prob must be True or False, got 'yes'"),
    # the config and the tensors disagree: the first tensor that shows it, named with both shapes
    ({"moe_intermediate_size": 16}, r"tensor 'model\.layers\.1\.mlp\.experts\.0\.down_proj\.weight' has shape "
                                    r"\(32, 12\), but the model in config.json expects \(32, 16\)"),
    ({"num_experts": 4, "num_experts_per_tok": 2}, r"unexpected tensor 'model\.layers\.1\.mlp\.experts\.4\."),
    ({"mlp_only_layers": [1]}, r"unexpected tensor 'model\.layers\.1\.mlp\.experts\.0\.down_proj\.weight'"),
    # Qwen3.5-MoE: every layer a mixture, renormalised; fields that would say otherwise are refused by name
    ({"name": "qwen3.5-moe", "mlp_only_layers": [0]}, r"cannot honour mlp_only_layers=\[0\]: attnlab does not "
                                                      r"implement this field of a qwen3_5_moe_text config"),
    ({"name": "qwen3.5-moe", "norm_topk_prob": False}, r"cannot honour norm_topk_prob=False"),
    ({"name": "qwen3.5-moe", "num_experts_per_tok": 9}, r"num_experts_per_tok=9 must be at most num_experts=8"),
])
def test_bad_mixture_fields_are_one_line_naming_the_field(checkpoints, tmp_path, changes, match):
    with pytest.raises(ValueError, match=match):
        load_causal_lm(edited(checkpoints, tmp_path, **changes))


@pytest.mark.parametrize(("changes", "match"), [
    (dict(num_experts=4, num_experts_per_tok=5), r"Qwen3NextConfig: num_experts_per_tok=5 must be at most "
                                                 r"num_experts=4"),
    (dict(num_experts=4, moe_intermediate_size=0), r"moe_intermediate_size must be a positive int, got 0"),
    (dict(mlp_only_layers=(-1,)), r"mlp_only_layers must list layer indices in \[0, 4\), got \(-1,\)"),
    (dict(decoder_sparse_step=0), r"decoder_sparse_step must be a positive int, got 0"),
])
def test_bad_configs_are_one_line_naming_the_field(changes, match):
    with pytest.raises(ValueError, match=match):
        Qwen3NextConfig.from_preset("tiny", **changes)
