"""backend='flash': attnlab's Triton kernels against torch's SDPA in float64, forward and gradients.

Without a GPU, tests/conftest.py sets TRITON_INTERPRET=1 and the kernels run on the CPU through Triton's interpreter
(slow, so the shapes are tiny and the interpreter uses 16-query × 32-key blocks, several per sequence). The section
marked ``cuda`` runs the same comparisons at realistic sizes on a GPU.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from torch.nn.attention import SDPBackend, sdpa_kernel

pytest.importorskip("triton", reason="backend='flash' needs triton")

import triton.language as tl

from attnlab.functional import flash, flash_kernels
from attnlab.functional.flash import _mask_args, flash_attention, flash_status

INTERPRETED = flash_kernels.INTERPRETED
DEVICE = "cuda" if torch.cuda.is_available() and not INTERPRETED else "cpu"


def cuda(test):
    """A test that needs a GPU and the compiled kernels, not the interpreter."""
    skip = pytest.mark.skipif(not torch.cuda.is_available() or INTERPRETED,
                              reason="needs an NVIDIA GPU, with TRITON_INTERPRET unset")
    return pytest.mark.cuda(skip(test))


def qkv(b, h, t_q, t_k, d, h_kv=None, dtype=torch.float32, device=DEVICE, seed=0):
    g = torch.Generator().manual_seed(seed)
    h_kv = h if h_kv is None else h_kv
    shapes = ((b, h, t_q, d), (b, h_kv, t_k, d), (b, h_kv, t_k, d))
    return tuple(torch.randn(s, generator=g).to(device, dtype) for s in shapes)


def reference(q, k, v, mask, is_causal, scale=None, enable_gqa=False):
    """torch's math SDPA in float64; it refuses a mask together with is_causal, so merge them here."""
    q, k, v = (t.double() for t in (q, k, v))
    if mask is not None and mask.dtype != torch.bool:
        mask = mask.double()
    if is_causal and mask is not None:
        causal = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        mask = mask & causal if mask.dtype == torch.bool else mask.masked_fill(~causal, float("-inf"))
        is_causal = False
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale,
                                              enable_gqa=enable_gqa)


def with_grads(fn, q, k, v, g_out):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v)
    return out, torch.autograd.grad(out, (q, k, v), g_out)


def assert_matches(q, k, v, mask=None, is_causal=False, fwd_tol=1e-5, grad_tol=1e-4, **kwargs):
    """Output and dq, dk, dv within the given absolute tolerances of the float64 reference; returns both."""
    g_out = torch.randn(q.shape, device=q.device).to(q.dtype)
    out, grads = with_grads(lambda q, k, v: flash_attention(q, k, v, mask, is_causal, **kwargs), q, k, v, g_out)
    want, want_grads = with_grads(lambda q, k, v: reference(q, k, v, mask, is_causal, **kwargs),
                                  q.double(), k.double(), v.double(), g_out.double())
    assert out.dtype == q.dtype and out.shape == q.shape
    assert torch.isfinite(out).all() and all(torch.isfinite(g).all() for g in grads)
    torch.testing.assert_close(out.double(), want, atol=fwd_tol, rtol=0)
    for got, exp, name in zip(grads, want_grads, "qkv", strict=True):
        assert got.dtype == q.dtype
        torch.testing.assert_close(got.double(), exp, atol=grad_tol, rtol=0, msg=lambda m, n=name: f"d{n}: {m}")
    return out, grads


@pytest.fixture
def blocks(monkeypatch):
    """Set the interpreter's block sizes (on a GPU the autotuner chooses and this does nothing)."""
    def set_blocks(block_q, block_k):
        if INTERPRETED:
            monkeypatch.setitem(flash_kernels.META, "BLOCK_Q", block_q)
            monkeypatch.setitem(flash_kernels.META, "BLOCK_K", block_k)
    return set_blocks


@pytest.fixture
def bf16_dot(monkeypatch):
    """Triton 3.9's interpreter multiplies bfloat16 tl.dot operands as their raw uint16 bits (it stores bf16 as
    uint16 and calls np.matmul on that); widen them to float32 first, exactly, so the kernel's bf16 path can be
    tested. On a GPU, nothing to fix."""
    if not INTERPRETED:
        return
    from triton.runtime import interpreter

    original = interpreter.InterpreterBuilder.create_dot

    def widen(x):
        if x.dtype != tl.bfloat16:
            return x
        return interpreter.TensorHandle((x.data.astype(np.uint32) << 16).view(np.float32), tl.float32)

    def create_dot(self, a, b, d, *args):
        return original(self, widen(a), widen(b), d, *args)

    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_dot", create_dot)


# --------------------------------------------------------------------------------------- float32 parity


