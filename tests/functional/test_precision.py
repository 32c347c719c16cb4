"""bfloat16 and float16 on the CPU: every backend's output and gradients within 2× of torch's own error against a
float64 reference (the CUDA twin, at larger sizes, is ``test_gpu_attention.py``). Before ``"math"`` and
``"chunked"`` computed half-precision calls in float32 they missed this by up to 5×."""

import pytest
import torch
from torch.nn.attention import SDPBackend

import attnlab.functional.backends as backends
from attnlab.functional import scaled_dot_product_attention
from attnlab.functional.precision import (
    CPU_HALF_BACKWARD_FLOAT32_BELOW,
    float32_for_cpu_backward,
    in_float32,
    low_precision,
)
from half_precision import assert_within_torchs_error, case, errors, torch_sdpa, with_grads

SHAPES = [  # (B, H, Tq, Tk, D), is_causal, padding
    ((2, 4, 300, 700, 64), True, True),
    ((1, 4, 400, 400, 128), False, True),
    ((2, 4, 1, 300, 64), False, True),  # one decoding query
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("backend", ["math", "chunked", "sdpa", "auto"])
@pytest.mark.parametrize(("shape", "is_causal", "padding"), SHAPES)
def test_half_precision_is_as_accurate_as_torchs(backend, dtype, shape, is_causal, padding):
    q, k, v, mask = case(*shape, dtype, padding)
    g_out = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    ours = with_grads(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal,
                                                                    backend=backend), q, k, v, g_out)
    want = with_grads(torch_sdpa(mask, is_causal, SDPBackend.MATH), q.double(), k.double(), v.double(),
                      g_out.double())
    assert all(t.dtype == dtype for t in ours)
    fused = errors(with_grads(torch_sdpa(mask, is_causal, SDPBackend.FLASH_ATTENTION), q, k, v, g_out), want)
    textbook = errors(with_grads(torch_sdpa(mask, is_causal, SDPBackend.MATH), q, k, v, g_out), want)
    assert_within_torchs_error(backend, errors(ours, want), fused, textbook)


@pytest.mark.parametrize("backend", ["math", "chunked"])
def test_under_autocast_the_result_is_in_autocasts_dtype_and_computed_in_float32(backend):
    q, k, v, mask = case(1, 2, 64, 96, 32, torch.float32, True)
    with torch.autocast("cpu", torch.bfloat16):
        out = scaled_dot_product_attention(q, k, v, mask, backend=backend)
    assert out.dtype == torch.bfloat16
    exact = scaled_dot_product_attention(q, k, v, mask, backend="math")  # float32 throughout
    # computed in float32 and rounded once: within bfloat16's half step of the exact result
    assert torch.allclose(out.float(), exact, rtol=2 ** -8, atol=1e-6)


def test_low_precision_names_the_half_dtype_or_none():
    x = torch.zeros(2)
    assert low_precision(x) is None and low_precision(x.half()) == torch.float16
    assert low_precision(x.bfloat16()) == torch.bfloat16 and low_precision(x.double()) is None
    with torch.autocast("cpu", torch.bfloat16):
        assert low_precision(x) == torch.bfloat16 and low_precision(x.double()) is None


def test_in_float32_casts_in_and_out_and_passes_float32_through():
    seen = []

    def kernel(q, k, v, flag):
        seen.append((q.dtype, k.dtype, v.dtype, flag, torch.is_autocast_enabled("cpu")))
        return q + v, None

    x = torch.ones(2, 3)
    out, weights = in_float32(kernel)(x.bfloat16(), x.bfloat16(), x.bfloat16(), "rest")
    assert out.dtype == torch.bfloat16 and weights is None
    with torch.autocast("cpu", torch.bfloat16):
        assert in_float32(kernel)(x, x, x, 1)[0].dtype == torch.bfloat16
    assert in_float32(kernel)(x, x, x, 2)[0].dtype == torch.float32
    assert seen == [(torch.float32,) * 3 + ("rest", False), (torch.float32,) * 3 + (1, False),
                    (torch.float32,) * 3 + (2, False)]


def test_float32_for_cpu_backward_only_where_a_half_call_over_few_keys_will_be_differentiated():
    seen = []

    def kernel(q, k, v):
        seen.append(q.dtype)
        return q @ k.transpose(-2, -1) @ v, None

    run = float32_for_cpu_backward(kernel)
    few, many = CPU_HALF_BACKWARD_FLOAT32_BELOW - 1, CPU_HALF_BACKWARD_FLOAT32_BELOW

    def call(keys, dtype=torch.bfloat16, grad=True):
        q, k, v = (torch.ones(1, 2, n, 4, dtype=dtype, requires_grad=grad) for n in (3, keys, keys))
        out, _ = run(q, k, v)
        assert out.dtype == dtype  # cast back
        return seen.pop()

    assert call(few) == torch.float32 and call(few, torch.float16) == torch.float32
    assert call(many) == torch.bfloat16 and call(few, grad=False) == torch.bfloat16
    assert call(few, torch.float32) == torch.float32
    with torch.no_grad():
        assert call(few) == torch.bfloat16
    q = torch.ones(1, 1, 2, 4, requires_grad=True)  # autocast: a float32 leaf whose result is bfloat16
    with torch.autocast("cpu", torch.bfloat16):
        out, _ = run(q, q, q)
    assert seen.pop() == torch.float32 and out.dtype == torch.bfloat16


@pytest.mark.parametrize("keys", [64, 512])
def test_training_call_to_sdpa_under_autocast_runs_torchs_kernel_in_float32_below_the_threshold(monkeypatch, keys):
    dtypes = []  # the dtype torch's kernel computes in: autocast's for a float32 query while autocast is on
    real = backends.F.scaled_dot_product_attention

    def spy(q, *args, **kwargs):
        dtypes.append(torch.bfloat16 if torch.is_autocast_enabled("cpu") else q.dtype)
        return real(q, *args, **kwargs)

    monkeypatch.setattr(backends.F, "scaled_dot_product_attention", spy)
    q, k, v = (torch.randn(2, 2, keys, 16, generator=torch.Generator().manual_seed(i), requires_grad=True)
               for i in range(3))
    with torch.autocast("cpu", torch.bfloat16):
        out = scaled_dot_product_attention(q, k, v, is_causal=True, backend="sdpa")
        with torch.no_grad():
            scaled_dot_product_attention(q, k, v, is_causal=True, backend="auto")
    expected = torch.float32 if keys < CPU_HALF_BACKWARD_FLOAT32_BELOW else torch.bfloat16
    assert dtypes == [expected, torch.bfloat16] and out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert all(t.grad.dtype == torch.float32 and t.grad.isfinite().all() for t in (q, k, v))
    if keys < CPU_HALF_BACKWARD_FLOAT32_BELOW:  # computed in float32 and rounded once
        exact = scaled_dot_product_attention(q, k, v, is_causal=True, backend="math")
        assert torch.allclose(out.float(), exact, rtol=2 ** -8, atol=1e-6)
