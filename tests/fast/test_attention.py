"""The attention module's fast twin (``fast.attention.FastAttention``): its two rules, each against the plain
module it speeds up (the same parameters): a CPU decoding step's few queries by the few-query kernel, and a CPU
half-precision training call over few keys through float32."""

import pytest
import torch

import attnlab.functional.backends as backends
from attnlab.attention import AttentionSpec, GroupedQueryAttention, MultiHeadAttention
from attnlab.fast import attention as fast_attention
from attnlab.fast.attention import CPU_HALF_BACKWARD_FLOAT32_BELOW, FEW_QUERIES, FastAttention, folds
from attnlab.models import KVCache
from references import torch_mha_like


def stacks(module) -> bool:
    """Whether a forward of ``module`` in its mode projects q, k and v as one product over stacked weights."""
    calls = []
    real = fast_attention.stack_linears
    fast_attention.stack_linears = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        module(torch.randn(2, 5, module.d_in))
    finally:
        fast_attention.stack_linears = real
    return bool(calls)


def twins(spec: AttentionSpec, seed: int = 0):
    torch.manual_seed(seed)
    plain = GroupedQueryAttention(spec)
    return plain, FastAttention.from_module(plain)


def test_keys_strided_by_their_heads_are_told_from_the_ones_a_matmul_takes_as_they_are():
    """A (B, T, D) projection viewed as (B, H, T, D / H) is strided; a contiguous tensor, a cache's filled part and a
    single head are not."""
    b, t, h, d = 2, 6, 3, 8
    heads = torch.zeros(b, t, h * d).view(b, t, h, d).transpose(1, 2)  # (B, H, T, d), heads of one projection
    filled = torch.zeros(b, h, 16, d)[:, :, :t]  # a cache's first t of 16 slots
    assert not folds(heads) and folds(heads.contiguous()) and folds(filled)
    assert folds(torch.zeros(b, t, h * d).view(b, t, 1, h * d).transpose(1, 2))  # one head: nothing to fold


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_a_decoding_step_takes_the_few_query_kernel_and_equals_the_plain_module(kv_heads, monkeypatch):
    spec = AttentionSpec(32, 32, 4, num_kv_heads=kv_heads, out_bias=False)
    plain, fast = twins(spec)
    plain.eval(), fast.eval()
    used = []
    kernel = fast_attention.few_queries_kernel
    monkeypatch.setattr(fast_attention, "few_queries_kernel",
                        lambda *a, **k: used.append(a[0].shape) or kernel(*a, **k))
    x = torch.randn(2, 10, 32)
    caches = [KVCache(1, 2, kv_heads, None, 8) for _ in range(2)]
    with torch.no_grad():
        for model, cache in zip((plain, fast), caches, strict=True):
            model(x[:, :9], kv_cache=cache[0])
        want, got = plain(x[:, 9:], kv_cache=caches[0][0]), fast(x[:, 9:], kv_cache=caches[1][0])
    assert used == [(2, 4, 1, 8)]  # the step, not the prompt (more than FEW_QUERIES queries: torch's kernel)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_training_and_weights_keep_the_plain_kernel(monkeypatch):
    _, fast = twins(AttentionSpec(16, 16, 2))
    monkeypatch.setattr(fast_attention, "few_queries_kernel", lambda *a, **k: pytest.fail("not for this call"))
    x = torch.randn(1, 1, 16)
    fast(x)  # training mode
    fast.eval()
    _, weights = fast(torch.randn(1, FEW_QUERIES, 16), return_weights=True)  # weights: the math kernel's
    assert weights.shape == (1, 2, FEW_QUERIES, FEW_QUERIES)


@pytest.mark.parametrize("keys", [64, 512])
def test_a_half_precision_training_call_over_few_keys_runs_torchs_kernel_in_float32(monkeypatch, keys):
    """Measured: torch's CPU bf16 forward + backward of attention over few keys took 1.36-2.48x as long as the call
    cast to float32 and back (benchmarks/results/half_backward.md). The plain module keeps torch's bf16 kernel."""
    dtypes = []  # the dtype torch's kernel computes in: autocast's for a float32 query while autocast is on
    real = backends.F.scaled_dot_product_attention

    def spy(q, *args, **kwargs):
        dtypes.append(torch.bfloat16 if torch.is_autocast_enabled("cpu") else q.dtype)
        return real(q, *args, **kwargs)

    monkeypatch.setattr(backends.F, "scaled_dot_product_attention", spy)
    plain, fast = twins(AttentionSpec(32, 32, 2))
    x = torch.randn(2, keys, 32, requires_grad=True)
    with torch.autocast("cpu", torch.bfloat16):
        out = fast(x)
        want = plain(x)
    expected = torch.float32 if keys < CPU_HALF_BACKWARD_FLOAT32_BELOW else torch.bfloat16
    assert dtypes == [expected, torch.bfloat16] and out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert x.grad.dtype == torch.float32 and x.grad.isfinite().all()
    torch.testing.assert_close(out.float(), want.float(), rtol=2 ** -6, atol=2 ** -6)  # bf16 rounding, both ways


