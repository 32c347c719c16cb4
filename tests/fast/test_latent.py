"""The fast twin of multi-head latent attention: equal to the plain module (the reference: the book's path, whose
own proof against transformers is tests/attention/test_latent.py and test_sparse.py), in the textbook form over a
prompt with padding and in the absorbed form over a cache; and it runs torch's fused CPU kernel, not its math one
(what the profiler records of the call, not how long it takes)."""

import pytest
import torch
from torch.profiler import profile

from attnlab.attention.latent import LatentAttentionSpec, mla_scale
from attnlab.attention.sparse import SparseAttentionSpec
from attnlab.fast import accelerated
from attnlab.fast.latent import FastLatentAttention, FastSparseLatentAttention, latent_twin
from attnlab.layers import RotaryEmbedding
from attnlab.models.caches import LatentCache

D, H, RANK, NOPE, ROPE, V = 32, 4, 12, 8, 6, 10   # values (10) narrower than the queries (14; absorbed: 18)
SPECS = {"mla": LatentAttentionSpec(D, H, RANK, NOPE, ROPE, V, q_lora_rank=20, scale=mla_scale(NOPE + ROPE)),
         "dsa": SparseAttentionSpec(D, H, RANK, NOPE, ROPE, V, q_lora_rank=20, scale=mla_scale(NOPE + ROPE),
                                    index_topk=5, index_n_heads=16, index_head_dim=10)}


def plain(kind: str) -> torch.nn.Module:
    torch.manual_seed(0)
    module = SPECS[kind].build(RotaryEmbedding(ROPE, 64, 10000.0))
    with torch.no_grad():  # weights of order 1, gains away from 1
        for p in module.parameters():
            p.copy_(1 + 0.2 * torch.randn(p.shape) if p.dim() == 1 else torch.randn(p.shape) / p.shape[-1] ** 0.5)
    return module.eval()


def padding_mask(b: int, t: int) -> torch.Tensor:
    keep = torch.ones(b, t, dtype=torch.bool)
    keep[1, :3] = False                                    # the second row left-padded
    return keep[:, None, None, :]


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_the_twin_gives_the_plain_modules_outputs_over_a_prompt_and_over_a_cache(kind):
    module = plain(kind)
    twin = latent_twin(module)
    assert type(twin) is {"mla": FastLatentAttention, "dsa": FastSparseLatentAttention}[kind]
    x = torch.randn(2, 17, D, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(twin(x, attn_mask=padding_mask(2, 17)), module(x, attn_mask=padding_mask(2, 17)),
                              atol=1e-5, rtol=0)
        outputs = []
        for m in (module, twin):
            cache = LatentCache([m.spec.cache_widths], batch=2)
            steps = [m(x[:, :9], kv_cache=cache[0])] + [m(x[:, i:i + 1], kv_cache=cache[0]) for i in range(9, 17)]
            outputs.append(torch.cat(steps, dim=1))
    assert torch.allclose(outputs[1], outputs[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_the_weights_are_the_plain_modules(kind):
    module = plain(kind)
    x = torch.randn(2, 11, D, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        out, weights = latent_twin(module)(x, return_weights=True)
        want, want_weights = module(x, return_weights=True)
    assert torch.allclose(out, want, atol=1e-5, rtol=0) and torch.allclose(weights, want_weights, atol=1e-6, rtol=0)


def ops(module: torch.nn.Module, *args, **kwargs) -> set[str]:
    with torch.no_grad(), profile() as p:
        module(*args, **kwargs)
    return {event.key for event in p.key_averages()}


def test_the_twin_runs_torchs_fused_cpu_kernel_where_the_plain_module_runs_its_math_one():
    module = plain("mla")
    x = torch.randn(2, 17, D, generator=torch.Generator().manual_seed(3))
    fused, math = "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_attention_math"
    assert math in ops(module, x) and fused not in ops(module, x)       # narrower values: torch's fallback
    assert fused in ops(latent_twin(module), x) and math not in ops(latent_twin(module), x)
    cache = LatentCache([module.spec.cache_widths], batch=2)
    twin = latent_twin(module)
    twin(x[:, :9], kv_cache=cache[0])
    assert fused in ops(twin, x[:, 9:10], kv_cache=cache[0])              # a decoding step, absorbed


def test_accelerate_swaps_each_latent_attention_of_a_model():
    from attnlab.models.registry import build_model

    model = build_model("deepseek", dict(vocab_size=97, context_length=48, d_model=32, num_layers=2, num_heads=4,
                                         kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8,
                                         d_ff=72)).eval()
    assert all(isinstance(block.attn, FastLatentAttention) for block in accelerated(model).blocks)
