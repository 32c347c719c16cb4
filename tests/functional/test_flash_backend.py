"""backend='flash' as a backend of the attention op, the modules and the models (the kernel itself: test_flash.py).

Without a GPU the kernels run under Triton's interpreter (tests/conftest.py), so the shapes are tiny.
"""

import re

import pytest
import torch

pytest.importorskip("triton", reason="backend='flash' needs triton")

from attnlab.attention import MultiHeadAttention
from attnlab.functional import flash, flash_kernels, scaled_dot_product_attention
from attnlab.models import GPT, GPTConfig

DEVICE = "cuda" if torch.cuda.is_available() and not flash_kernels.INTERPRETED else "cpu"


def both(q, k, v, **kwargs):
    """flash and math on the same call: outputs and the gradients of q, k, v."""
    results = []
    for backend in ("flash", "math"):
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        out = scaled_dot_product_attention(*leaves, backend=backend, **kwargs)
        out.backward(torch.linspace(-1, 1, out.numel(), device=out.device).reshape(out.shape))
        results.append((out, [t.grad for t in leaves]))
    return results


@pytest.mark.parametrize(("q_shape", "kv_shape", "mask_shape", "gqa"), [
    ((9, 16), (11, 16), (9, 11), False),                      # (T, D): one head
    ((3, 9, 16), (3, 11, 16), (3, 1, 11), False),              # (H, T, D)
    ((2, 3, 9, 16), (2, 3, 11, 16), (2, 1, 1, 11), False),     # (B, H, T, D) with a padding mask
    ((2, 3, 9, 16), (1, 3, 11, 16), (11,), False),             # keys shared over the batch, a key mask
    ((2, 2, 3, 9, 16), (2, 1, 3, 11, 16), (2, 1, 1, 9, 11), False),  # two batch dims, one broadcast
    ((2, 4, 9, 16), (2, 2, 11, 16), (2, 1, 9, 11), True),      # grouped-query attention, kept grouped
])
def test_every_batch_layout_equals_math(q_shape, kv_shape, mask_shape, gqa):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(s, generator=g).to(DEVICE) for s in (q_shape, kv_shape, kv_shape))
    mask = (torch.rand(mask_shape, generator=g) > 0.3).to(DEVICE)
    (out, grads), (want, want_grads) = both(q, k, v, attn_mask=mask, is_causal=True, enable_gqa=gqa)
    assert out.shape == want.shape
    torch.testing.assert_close(out, want, atol=1e-5, rtol=0)
    for got, exp in zip(grads, want_grads, strict=True):
        assert got.shape == exp.shape
        torch.testing.assert_close(got, exp, atol=1e-4, rtol=0)


def test_multi_head_attention_with_flash_equals_sdpa_forward_and_backward():
    torch.manual_seed(0)
    x = torch.randn(2, 12, 32, device=DEVICE)
    mask = torch.ones(2, 12, dtype=torch.long, device=DEVICE)
    mask[1, 8:] = 0
    runs = []
    for backend in ("flash", "sdpa"):
        torch.manual_seed(1)
        mha = MultiHeadAttention(32, 32, num_heads=2, backend=backend).to(DEVICE)
        out = mha(x, attention_mask=mask)
        out.square().sum().backward()
        runs.append((out, mha.W_query.weight.grad, mha.W_value.weight.grad))
    for got, want in zip(*runs, strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_a_gpt_with_flash_decodes_as_with_sdpa():
    # prefill (a causal mask from the cache), then one query at a time against the cached keys
    config = dict(vocab_size=40, context_length=24, d_model=32, num_layers=2, num_heads=2)
    models = []
    for backend in ("flash", "sdpa"):
        torch.manual_seed(0)
        models.append(GPT(GPTConfig(**config, backend=backend)).to(DEVICE).eval())
    idx = torch.randint(0, 40, (2, 6), device=DEVICE)
    with torch.no_grad():
        torch.testing.assert_close(models[0](idx).logits, models[1](idx).logits, atol=1e-5, rtol=0)
        caches = [m.new_cache(2) for m in models]
        logits = [m(idx, kv_cache=c).logits[:, -1] for m, c in zip(models, caches, strict=True)]
        for _ in range(4):
            torch.testing.assert_close(logits[0], logits[1], atol=1e-5, rtol=0)
            nxt = logits[1].argmax(-1, keepdim=True)
            logits = [m(nxt, kv_cache=c).logits[:, -1] for m, c in zip(models, caches, strict=True)]


# ------------------------------------------------------------------------------------------ errors


def qkv(d=16, dtype=torch.float32, device=DEVICE):
    return (torch.zeros(1, 2, 8, d, dtype=dtype, device=device),) * 3


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    (qkv(), {"dropout_p": 0.1}, "backend='flash' has no dropout, got dropout_p=0.1; use backend='sdpa' (torch's "
                                "kernel, with dropout), 'chunked', 'math' or 'auto'"),
    (qkv(), {"return_weights": True}, "backend='flash' cannot return weights; use backend='math' or 'auto'"),
    (qkv(d=320), {}, "backend='flash' supports head_dim from 1 to 256, got 320; backend='sdpa' or 'auto' take any "
                     "head_dim"),
    (qkv(dtype=torch.float64), {}, "backend='flash' supports float16, bfloat16 and float32, got query of "
                                   "torch.float64"),
])
def test_what_flash_cannot_do_is_named(args, kwargs, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        scaled_dot_product_attention(*args, backend="flash", **kwargs)


def test_a_device_flash_cannot_run_on_is_named_with_the_reason():
    # the reason is flash_status's (it differs under the interpreter and on a GPU, see test_flash.py)
    with pytest.raises(ValueError, match=r"^backend='flash' cannot run on meta: .*, not (on )?meta; backend='sdpa' or "
                                         r"'auto' run everywhere$"):
        scaled_dot_product_attention(*qkv(device="meta"), backend="flash")


def test_without_triton_the_error_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr(flash, "_kernels", None)  # as when `import triton` failed
    monkeypatch.setattr(flash, "_IMPORT_ERROR", "ModuleNotFoundError: No module named 'triton'")
    q, k, v = qkv()
    message = (f"backend='flash' cannot run on {q.device}: triton is not installed (pip install 'attnlab[gpu]'; "
               f"ModuleNotFoundError: No module named 'triton'); backend='sdpa' or 'auto' run everywhere")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):  # a GPU's device is named "cuda:0"
        scaled_dot_product_attention(q, k, v, backend="flash")


def test_a_module_training_with_dropout_on_flash_is_refused():
    mha = MultiHeadAttention(32, 32, num_heads=2, dropout=0.1, backend="flash").to(DEVICE)
    with pytest.raises(ValueError, match=r"backend='flash' has no dropout, got dropout_p=0\.1"):
        mha(torch.randn(1, 4, 32, device=DEVICE))
    mha.eval()  # in eval mode dropout is off: flash runs
    assert mha(torch.randn(1, 4, 32, device=DEVICE)).shape == (1, 4, 32)
