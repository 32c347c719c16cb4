"""Soft-capping (Gemma 2) and sinks (gpt-oss) in every backend, against a float64 reference written here.

The reference is the definition, one line each: scores ``q·kᵀ · scale``, ``cap · tanh(s / cap)``, the mask as -inf,
the sink as one more column of the softmax, dropped after it. Forward and the gradients of q, k, v and the sinks
agree with it (float32 ≤ 1e-5); the sinks also agree with transformers' own gpt-oss attention where it imports.
The flash backend runs under Triton's interpreter on the CPU (tests/conftest.py), as its other tests do.
"""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab.functional import CallKind, choose_backend, scaled_dot_product_attention
from attnlab.functional.backends import KERNELS, auto_backend
from attnlab.functional.logit_options import softcap

CPU_BACKENDS = ("math", "sdpa", "chunked")


def reference(q, k, v, mask=None, is_causal=False, cap=None, sinks=None, scale=None):
    """float64, every step as written: scores, cap, mask, softmax over [scores, sink], weighted sum."""
    q, k, v = (t.double() for t in (q, k, v))
    groups = q.shape[-3] // k.shape[-3]
    k, v = k.repeat_interleave(groups, -3), v.repeat_interleave(groups, -3)
    s = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if cap is not None:
        s = cap * torch.tanh(s / cap)
    allowed = torch.ones(s.shape[-2:], dtype=torch.bool)
    if is_causal:
        allowed = allowed.tril()
    if mask is not None:
        allowed = allowed & mask
    s = s.masked_fill(~allowed, -math.inf)
    if sinks is not None:
        s = torch.cat((s, sinks.double().view(-1, 1, 1).expand(*s.shape[:-1], 1)), -1)
    w = torch.softmax(s, -1).nan_to_num(0.0)  # a row with nothing to see (and no sink): weights 0
    return w[..., : v.shape[-2]] @ v


def qkv(b=2, h=4, h_kv=2, t_q=9, t_k=9, d=8, seed=0, scale=3.0):
    """Inputs with large scores (scale 3), so that the cap bends them."""
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(b, h, t_q, d, generator=g), scale * torch.randn(b, h_kv, t_k, d, generator=g),
            torch.randn(b, h_kv, t_k, d, generator=g), torch.randn(h, generator=g))


def grads(fn, q, k, v, sinks):
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v, sinks)]
    out = fn(*leaves)
    g_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out)
    return out, torch.autograd.grad(out, leaves, g_out, allow_unused=True)


def ours(backend, cap, with_sinks, **kw):
    def fn(q, k, v, sinks):
        return scaled_dot_product_attention(q, k, v, enable_gqa=True, backend=backend, softcap=cap,
                                            sinks=sinks if with_sinks else None, **kw)
    return fn


def theirs(cap, with_sinks, **kw):
    def fn(q, k, v, sinks):
        return reference(q, k, v, cap=cap, sinks=sinks if with_sinks else None, **kw)
    return fn


def backends_for(cap):
    return [b for b in CPU_BACKENDS if cap is None or KERNELS[b].softcap]


@pytest.mark.parametrize(("cap", "with_sinks"), [(5.0, False), (None, True), (5.0, True)])
@pytest.mark.parametrize("masking", ["causal", "padding", "none"])
def test_every_backend_equals_the_reference_forward_and_backward(cap, with_sinks, masking):
    q, k, v, sinks = qkv()
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    kw = {"is_causal": True} if masking == "causal" else {}
    ref_kw = dict(kw)
    if masking == "padding":
        kw["attn_mask"] = mask[:, None, None, :]
        ref_kw["mask"] = mask[:, None, None, :]
    want, want_grads = grads(theirs(cap, with_sinks, **ref_kw), q.double(), k.double(), v.double(), sinks.double())
    for backend in backends_for(cap):
        got, got_grads = grads(ours(backend, cap, with_sinks, **kw), q, k, v, sinks)
        torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=0, msg=backend)
        for name, g, w in zip(["q", "k", "v", "sinks"], got_grads, want_grads, strict=True):
            if name == "sinks" and not with_sinks:
                continue
            torch.testing.assert_close(g.double(), w, atol=1e-4, rtol=1e-5, msg=f"{backend}: d{name}")


def test_the_cap_bends_the_scores_and_changes_the_output():
    q, k, v, _ = qkv()
    plain = scaled_dot_product_attention(q, k, v, enable_gqa=True, backend="math")
    capped = scaled_dot_product_attention(q, k, v, enable_gqa=True, backend="math", softcap=2.0)
    assert (plain - capped).abs().max() > 0.1  # scores of order 10 capped at 2: a real difference
    torch.testing.assert_close(softcap(torch.tensor([100.0, 0.001, -100.0]), 50.0),
                               torch.tensor([50 * math.tanh(2), 0.001, -50 * math.tanh(2)]), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_sinks_take_weight_and_a_row_with_no_key_gives_zero_not_nan(backend):
    q, k, v, sinks = qkv(h_kv=4, scale=1.0)
    out, w = scaled_dot_product_attention(q, k, v, is_causal=True, sinks=sinks, backend="math", return_weights=True)
    s = (q @ k.transpose(-2, -1) * 8**-0.5).masked_fill(~torch.ones(9, 9, dtype=torch.bool).tril(), -math.inf)
    lse = torch.logsumexp(torch.cat((s, sinks.view(-1, 1, 1).expand(2, 4, 9, 1)), -1), -1)
    # the weights on the keys sum to 1 − exp(sink − lse): the rest went to the sink
    torch.testing.assert_close(w.sum(-1), 1 - (sinks.view(-1, 1) - lse).exp(), atol=1e-6, rtol=0)
    assert (w.sum(-1) < 1 - 1e-4).all()
    nothing = torch.zeros(2, 1, 1, 9, dtype=torch.bool)
    out = scaled_dot_product_attention(q, k, v, attn_mask=nothing, sinks=sinks, backend=backend)
    assert torch.equal(out, torch.zeros_like(out))


def test_sinks_equal_transformers_gpt_oss_attention():
    gpt_oss = pytest.importorskip("transformers.models.gpt_oss.modeling_gpt_oss")
    q, k, v, sinks = qkv()
    module = torch.nn.Module()
    module.sinks, module.num_key_value_groups, module.training = torch.nn.Parameter(sinks), 2, False
    causal = torch.zeros(9, 9).masked_fill(~torch.ones(9, 9, dtype=torch.bool).tril(), -math.inf)
    want, _ = gpt_oss.eager_attention_forward(module, q, k, v, causal, scaling=8**-0.5)
    for backend in CPU_BACKENDS:
        got = scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, sinks=sinks, backend=backend)
        torch.testing.assert_close(got.transpose(1, 2), want, atol=1e-5, rtol=0, msg=backend)


