"""The mixture of experts against transformers' own MoE modules (DeepSeek-V2 and V3, Qwen3-Next, Qwen3.5), the same
weights copied into theirs; the batched form against the loop; which layers are mixtures; the spec's refusals."""

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.attention import AttentionSpec
from attnlab.layers import ModernBlock, ModernBlockSpec
from attnlab.layers.moe import MixtureOfExperts, MoESpec, moe_layers
from attnlab.models import ModernDecoder, ModernDecoderConfig

transformers = pytest.importorskip("transformers")

D, E, D_EXPERT = 16, 8, 12


def _randomised(moe: MixtureOfExperts, seed: int = 0, bias_scale: float = 0.1) -> MixtureOfExperts:
    """Weights of order 1 (at 0.02 every score is ~1/E and the choice hinges on rounding), a correction bias that
    changes choices."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in moe.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (0.5 if "router" in name else 0.3))
        if moe.router.e_score_correction_bias is not None:
            moe.router.e_score_correction_bias.copy_(torch.randn(E, generator=g) * bias_scale)
    return moe


def _copy_into(ours: MixtureOfExperts, theirs: torch.nn.Module) -> torch.nn.Module:
    """Our weights into transformers' module: their experts fuse gate and up, ``gate_up_proj (E, 2·d_expert, D)``."""
    x = ours.experts
    state = {"gate.weight": ours.router.weight, "experts.gate_up_proj": torch.cat([x.gate_proj, x.up_proj], dim=1),
             "experts.down_proj": x.down_proj}
    if ours.router.e_score_correction_bias is not None:
        state["gate.e_score_correction_bias"] = ours.router.e_score_correction_bias
    shared = "shared_expert" if ours.spec.shared_gate else "shared_experts"
    for name, t in ours.shared_experts.state_dict().items():
        state[f"{shared}.{name}"] = t
    if ours.spec.shared_gate:
        state["shared_expert_gate.weight"] = ours.shared_expert_gate.weight
    theirs.load_state_dict({k: v.detach().clone() for k, v in state.items()}, strict=True)
    return theirs.eval()


def _deepseek_v3(**changes):
    config = transformers.DeepseekV3Config(
        hidden_size=D, moe_intermediate_size=D_EXPERT, n_routed_experts=E, num_experts_per_tok=3, n_group=4,
        topk_group=2, n_shared_experts=2, routed_scaling_factor=2.5, norm_topk_prob=True, num_attention_heads=2,
        **changes)
    config._experts_implementation = "eager"
    spec = MoESpec(D, E, config.num_experts_per_tok, D_EXPERT, scoring="sigmoid", topk_method="noaux_tc",
                   n_group=config.n_group, topk_group=config.topk_group, norm_topk_prob=config.norm_topk_prob,
                   routed_scaling_factor=config.routed_scaling_factor, correction_bias=True,
                   d_shared=D_EXPERT * config.n_shared_experts)
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE
    return spec, DeepseekV3MoE(config)


def _deepseek_v2(topk_method, **changes):
    config = transformers.DeepseekV2Config(
        hidden_size=D, moe_intermediate_size=D_EXPERT, n_routed_experts=E, num_experts_per_tok=3, n_group=4,
        topk_group=2, n_shared_experts=1, routed_scaling_factor=1.5, topk_method=topk_method, num_attention_heads=2,
        mlp_bias=True, **changes)
    config._experts_implementation = "eager"
    spec = MoESpec(D, E, 3, D_EXPERT, scoring="softmax", topk_method=topk_method, n_group=4, topk_group=2,
                   routed_scaling_factor=1.5, d_shared=D_EXPERT, shared_bias=True)
    from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2Moe
    return spec, DeepseekV2Moe(config)


