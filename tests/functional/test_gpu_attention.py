"""On a GPU: every backend in every dtype against a float64 reference, forward and gradients.

Marked ``cuda`` and skipped (with the reason) where there is none; CI never has one. Run on a GPU machine with
``PYTHONPATH=src pytest -m cuda`` (see docs/gpu.md).

Tolerances: float32 runs with TF32 off (the fixture), so the plain bounds hold (1e-5 forward, 1e-4 gradients;
chunked and math sum in another order than torch's kernels, hence 2e-5 there). Half precision: our error must
be within 2× (plus 1e-3) of the larger of torch's own errors in that dtype (its fused SDPA and its math SDPA),
against the same float64 reference: the usual standard for fused attention.
"""

import pytest
import torch
from torch.nn.attention import SDPBackend

from attnlab.functional import BACKENDS, scaled_dot_product_attention
from half_precision import assert_within_torchs_error, case, errors, torch_sdpa, with_grads

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(),
                                                   reason="needs an NVIDIA GPU (torch.cuda.is_available() is False)")]

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


@pytest.fixture(autouse=True)
def no_tf32():
    """float32 means float32 here: the trainer allows TF32 process-wide, so switch it off for these tests."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    before = matmul.allow_tf32, cudnn.allow_tf32
    matmul.allow_tf32 = cudnn.allow_tf32 = False
    yield
    matmul.allow_tf32, cudnn.allow_tf32 = before


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("shape", "is_causal", "padding"), [
    ((2, 8, 512, 512, 64), True, False),
    ((2, 4, 1000, 1000, 128), False, True),
    ((2, 4, 300, 700, 64), True, True),   # Tq != Tk
    ((4, 8, 1, 1024, 64), False, True),   # one decoding query against a long cache
])
def test_every_backend_and_dtype_matches_float64(backend, dtype, shape, is_causal, padding):
    b, h, t_q, t_k, d = shape
    q, k, v, mask = case(b, h, t_q, t_k, d, dtype, padding, device="cuda")
    g_out = torch.randn(q.shape, device="cuda").to(dtype)
    ours = with_grads(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal,
                                                                    backend=backend), q, k, v, g_out)
    want = with_grads(torch_sdpa(mask, is_causal, SDPBackend.MATH), q.double(), k.double(), v.double(),
                      g_out.double())
    assert all(torch.isfinite(t).all() for t in ours) and all(t.dtype == dtype for t in ours)
    mine = errors(ours, want)
    if dtype == torch.float32:
        fwd, grad = (1e-5, 1e-4) if backend in ("sdpa", "flash", "auto") else (2e-5, 1e-4)
        assert mine[0] <= fwd and max(mine[1:]) <= grad, mine
        return
    fused = errors(with_grads(torch_sdpa(mask, is_causal), q, k, v, g_out), want)
    textbook = errors(with_grads(torch_sdpa(mask, is_causal, SDPBackend.MATH), q, k, v, g_out), want)
    assert_within_torchs_error(backend, mine, fused, textbook)


def test_auto_never_runs_chunked_on_cuda(monkeypatch):
    import dataclasses

    from attnlab.functional import backends

    failing = dataclasses.replace(backends.KERNELS["chunked"],
                                  run=lambda *a, **k: pytest.fail("auto ran chunked on CUDA"))
    monkeypatch.setitem(backends.KERNELS, "chunked", failing)  # every backend runs through its row of the table
    q = torch.randn(1, 2, 2048, 64, device="cuda", dtype=torch.bfloat16)
    scaled_dot_product_attention(q, q, q, dropout_p=0.1, is_causal=True)