def test_the_twin_shares_the_plain_modules_parameters_and_state_dict():
    plain = MultiHeadAttention(8, 8, 4, 0.0, 2, qkv_bias=True)
    fast = FastAttention.from_module(plain)
    assert fast.W_query is plain.W_query and fast.state_dict().keys() == plain.state_dict().keys()
    assert isinstance(fast, MultiHeadAttention) and fast.spec is plain.spec


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_training_projects_with_stacked_weights_and_equals_torch(qkv_bias):
    mha = FastAttention.from_module(MultiHeadAttention(16, 16, 7, 0.0, 4, qkv_bias))  # training, dropout 0: exact
    ref = torch_mha_like(mha).train()
    assert stacks(mha) and not stacks(mha.eval())
    mha.train()
    x = torch.randn(3, 7, 16)
    mine, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    out = mha.train()(mine)
    ref_out, _ = ref(theirs, theirs, theirs, attn_mask=torch.ones(7, 7, dtype=torch.bool).triu(1))
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
    grad = torch.randn_like(out)
    out.backward(grad)
    ref_out.backward(grad)
    torch.testing.assert_close(mine.grad, theirs.grad, atol=1e-5, rtol=0)
    stacked_grad = torch.cat([m.weight.grad for m in (mha.W_query, mha.W_key, mha.W_value)])
    torch.testing.assert_close(stacked_grad, ref.in_proj_weight.grad, atol=1e-5, rtol=0)
    if qkv_bias:
        stacked_bias = torch.cat([m.bias.grad for m in (mha.W_query, mha.W_key, mha.W_value)])
        torch.testing.assert_close(stacked_bias, ref.in_proj_bias.grad, atol=1e-5, rtol=0)


def test_a_hooked_projection_is_called_while_training():
    mha = FastAttention.from_module(MultiHeadAttention(8, 8, num_heads=2))
    seen = []
    mha.W_key.register_forward_hook(lambda _m, _args, out: seen.append(out.shape))
    assert not stacks(mha)
    seen.clear()
    mha(torch.randn(2, 5, 8)).sum().backward()
    assert seen == [(2, 5, 8)]
    with torch.no_grad():
        assert not stacks(FastAttention.from_module(MultiHeadAttention(8, 8, num_heads=2)))  # no autograd: three maps


def test_only_a_bare_linear_call_is_stacked():
    """Whatever would make calling a projection differ from reading its weights keeps the three calls: a backward
    hook, a global hook, a replaced forward, a subclass of nn.Linear."""
    def fresh():
        return FastAttention.from_module(MultiHeadAttention(8, 8, num_heads=2))

    assert stacks(fresh())
    mha = fresh()
    grads = []
    mha.W_value.register_full_backward_hook(lambda _m, _gin, gout: grads.append(gout[0].shape))
    assert not stacks(mha)
    grads.clear()
    mha(torch.randn(2, 5, 8, requires_grad=True)).sum().backward()
    assert grads == [(2, 5, 8)]
    handle = torch.nn.modules.module.register_module_forward_hook(lambda *_: None)
    try:
        assert not stacks(fresh())
    finally:
        handle.remove()
    mha = fresh()
    mha.W_query.forward = lambda x: torch.nn.functional.linear(x, mha.W_query.weight, mha.W_query.bias)
    assert not stacks(mha)

    class Scaled(torch.nn.Linear):
        def forward(self, x):
            return 2 * super().forward(x)

    mha, ref = fresh(), fresh()
    ref.load_state_dict(mha.state_dict())
    mha.W_key = Scaled(8, 8, bias=False)
    with torch.no_grad():
        mha.W_key.weight.copy_(ref.W_key.weight)
        ref.W_key.weight.mul_(2)
    assert not stacks(mha) and stacks(ref)
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(mha(x), ref(x), atol=1e-6, rtol=0)