def _qwen3_next(norm_topk_prob=True):
    config = transformers.Qwen3NextConfig(hidden_size=D, moe_intermediate_size=D_EXPERT, num_experts=E,
                                          num_experts_per_tok=3, shared_expert_intermediate_size=20,
                                          norm_topk_prob=norm_topk_prob, num_attention_heads=2, num_key_value_heads=1)
    config._experts_implementation = "eager"
    spec = MoESpec(D, E, 3, D_EXPERT, norm_topk_prob=norm_topk_prob, d_shared=20, shared_gate=True,
                   float32_router=False)
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextSparseMoeBlock
    return spec, Qwen3NextSparseMoeBlock(config)


def _qwen3_5_moe():
    config = transformers.Qwen3_5MoeTextConfig(hidden_size=D, moe_intermediate_size=D_EXPERT, num_experts=E,
                                               num_experts_per_tok=2, shared_expert_intermediate_size=20,
                                               num_attention_heads=2, num_key_value_heads=1)
    config._experts_implementation = "eager"
    spec = MoESpec(D, E, 2, D_EXPERT, norm_topk_prob=True, d_shared=20, shared_gate=True, float32_router=False)
    from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import Qwen3_5MoeSparseMoeBlock
    return spec, Qwen3_5MoeSparseMoeBlock(config)


CASES = {
    "deepseek-v3": _deepseek_v3,
    "deepseek-v2-greedy": lambda: _deepseek_v2("greedy"),
    "deepseek-v2-group-limited": lambda: _deepseek_v2("group_limited_greedy"),
    "qwen3-next": _qwen3_next,
    "qwen3-next-unnormalised": lambda: _qwen3_next(norm_topk_prob=False),
    "qwen3.5-moe": _qwen3_5_moe,
}