@pytest.mark.parametrize(("b", "h", "t_q", "t_k", "d"), [
    (1, 2, 40, 40, 16), (2, 1, 33, 50, 40), (1, 1, 64, 24, 64), (1, 1, 20, 36, 128),
])
def test_float32_matches_float64_reference(b, h, t_q, t_k, d):
    assert_matches(*qkv(b, h, t_q, t_k, d))


@pytest.mark.parametrize(("t_q", "t_k", "block_q", "block_k"), [
    (20, 50, 16, 16), (50, 20, 16, 32), (50, 20, 32, 16), (37, 37, 32, 16),
])
def test_causal_with_either_length_longer_and_either_block_larger(t_q, t_k, block_q, block_k, blocks):
    blocks(block_q, block_k)  # the diagonal crosses blocks differently when block_q > block_k and when <
    assert_matches(*qkv(1, 2, t_q, t_k, 16), is_causal=True)


@pytest.mark.parametrize(("mask_shape", "kind", "is_causal"), [
    ("padding", "bool", False),          # (B, 1, 1, Tk): the common case
    ("padding", "bool", True),
    ("full", "float", False),            # (B, H, Tq, Tk), added to the scores
    ("square", "bool", False),           # (Tq, Tk)
    ("per_batch", "float", True),        # (B, 1, Tq, Tk), with -inf entries
])
def test_masks_match_reference(mask_shape, kind, is_causal):
    b, h, t_q, t_k = 2, 2, 24, 40
    shape = {"padding": (b, 1, 1, t_k), "full": (b, h, t_q, t_k), "square": (t_q, t_k),
             "per_batch": (b, 1, t_q, t_k)}[mask_shape]
    g = torch.Generator().manual_seed(1)
    allowed = torch.rand(shape, generator=g) > 0.3
    allowed[..., 0] = True  # every row keeps a key here; empty rows have their own test
    mask = allowed if kind == "bool" else torch.randn(shape, generator=g).masked_fill(~allowed, float("-inf"))
    assert_matches(*qkv(b, h, t_q, t_k, 40), mask.to(DEVICE), is_causal)


def test_custom_scale_and_non_contiguous_inputs_are_read_in_place():
    b, h, t, d = 1, 2, 36, 40
    q = torch.randn(b, t, h, d, device=DEVICE).transpose(1, 2)  # (B, T, H, D) -> (B, H, T, D): strided
    k = torch.randn(b, h, t, 2 * d, device=DEVICE)[..., ::2]  # every other column: last-dim stride 2
    v = torch.randn(b, h, t + 5, d, device=DEVICE)[:, :, 5:]  # a slice starting at an offset
    assert not (q.is_contiguous() or k.is_contiguous() or v.is_contiguous())
    assert_matches(q, k, v, scale=0.3)


def test_gradient_of_a_non_contiguous_output_gradient():
    q, k, v = qkv(1, 2, 30, 30, 16)
    g_out = torch.randn(1, 30, 2, 16, device=DEVICE).transpose(1, 2)  # a strided dO, as a later transpose gives
    _, grads = with_grads(lambda q, k, v: flash_attention(q, k, v, is_causal=True), q, k, v, g_out)
    _, want = with_grads(lambda q, k, v: reference(q, k, v, None, True), q.double(), k.double(), v.double(),
                         g_out.double())
    for got, exp in zip(grads, want, strict=True):
        torch.testing.assert_close(got.double(), exp, atol=1e-4, rtol=0)


def test_gradient_of_the_query_alone():
    # only q requires grad: the dK/dV pass is skipped, and dq is unchanged
    q, k, v = qkv(1, 2, 24, 40, 16)
    q.requires_grad_()
    out = flash_attention(q, k, v, is_causal=True)
    g_out = torch.randn(out.shape, device=DEVICE)
    (dq,) = torch.autograd.grad(out, q, g_out)
    _, (want, _, _) = with_grads(lambda q, k, v: reference(q, k, v, None, True), q.double(), k.double(), v.double(),
                                 g_out.double())
    torch.testing.assert_close(dq.double(), want, atol=1e-4, rtol=0)


@pytest.mark.parametrize("h_kv", [2, 1])
def test_grouped_query_attention_matches_torch_enable_gqa(h_kv):
    q, k, v = qkv(2, 4, 20, 33, 16, h_kv=h_kv)
    mask = (torch.rand(2, 1, 1, 33) > 0.3).to(DEVICE)
    assert_matches(q, k, v, mask, is_causal=True, enable_gqa=True)


def test_query_rows_with_every_key_masked_give_zero_output_and_zero_gradient():
    b, h, t_q, t_k = 2, 2, 20, 40
    mask = torch.ones(b, 1, t_q, t_k, dtype=torch.bool)
    mask[0, :, 3] = False  # query 3 of batch 0 may attend nothing
    mask[1] = False  # batch 1: every key is padding
    bias = torch.zeros(b, 1, t_q, t_k).masked_fill(~mask, float("-inf"))
    for m in (mask, bias):
        out, (dq, dk, dv) = assert_matches(*qkv(b, h, t_q, t_k, 16), m.to(DEVICE))
        assert (out[0, :, 3] == 0).all() and (out[1] == 0).all()
        assert (dq[0, :, 3] == 0).all() and (dq[1] == 0).all() and (dk[1] == 0).all() and (dv[1] == 0).all()


