"""bfloat16 and float16 on the CPU: every backend's output and gradients within 2× of torch's own error against a
float64 reference (the CUDA twin, at larger sizes, is ``test_gpu_attention.py``). Before ``"math"`` and
``"chunked"`` computed half-precision calls in float32 they missed this by up to 5×."""

import pytest
import torch
from torch.nn.attention import SDPBackend

from attnlab.functional import scaled_dot_product_attention
from attnlab.functional.precision import in_float32, low_precision
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

    def kernel(q, k, v, *, flag):
        seen.append((q.dtype, k.dtype, v.dtype, flag, torch.is_autocast_enabled("cpu")))
        return q + v, None

    x = torch.ones(2, 3)
    out, weights = in_float32(kernel)(x.bfloat16(), x.bfloat16(), x.bfloat16(), flag="rest")
    assert out.dtype == torch.bfloat16 and weights is None
    with torch.autocast("cpu", torch.bfloat16):
        assert in_float32(kernel)(x, x, x, flag=1)[0].dtype == torch.bfloat16
    assert in_float32(kernel)(x, x, x, flag=2)[0].dtype == torch.float32
    assert seen == [(torch.float32,) * 3 + ("rest", False), (torch.float32,) * 3 + (1, False),
                    (torch.float32,) * 3 + (2, False)]