@pytest.mark.parametrize("cap", [0, -1.0, math.inf, math.nan, True, "50"])
def test_a_cap_that_is_not_a_positive_number_is_refused(cap):
    q = torch.zeros(1, 1, 2, 4)
    with pytest.raises(ValueError, match=rf"softcap must be None or a finite number > 0.*got {cap!r}"):
        scaled_dot_product_attention(q, q, q, softcap=cap)


def test_a_backend_that_cannot_cap_is_refused_and_bad_sinks_are_named():
    q = torch.zeros(1, 2, 2, 4)
    with pytest.raises(ValueError, match=r"backend='sdpa' cannot soft-cap.*\['math', 'chunked', 'flash'\]"):
        scaled_dot_product_attention(q, q, q, softcap=30.0, backend="sdpa")
    with pytest.raises(ValueError, match=r"sinks must be a floating tensor of shape \(2,\).*got torch.float32 of "
                                         r"shape \(3,\)"):
        scaled_dot_product_attention(q, q, q, sinks=torch.zeros(3))


@given(device=st.sampled_from(["cpu", "cuda"]), queries=st.integers(0, 12), keys=st.integers(0, 12),
       dropout=st.booleans(), weights=st.booleans(), flash=st.booleans(),
       mask=st.sampled_from(["none", "causal", "bool", "float"]), cap=st.booleans(), sinks=st.booleans())
def test_auto_never_picks_a_kernel_that_cannot_cap(device, queries, keys, dropout, weights, flash, mask, cap, sinks):
    """Nor torch's kernel for sinks over 2²⁰ scores or more (it would take them as a mask of every score)."""
    kind = CallKind(device, "bfloat16", queries, keys, mask, dropout, weights, cap, sinks, flash)
    chosen = choose_backend(kind)
    plain = choose_backend(CallKind(device, "bfloat16", queries, keys, mask, dropout, weights, flash=flash))
    if cap or (sinks and queries + keys >= 20):
        assert KERNELS[chosen].softcap
    else:
        assert chosen == plain  # nothing to avoid: the rule as it was
    assert chosen != "flash" or (device == "cuda" and flash and not dropout)


def test_auto_with_a_cap_runs_a_kernel_that_caps():
    q, k, v, _ = qkv(t_q=40, t_k=40)
    want = reference(q, k, v, is_causal=True, cap=4.0)
    got = scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, softcap=4.0)
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=0)


# ---- flash, under Triton's interpreter on the CPU (or compiled on a GPU) -----------------------------------------


@pytest.mark.parametrize(("cap", "with_sinks", "causal"), [(5.0, False, True), (None, True, True),
                                                            (5.0, True, False)])
def test_flash_equals_the_reference_forward_and_backward(cap, with_sinks, causal):
    pytest.importorskip("triton", reason="backend='flash' needs triton")
    from attnlab.functional.flash import flash_status

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if flash_status(device) is not None:
        pytest.skip(flash_status(device))
    q, k, v, sinks = (t.to(device) for t in qkv(b=1, t_q=37, t_k=37, d=16))  # 37: several 16 × 32 blocks, a ragged end
    want, want_grads = grads(theirs(cap, with_sinks, is_causal=causal), *(t.double().cpu() for t in (q, k, v, sinks)))
    got, got_grads = grads(ours("flash", cap, with_sinks, is_causal=causal), q, k, v, sinks)
    torch.testing.assert_close(got.double().cpu(), want, atol=1e-5, rtol=0)
    for name, g, w in zip(["q", "k", "v", "sinks"], got_grads, want_grads, strict=True):
        if name == "sinks" and not with_sinks:
            continue
        torch.testing.assert_close(g.double().cpu(), w, atol=1e-4, rtol=1e-5, msg=f"flash: d{name}")


def test_a_capped_call_on_cuda_asks_whether_flash_can_run(monkeypatch):
    """The flash table ships without a float32 row, so a plain call never asks; a capped one must, to avoid torch's
    kernel."""
    import attnlab.functional.flash as flash

    asked = []
    monkeypatch.setattr(flash, "flash_status", lambda device: asked.append(device) or None)
    auto_backend.cache_clear()
    cuda = torch.device("cuda")
    plain = auto_backend(cuda, torch.float32, 7, 7, 16, "causal", False, False, False, False)
    assert plain is KERNELS["sdpa"] and asked == []
    capped = auto_backend(cuda, torch.float32, 7, 7, 16, "causal", False, False, True, False)
    assert capped is KERNELS["flash"] and asked == [cuda]
    auto_backend.cache_clear()