def test_causal_never_visits_key_blocks_above_the_diagonal():
    # Keys from 128 on are NaN. With top-left causality and Tq = 16 no query may see them, and every block size
    # divides 128, so a kernel that loaded even one of those blocks would spread NaN (0 · NaN = NaN in P V).
    q, k, v = qkv(1, 2, 16, 256, 16)
    k[:, :, 128:], v[:, :, 128:] = float("nan"), float("nan")
    g_out = torch.randn(q.shape, device=DEVICE)
    out, (dq, dk, dv) = with_grads(lambda q, k, v: flash_attention(q, k, v, is_causal=True), q, k, v, g_out)
    want, (wq, wk, _) = with_grads(lambda q, k, v: reference(q, k, v, None, True),
                                    q.double(), k[:, :, :16].double(), v[:, :, :16].double(), g_out.double())
    torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=0)
    torch.testing.assert_close(dq.double(), wq, atol=1e-4, rtol=0)
    torch.testing.assert_close(dk[:, :, :16].double(), wk, atol=1e-4, rtol=0)
    assert (dk[:, :, 16:] == 0).all() and (dv[:, :, 16:] == 0).all()


# No shrinking: under the interpreter it takes minutes; a failure is reported as found.
@settings(max_examples=6, phases=[Phase.explicit, Phase.generate])
@given(b=st.integers(1, 2), h_kv=st.integers(1, 2), group=st.integers(1, 2), t_q=st.integers(1, 40),
       t_k=st.integers(1, 40), d=st.sampled_from([16, 24, 40, 64]),
       mask_kind=st.sampled_from(["none", "bool", "float"]), is_causal=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_any_shape_and_mask_matches_reference(b, h_kv, group, t_q, t_k, d, mask_kind, is_causal, seed):
    q, k, v = qkv(b, h_kv * group, t_q, t_k, d, h_kv=h_kv, seed=seed)
    g = torch.Generator().manual_seed(seed)
    mask = None
    if mask_kind == "bool":
        mask = torch.rand(b, 1, t_q, t_k, generator=g) > 0.3  # some rows may end up empty: that must work too
    elif mask_kind == "float":
        mask = torch.randn(b, 1, 1, t_k, generator=g).masked_fill(torch.rand(b, 1, 1, t_k, generator=g) < 0.3,
                                                                  float("-inf"))
    mask = None if mask is None else mask.to(DEVICE)
    assert_matches(q, k, v, mask, is_causal, enable_gqa=group > 1)


# ----------------------------------------------------------------------------------- half precision


def test_float16_within_stated_tolerance():
    # Outputs up to ~2 round to within 1e-3 in float16, and P is rounded before P·V, dS before dS·K, as in every
    # fused kernel: measured errors 0.9e-3 (output) and 1.9e-3 (gradients) over three seeds, as large as torch's own.
    assert_matches(*qkv(1, 2, 40, 40, 64, dtype=torch.float16), is_causal=True, fwd_tol=3e-3, grad_tol=5e-3)


def test_bfloat16_within_stated_tolerance(bf16_dot):
    # bfloat16 keeps 8 significant bits to float16's 11, so 8× the rounding: measured errors 1.6e-2 (output) and
    # 3.8e-2 (gradients) over three seeds.
    assert_matches(*qkv(1, 2, 40, 40, 64, dtype=torch.bfloat16), is_causal=True, fwd_tol=3e-2, grad_tol=8e-2)


# ------------------------------------------------------------------------------------ status and errors


def test_masks_are_broadcast_by_stride_not_materialised():
    mask = torch.rand(2, 1, 1, 40) > 0.5
    seen, kind, strides = _mask_args(mask, torch.empty(0), (2, 4, 30, 40))
    assert seen.data_ptr() == mask.data_ptr() and strides == (40, 0, 0, 1) and kind == flash_kernels.MASK_BOOL


def test_flash_status(monkeypatch):
    assert flash_status(DEVICE) is None
    assert "meta" in flash_status("meta")
    if not INTERPRETED:
        assert "TRITON_INTERPRET" in flash_status("cpu")
    monkeypatch.setattr(flash, "_kernels", None)  # as when `import triton` failed
    assert flash_status(DEVICE).startswith("triton is not installed")


def _t(*shape, dtype=torch.float32, **kwargs):
    return torch.zeros(shape, dtype=dtype, device=DEVICE, **kwargs)


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    ((_t(2, 4, 8), _t(2, 4, 8), _t(2, 4, 8)), {}, r"backend='flash' needs query of shape \(B, H, T, D\), got shape"),
    ((_t(1, 2, 8, 16, dtype=torch.float64),) * 3, {}, "supports float16, bfloat16 and float32, got query of "
                                                      "torch.float64"),
    ((_t(1, 2, 8, 16), _t(1, 2, 8, 16, dtype=torch.float16), _t(1, 2, 8, 16)), {}, "one dtype"),
    ((_t(1, 2, 8, 16), _t(1, 2, 8, 16), _t(1, 2, 8, 32)), {}, r"key and value of one shape.*value \(1, 2, 8, 32\)"),
    ((_t(1, 2, 8, 16), _t(1, 2, 8, 24), _t(1, 2, 8, 24)), {}, "with query's B and D"),
    ((_t(1, 2, 8, 512),) * 3, {}, "supports head_dim from 1 to 256, got 512"),
    ((_t(1, 2, 0, 16),) * 3, {}, "non-empty"),
    ((_t(1, 4, 8, 16), _t(1, 2, 8, 16), _t(1, 2, 8, 16)), {}, "got 4 and 2; pass enable_gqa=True"),
    ((_t(1, 3, 8, 16), _t(1, 2, 8, 16), _t(1, 2, 8, 16)), {"enable_gqa": True},
     "num_heads a multiple of num_kv_heads, got 3 query heads and 2"),
    ((_t(1, 2, 8, 16),) * 3, {"attn_mask": _t(1, 2, 8, 9)}, r"attn_mask of shape \(1, 2, 8, 9\) does not broadcast"),
    ((_t(1, 2, 8, 16),) * 3, {"attn_mask": _t(8, 8, requires_grad=True)}, "does not differentiate attn_mask"),
    ((_t(1, 2, 8, 16),) * 3, {"scale": float("nan")}, "scale must be a finite float"),
])
def test_bad_input_is_named(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        flash_attention(*args, **kwargs)


def test_unsupported_device_is_named():
    q = torch.zeros(1, 1, 4, 16, device="meta")
    with pytest.raises(ValueError, match="backend='flash' cannot run on meta"):
        flash_attention(q, q, q)


# ------------------------------------------------------------------------------ on a GPU, real sizes

# Half precision: our error against float64 must be within 2× (plus a floor) that of torch's own SDPA in the same
# dtype, the usual standard for fused attention kernels; float32 uses IEEE dot products: fixed bounds.


def _errors(out, grads, want, want_grads):
    return [(a.double() - b).abs().max().item() for a, b in zip((out, *grads), (want, *want_grads), strict=True)]


@cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize(("shape", "h_kv", "is_causal", "padding"), [
    ((2, 8, 1024, 1024, 64), 8, True, False),
    ((1, 4, 2048, 2048, 128), 4, False, True),
    ((2, 8, 1000, 1000, 80), 2, True, True),
    ((1, 4, 512, 512, 256), 4, True, False),
    ((4, 8, 1, 2048, 64), 8, False, True),  # one decoding step against a long cache
])
def test_cuda_matches_reference_at_real_sizes(dtype, shape, h_kv, is_causal, padding):
    b, h, t_q, t_k, d = shape
    q, k, v = qkv(b, h, t_q, t_k, d, h_kv=h_kv, dtype=dtype, device="cuda")
    mask = None
    if padding:  # every other sequence is a quarter padding
        lengths = torch.tensor([t_k, t_k * 3 // 4] * b)[:b]
        mask = (torch.arange(t_k)[None, :] < lengths[:, None])[:, None, None, :].cuda()
    g_out = torch.randn(q.shape, device="cuda", dtype=dtype)
    gqa = h_kv != h
    ours = with_grads(lambda q, k, v: flash_attention(q, k, v, mask, is_causal, enable_gqa=gqa), q, k, v, g_out)
    want = with_grads(lambda q, k, v: reference(q, k, v, mask, is_causal, enable_gqa=gqa),
                      q.double(), k.double(), v.double(), g_out.double())
    errors = _errors(*ours, *want)
    if dtype == torch.float32:
        assert errors[0] <= 1e-5 and max(errors[1:]) <= 1e-4, errors
        return
    merged = mask
    if mask is not None and is_causal:
        merged = mask & torch.ones(t_q, t_k, dtype=torch.bool, device="cuda").tril()
    theirs = with_grads(lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=merged, is_causal=is_causal and mask is None, enable_gqa=gqa), q, k, v, g_out)
    for name, ours_e, theirs_e in zip(("out", "dq", "dk", "dv"), errors, _errors(*theirs, *want), strict=True):
        assert ours_e <= 2 * theirs_e + 1e-3, f"{name}: ours {ours_e:.2e}, torch's {theirs_e:.2e}"