@pytest.mark.parametrize("form", ["loop", "batched"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_equals_transformers(case, form):
    spec, theirs = CASES[case]()
    ours = _randomised(dataclasses.replace(spec, form=form).build()).eval()
    _copy_into(ours, theirs)
    x = torch.randn(3, 7, D, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want, got = theirs(x), ours(x)
        weights, chosen = ours.router(x.view(-1, D))
        their_weights, their_chosen = theirs.gate(x.view(-1, D))[1:]
    # the same experts, in the same slots' sets, and the same weights
    assert torch.equal(chosen.sort(-1).values, their_chosen.sort(-1).values)
    torch.testing.assert_close(weights.gather(1, chosen.argsort(-1)), their_weights.gather(1, their_chosen.argsort(-1)),
                               atol=1e-6, rtol=0)
    # outputs of a few units: ≤ 1e-5 is the same sums, up to the order of a few float32 additions
    assert want.abs().max() > 0.5
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_the_correction_bias_chooses_but_does_not_weigh():
    spec = _deepseek_v3()[0]
    ours = _randomised(spec.build(), bias_scale=1.0).eval()
    x = torch.randn(40, D, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        weights, chosen = ours.router(x)
        unbiased = dataclasses.replace(spec, correction_bias=False).build()
        unbiased.router.weight.copy_(ours.router.weight)
        plain_chosen = unbiased.router(x)[1]
        scores = torch.sigmoid(x @ ours.router.weight.T)                     # the weights come from these alone
    assert not torch.equal(chosen.sort(-1).values, plain_chosen.sort(-1).values)   # another choice for some tokens
    picked = scores.gather(1, chosen)
    torch.testing.assert_close(weights, 2.5 * picked / picked.sum(-1, keepdim=True), atol=1e-6, rtol=0)


@pytest.mark.parametrize("case", sorted(CASES))
def test_ties_are_broken_as_transformers_breaks_them(case):
    spec, theirs = CASES[case]()
    ours = _randomised(spec.build()).eval()
    with torch.no_grad():  # experts 0-3 score exactly as 4-7, and the bias is the same for each pair too
        ours.router.weight[4:] = ours.router.weight[:4]
        if ours.router.e_score_correction_bias is not None:
            ours.router.e_score_correction_bias[4:] = ours.router.e_score_correction_bias[:4]
        ours.experts.down_proj[4:] *= -1.0       # a tied expert chosen instead of its twin changes the output
    _copy_into(ours, theirs)
    x = torch.randn(30, D, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        chosen, their_chosen = ours.router(x)[1], theirs.gate(x)[2]
        assert torch.equal(chosen.sort(-1).values, their_chosen.sort(-1).values)
        torch.testing.assert_close(ours(x[None]), theirs(x[None]), atol=1e-5, rtol=0)


@pytest.mark.parametrize("case", ["deepseek-v3", "qwen3-next"])
def test_bfloat16_as_transformers(case):
    # DeepSeek routes in float32 whatever the model's dtype; Qwen's logits are the model's and its weights cast back
    spec, theirs = CASES[case]()
    ours = _randomised(spec.build()).eval()
    _copy_into(ours, theirs)
    ours, theirs = ours.to(torch.bfloat16), theirs.to(torch.bfloat16)
    x = torch.randn(2, 9, D, generator=torch.Generator().manual_seed(4)).to(torch.bfloat16)
    with torch.no_grad():
        assert torch.equal(ours.router(x.view(-1, D))[1].sort(-1).values,
                           theirs.gate(x.view(-1, D))[2].sort(-1).values)
        got, want = ours(x), theirs(x)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want.float(), atol=2e-2, rtol=1e-2)   # a few bf16 roundings


@settings(max_examples=25, deadline=None)
@given(tokens=st.integers(0, 30), experts=st.sampled_from([2, 4, 8]), top_k=st.integers(1, 4),
       seed=st.integers(0, 2**16))
def test_batched_equals_loop(tokens, experts, top_k, seed):
    spec = MoESpec(D, experts, min(top_k, experts), D_EXPERT, scoring="sigmoid", norm_topk_prob=True, d_shared=8)
    torch.manual_seed(seed)
    loop = spec.build()
    batched = dataclasses.replace(spec, form="batched").build()
    batched.load_state_dict(loop.state_dict())
    x = torch.randn(tokens, D)
    with torch.no_grad():
        torch.testing.assert_close(batched(x), loop(x), atol=1e-6, rtol=0)


def test_a_modern_block_takes_it_as_its_feed_forward():
    spec, _ = _deepseek_v3()
    block = ModernBlock(ModernBlockSpec(AttentionSpec(D, D, num_heads=2, out_bias=False), d_ff=D_EXPERT, ff=spec))
    assert isinstance(block.ff, MixtureOfExperts)
    x = torch.randn(2, 5, D)
    with torch.no_grad():
        torch.testing.assert_close(block(x), (h := x + block.attn(block.norm1(x))) + block.ff(block.norm2(h)))


def test_hand_worked_routing():
    # two experts, one token: softmax([2, 0]) = [0.881, 0.119]; top-1 takes expert 0 with weight 0.881
    moe = MoESpec(1, 2, 1, 1).build()
    with torch.no_grad():
        moe.router.weight.copy_(torch.tensor([[2.0], [0.0]]))
        weights, chosen = moe.router(torch.ones(1, 1))
    assert chosen.tolist() == [[0]]
    torch.testing.assert_close(weights, torch.tensor([[1 / (1 + torch.e ** -2)]]))


def _transformers_moe_layers(config, model_class, moe_class) -> tuple[bool, ...]:
    with torch.device("meta"):
        model = model_class(config)
    return tuple(isinstance(layer.mlp, moe_class) for layer in model.layers)


def test_which_layers_as_deepseek():
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Model, DeepseekV3MoE
    config = transformers.DeepseekV3Config(hidden_size=D, num_hidden_layers=5, first_k_dense_replace=2,
                                           num_attention_heads=2, n_routed_experts=E, n_group=2, topk_group=1,
                                           vocab_size=10, intermediate_size=8, moe_intermediate_size=8, q_lora_rank=8,
                                           kv_lora_rank=8)
    assert moe_layers(5, first_dense=2) == _transformers_moe_layers(config, DeepseekV3Model, DeepseekV3MoE)


@pytest.mark.parametrize(("step", "mlp_only"), [(1, []), (2, []), (1, [0, 3]), (3, [2])])
def test_which_layers_as_qwen3_next(step, mlp_only):
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextModel, Qwen3NextSparseMoeBlock
    config = transformers.Qwen3NextConfig(hidden_size=D, num_hidden_layers=6, decoder_sparse_step=step,
                                          mlp_only_layers=mlp_only, num_attention_heads=2, num_key_value_heads=1,
                                          num_experts=E, vocab_size=10, intermediate_size=8, moe_intermediate_size=8,
                                          shared_expert_intermediate_size=8, linear_num_value_heads=2,
                                          linear_num_key_heads=1, linear_key_head_dim=8, linear_value_head_dim=8)
    want = _transformers_moe_layers(config, Qwen3NextModel, Qwen3NextSparseMoeBlock)
    assert moe_layers(6, sparse_step=step, dense_layers=mlp_only) == want


def test_residual_weights_are_the_ones_that_write_to_the_stream():
    moe = _deepseek_v3()[0].build()
    assert [tuple(w.shape) for w in moe.residual_weights()] == [(E, D, D_EXPERT), (D, 2 * D_EXPERT)]


@dataclasses.dataclass
class _ExpertsAfterTheFirst(ModernDecoderConfig):
    def layer_spec(self, layer):
        spec = super().layer_spec(layer)
        moe = MoESpec(self.d_model, 4, 2, 16, d_shared=16)
        return dataclasses.replace(spec, ff=moe) if layer else spec


def test_a_modern_decoder_is_built_with_them():
    torch.manual_seed(0)
    model = ModernDecoder(_ExpertsAfterTheFirst.from_preset("tiny"))   # 2 layers: dense, then experts
    assert isinstance(model.blocks[1].ff, MixtureOfExperts)
    # the projections into the residual stream start as GPT-2's, scaled by 1/√(2 · num_layers) = 1/2
    assert model.blocks[1].ff.experts.down_proj.std() < 0.013 < model.blocks[1].ff.experts.gate_proj.std()
    assert model(torch.randint(0, 256, (2, 6))).logits.shape == (2, 6, 256)


@pytest.mark.parametrize(("changes", "match"), [
    ({"num_experts": 6, "n_group": 4}, r"num_experts=6 must be divisible by n_group=4"),
    ({"topk_group": 5, "n_group": 4}, r"topk_group=5 must be at most n_group=4"),
    ({"top_k": 9}, r"top_k=9 must be at most num_experts=8"),
    ({"top_k": 5, "topk_group": 1, "n_group": 2, "topk_method": "group_limited_greedy"},
     r"top_k=5 experts cannot come from topk_group=1 groups of 4"),
    ({"n_group": 8, "topk_method": "noaux_tc", "topk_group": 2, "top_k": 2}, r"two best experts.*leaves 1 a group"),
    ({"scoring": "relu"}, r"scoring: expected 'softmax' or 'sigmoid', got 'relu'"),
    ({"topk_method": "noaux"}, r"topk_method: expected 'greedy', 'group_limited_greedy' or 'noaux_tc'"),
    ({"shared_gate": True}, r"shared_gate gates the shared experts, but d_shared=0"),
    ({"routed_scaling_factor": 0.0}, r"routed_scaling_factor must be a finite number > 0, got 0.0"),
    ({"d_shared": -1}, r"d_shared must be an int >= 0"),
    ({"top_k": 0}, r"top_k must be a positive int, got 0"),
    ({"form": "fast"}, r"form: expected 'loop' or 'batched', got 'fast'"),
])
def test_bad_specs(changes, match):
    with pytest.raises(ValueError, match=match):
        MoESpec(**{"d_model": D, "num_experts": E, "top_k": 2, "d_expert": D_EXPERT, **changes})


def test_wrong_width():
    with pytest.raises(ValueError, match=r"last dim 16 \(d_model\), got shape \(2, 5\)"):
        MoESpec(D, E, 2, D_EXPERT).build()(torch.randn(2, 5))
