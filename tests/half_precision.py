"""What the half-precision tests share (CPU: functional/test_precision.py; CUDA: functional/test_gpu_attention.py):
outputs and gradients of an attention call, torch's SDPA as the reference, and the error bound against float64."""

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel


def case(b, h, t_q, t_k, d, dtype, padding, device="cpu", seed=0):
    """Seeded q ``(B, H, Tq, D)``, k and v ``(B, H, Tk, D)`` in ``dtype`` on ``device``, and with ``padding`` a
    ``(B, 1, 1, Tk)`` padding mask in which every other sequence is a quarter padding (else None)."""
    g = torch.Generator(device=device).manual_seed(seed)
    q, k, v = (torch.randn(b, h, t, d, generator=g, device=device).to(dtype) for t in (t_q, t_k, t_k))
    mask = None
    if padding:
        lengths = torch.tensor([t_k, t_k * 3 // 4] * b, device=device)[:b]
        mask = (torch.arange(t_k, device=device)[None, :] < lengths[:, None])[:, None, None, :]
    return q, k, v, mask


def with_grads(fn, q, k, v, g_out) -> list[torch.Tensor]:
    """``[output, dq, dk, dv]`` of ``fn(q, k, v)`` for the output gradient ``g_out``."""
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v)
    return [out, *torch.autograd.grad(out, (q, k, v), g_out)]


def torch_sdpa(mask, is_causal, kernel=None):
    """torch's SDPA (its choice of kernel, or the one named) with attnlab's semantics for a mask plus is_causal."""

    def fn(q, k, v):
        merged = mask
        if mask is not None and is_causal:  # torch refuses a mask with is_causal: merge them
            merged = mask & torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        if kernel is None:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=merged, is_causal=is_causal and mask is None)
        with sdpa_kernel(kernel):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=merged, is_causal=is_causal and mask is None)

    return fn


def errors(got, want) -> list[float]:
    return [(a.double() - b).abs().max().item() for a, b in zip(got, want, strict=True)]


def assert_within_torchs_error(backend: str, ours, fused, textbook) -> None:
    """Each of output, dq, dk, dv within 2× (+1e-3) of the larger of torch's fused and math errors."""
    for name, e, f, m in zip(("out", "dq", "dk", "dv"), ours, fused, textbook, strict=True):
        assert e <= 2 * max(f, m) + 1e-3, f"{backend} {name}: ours {e:.2e}, torch fused {f:.2e}, torch math {m:.2e}"
