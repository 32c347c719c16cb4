"""scaled_dot_product_attention: hand-worked numbers, every backend against torch, laws, and errors."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from attnlab.functional import BACKENDS, scaled_dot_product_attention

# flash (Triton: no float64, Dv = D, and slow under the CPU's interpreter) is proven in test_flash.py and
# test_flash_backend.py; here every other backend
TESTED = [b for b in BACKENDS if b != "flash"]
CONCRETE = [b for b in TESTED if b != "auto"]


def test_hand_worked_two_by_two():
    # Q = [[1,0],[0,1]], K = [[1,0],[.5,.5]], V = [[2,0],[1,1]], d_k = 2, so scale = 1/√2.
    # Q Kᵀ = [[1, .5], [0, .5]]  ->  scaled: [[1/√2, 1/(2√2)], [0, 1/(2√2)]].
    # Row 0: the two scores differ by a = 1/(2√2), so its weights are [σ(a), 1-σ(a)] with σ the logistic function.
    # Row 1: they differ by -a, so its weights are [σ(-a), σ(a)] = [1-σ(a), σ(a)].
    # Output = weights @ V: row 0 = σ(a)[2,0] + (1-σ(a))[1,1] = [1+σ(a), 1-σ(a)]; row 1 = [2-σ(a), σ(a)].
    a = 1 / (2 * math.sqrt(2))
    s = 1 / (1 + math.exp(-a))  # σ(a) = 0.58747...
    expected_w = torch.tensor([[s, 1 - s], [1 - s, s]])
    expected_out = torch.tensor([[1 + s, 1 - s], [2 - s, s]])
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    k = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    v = torch.tensor([[2.0, 0.0], [1.0, 1.0]])
    out, w = scaled_dot_product_attention(q, k, v, return_weights=True)
    torch.testing.assert_close(w, expected_w, atol=1e-6, rtol=0)
    torch.testing.assert_close(out, expected_out, atol=1e-6, rtol=0)
    for backend in CONCRETE:
        torch.testing.assert_close(scaled_dot_product_attention(q, k, v, backend=backend), expected_out,
                                   atol=1e-6, rtol=0)


@st.composite
def attention_case(draw):
    b, h = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    t_q, t_k = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    d, d_v = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    mask_kind = draw(st.sampled_from(["none", "bool", "float", "padding"]))
    is_causal = draw(st.booleans())
    empty_rows = draw(st.booleans())  # force some queries to have nothing to attend to
    seed = draw(st.integers(0, 2**31 - 1))
    return b, h, t_q, t_k, d, d_v, mask_kind, is_causal, empty_rows, seed


def make_case(b, h, t_q, t_k, d, d_v, mask_kind, is_causal, empty_rows, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, t_q, d, generator=g, dtype=dtype)
    k = torch.randn(b, h, t_k, d, generator=g, dtype=dtype)
    v = torch.randn(b, h, t_k, d_v, generator=g, dtype=dtype)
    mask = None
    if mask_kind == "bool":
        mask = torch.rand(b, 1, t_q, t_k, generator=g) > 0.3
    elif mask_kind == "float":
        mask = torch.randn(b, h, t_q, t_k, generator=g, dtype=dtype)
        mask = mask.masked_fill(torch.rand(b, h, t_q, t_k, generator=g) < 0.3, float("-inf"))
    elif mask_kind == "padding":
        mask = torch.rand(b, 1, 1, t_k, generator=g) > 0.3
    if empty_rows and mask is not None:
        mask = mask.expand(b, h, t_q, t_k).clone()
        forbid = False if mask.dtype == torch.bool else float("-inf")
        mask[:, :, 0, :] = forbid
    return q, k, v, mask, is_causal


def torch_reference(q, k, v, mask, is_causal):
    """torch's SDPA (math kernel); it refuses a mask together with is_causal, so merge them by hand."""
    if is_causal and mask is not None:
        causal = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        mask = mask & causal if mask.dtype == torch.bool else mask.masked_fill(~causal, float("-inf"))
        is_causal = False
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)


def grads(fn, q, k, v, g_out):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v)
    return out, torch.autograd.grad(out, (q, k, v), g_out)


@given(attention_case())
def test_every_backend_equals_math_and_torch(case):
    q, k, v, mask, is_causal = make_case(*case)
    g_out = torch.randn(*q.shape[:-1], v.shape[-1])
    ref, ref_grads = grads(lambda q, k, v: torch_reference(q, k, v, mask, is_causal), q, k, v, g_out)
    ref = torch.nan_to_num(ref)  # old torch releases gave NaN for rows with nothing to attend to
    math_out, math_grads = grads(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal, backend="math"),
        q, k, v, g_out)
    for backend in TESTED:
        out, gs = grads(
            lambda q, k, v, b=backend: scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal, backend=b),
            q, k, v, g_out)
        assert torch.isfinite(out).all() and all(torch.isfinite(x).all() for x in gs)
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=0, msg=f"{backend} vs torch")
        torch.testing.assert_close(out, math_out, atol=1e-5, rtol=0, msg=f"{backend} vs math")
        for got, want, name in zip(gs, math_grads, "qkv", strict=True):
            torch.testing.assert_close(got, want, atol=1e-4, rtol=0, msg=f"{backend} d{name} vs math")
        for got, want, name in zip(gs, ref_grads, "qkv", strict=True):
            if mask is not None and not torch.isfinite(want).all():
                continue  # torch's own gradient is NaN here (rows with nothing to attend to)
            torch.testing.assert_close(got, want, atol=1e-4, rtol=0, msg=f"{backend} d{name} vs torch")


def test_fully_masked_rows_give_zero_output_and_weights_in_every_backend():
    q, k, v = torch.randn(3, 2, 4, 5, 8).unbind(0)
    mask = torch.ones(2, 4, 5, 5, dtype=torch.bool)
    mask[:, :, 2, :] = False
    out, w = scaled_dot_product_attention(q, k, v, mask, return_weights=True)
    assert (w[:, :, 2] == 0).all() and (out[:, :, 2] == 0).all()
    for backend in CONCRETE:
        out = scaled_dot_product_attention(q, k, v, mask, backend=backend)
        assert (out[:, :, 2] == 0).all() and torch.isfinite(out).all()


@given(attention_case())
def test_weight_rows_sum_to_one_where_any_key_is_allowed(case):
    q, k, v, mask, is_causal = make_case(*case)
    _, w = scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal, return_weights=True)
    sums = w.sum(-1)
    allowed = (w > 0).any(-1)
    torch.testing.assert_close(sums[allowed], torch.ones_like(sums[allowed]), atol=1e-5, rtol=0)
    assert (sums[~allowed] == 0).all()


@given(st.integers(2, 12), st.integers(0, 11), st.sampled_from(CONCRETE))
def test_causal_output_ignores_the_future(t, i, backend):
    i = min(i, t - 2)
    q, k, v = torch.randn(3, 2, 2, t, 4).unbind(0)
    out = scaled_dot_product_attention(q, k, v, is_causal=True, backend=backend)
    q2, k2, v2 = q.clone(), k.clone(), v.clone()
    for tensor in (q2, k2, v2):
        tensor[..., i + 1:, :] = torch.randn_like(tensor[..., i + 1:, :]) * 5  # change every later token
    out2 = scaled_dot_product_attention(q2, k2, v2, is_causal=True, backend=backend)
    torch.testing.assert_close(out[..., : i + 1, :], out2[..., : i + 1, :], atol=1e-6, rtol=0)
    assert not torch.allclose(out[..., i + 1:, :], out2[..., i + 1:, :])


@pytest.mark.parametrize("backend", ["math", "chunked"])
@pytest.mark.parametrize("mask_kind", ["none", "bool", "float"])
@pytest.mark.parametrize("is_causal", [False, True])
def test_gradcheck_float64(backend, mask_kind, is_causal):
    q, k, v, mask, _ = make_case(2, 2, 5, 6, 3, 4, mask_kind, is_causal, empty_rows=mask_kind != "none",
                                 seed=7, dtype=torch.float64)
    inputs = tuple(t.requires_grad_() for t in (q, k, v))

    def fn(q, k, v):
        return scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal, backend=backend)

    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-6)


def test_chunked_with_small_blocks_and_longer_sequences():
    # several query and key blocks, ragged last blocks, causal skipping of whole blocks
    from attnlab.functional import chunked_attention

    q, k, v = torch.randn(3, 2, 3, 70, 16, dtype=torch.float64).unbind(0)
    mask = torch.rand(2, 1, 70, 70) > 0.2
    for is_causal in (False, True):
        ref = scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal, backend="math")
        out = chunked_attention(q, k, v, mask, is_causal, 0.0, 16**-0.5, block_q=16, block_k=24)
        torch.testing.assert_close(out, ref, atol=1e-12, rtol=0)


def test_broadcast_batch_dims_and_scale():
    q = torch.randn(2, 4, 6, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 4, 7, 8, dtype=torch.float64, requires_grad=True)  # shared over the batch
    v = torch.randn(2, 1, 7, 5, dtype=torch.float64, requires_grad=True)  # shared over heads
    ref = F.scaled_dot_product_attention(q, k.expand(2, -1, -1, -1), v.expand(-1, 4, -1, -1), scale=0.3)
    for backend in CONCRETE:
        out = scaled_dot_product_attention(q, k, v, scale=0.3, backend=backend)
        torch.testing.assert_close(out, ref, atol=1e-12, rtol=0)
    assert torch.autograd.gradcheck(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, backend="chunked"), (q, k, v))


def test_dropout_scales_kept_weights():
    q, k = torch.randn(2, 1, 2, 16, 8).unbind(0)
    _, w = scaled_dot_product_attention(q, k, k, return_weights=True)
    torch.manual_seed(1)
    _, dropped = scaled_dot_product_attention(q, k, k, dropout_p=0.25, return_weights=True)
    kept = dropped != 0
    assert 0.5 < kept.float().mean() < 0.95
    torch.testing.assert_close(dropped[kept], w[kept] / 0.75, atol=1e-6, rtol=0)


def test_chunked_dropout_acts_on_weights_and_its_backward_regenerates_the_masks():
    # With V = identity, each output row *is* that query's (dropped) weight row.
    q = torch.randn(1, 2, 40, 8, dtype=torch.float64)
    k = torch.randn(1, 2, 40, 8, dtype=torch.float64)
    v = torch.eye(40, dtype=torch.float64).expand(1, 2, 40, 40)
    _, w = scaled_dot_product_attention(q, k, v, is_causal=True, return_weights=True)
    from attnlab.functional import chunked_attention

    out = chunked_attention(q, k, v, None, True, 0.5, 8**-0.5, block_q=16, block_k=16)
    kept = out != 0
    torch.testing.assert_close(out[kept], w[kept] / 0.5, atol=1e-12, rtol=0)
    assert 0.3 < kept[w > 0].double().mean() < 0.7

    def fn(q, k, v):
        torch.manual_seed(3)  # the same dropout masks on every call
        return chunked_attention(q, k, v, None, True, 0.5, 8**-0.5, block_q=16, block_k=16)

    inputs = tuple(t[..., :24, :].clone().requires_grad_() for t in (q, k, torch.randn(1, 2, 40, 3).double()))
    assert torch.autograd.gradcheck(fn, inputs)


@pytest.mark.parametrize(
    ("kwargs", "err", "msg"),
    [
        (dict(attn_mask=torch.ones(3, 3, dtype=torch.bool)), ValueError,
         r"attn_mask of shape \(3, 3\) does not broadcast to the scores' shape \(2, 4, 5, 6\)"),
        (dict(key=torch.randn(2, 4, 6, 7)), ValueError, r"same head dim.*query \(2, 4, 5, 8\) and key \(2, 4, 6, 7\)"),
        (dict(value=torch.randn(2, 4, 5, 8)), ValueError,
         r"same sequence length.*key \(2, 4, 6, 8\).*value \(2, 4, 5, 8\)"),
        (dict(query=torch.ones(2, 4, 5, 8, dtype=torch.int64)), TypeError,
         "query must be a floating-point tensor, got dtype torch.int64"),
        (dict(attn_mask=torch.ones(5, 6, dtype=torch.int64)), TypeError,
         "attn_mask must be bool .* got dtype torch.int64"),
        (dict(dropout_p=1.0), ValueError, r"dropout_p must be a float in \[0, 1\), got 1.0"),
        (dict(dropout_p=-0.1), ValueError, r"dropout_p must be a float in \[0, 1\), got -0.1"),
        (dict(backend="fast"), ValueError,
         "backend must be one of 'auto', 'math', 'sdpa', 'chunked', 'flash', got 'fast'"),
        (dict(backend="sdpa", return_weights=True), ValueError, "backend='sdpa' cannot return weights"),
        (dict(key=torch.randn(6, 8)), None, None),  # broadcasting k over the batch is fine
        (dict(query=torch.randn(8)), ValueError, r"query must have shape \(\.\.\., T, D\), got shape \(8,\)"),
        (dict(key=torch.randn(2, 4, 6, 8, dtype=torch.float64)), TypeError, "must share a dtype"),
        (dict(scale=float("nan")), ValueError, "scale must be a finite float or None"),
    ],
)
def test_bad_input_is_named(kwargs, err, msg):
    args = dict(query=torch.randn(2, 4, 5, 8), key=torch.randn(2, 4, 6, 8), value=torch.randn(2, 4, 6, 8))
    args.update(kwargs)
    if err is None:
        scaled_dot_product_attention(**args)
        return
    with pytest.raises(err, match=msg):
        scaled_dot_product_attention(**args)


@st.composite
def gqa_case(draw):
    """Grouped-query shapes: Hq query heads over Hkv key/value heads, with or without a padding mask."""
    h_kv = draw(st.integers(1, 3))
    h_q = h_kv * draw(st.integers(1, 4))
    b, t_q, t_k, d = draw(st.integers(1, 2)), draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.integers(1, 8))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    q = torch.randn(b, h_q, t_q, d, generator=g, dtype=torch.float64)
    k, v = (torch.randn(b, h_kv, t_k, d, generator=g, dtype=torch.float64) for _ in range(2))
    mask = (torch.rand(b, 1, 1, t_k, generator=g) > 0.3) if draw(st.booleans()) else None
    return q, k, v, mask, draw(st.booleans())


@given(gqa_case(), st.sampled_from(["math", "sdpa", "chunked", "auto"]))
def test_enable_gqa_equals_torch_in_every_backend(case, backend):
    q, k, v, mask, is_causal = case
    leaves = [t.float().requires_grad_() for t in (q, k, v)]
    ref_leaves = [t.float().requires_grad_() for t in (q, k, v)]
    got = scaled_dot_product_attention(*leaves, attn_mask=mask, is_causal=is_causal and mask is None,
                                          enable_gqa=True, backend=backend)
    want = F.scaled_dot_product_attention(*ref_leaves, attn_mask=mask, is_causal=is_causal and mask is None,
                                          enable_gqa=True)
    want = torch.nan_to_num(want)  # torch gives a fully masked row NaN on some paths; ours gives 0
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    grad = torch.randn_like(got)
    got.backward(grad)
    want.backward(grad)
    for a, b in zip(leaves, ref_leaves, strict=True):
        torch.testing.assert_close(a.grad, torch.nan_to_num(b.grad), atol=1e-4, rtol=0)


def test_enable_gqa_weights_are_per_query_head():
    q, k, v = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    _, w = scaled_dot_product_attention(q, k, v, enable_gqa=True, return_weights=True)
    assert w.shape == (1, 4, 3, 5)
    _, w1 = scaled_dot_product_attention(q[:, 1:2], k[:, :1], v[:, :1], return_weights=True)
    torch.testing.assert_close(w[:, 1:2], w1)  # query heads 0 and 1 share key/value head 0


def test_enable_gqa_bad_heads():
    with pytest.raises(ValueError, match=r"enable_gqa=True needs key and value with the same number of heads"):
        scaled_dot_product_attention(torch.randn(1, 4, 3, 8), torch.randn(1, 3, 5, 8), torch.randn(1, 3, 5, 8),
                                        enable_gqa=True)
    with pytest.raises(ValueError, match=r"same head dim|broadcast"):
        scaled_dot_product_attention(torch.randn(1, 4, 3, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8))


@pytest.mark.parametrize("backend", ["math", "sdpa", "chunked"])
@pytest.mark.parametrize("mask_kind", ["per_head_float", "rows_bool", "padding", "none"])
def test_enable_gqa_with_masks_of_every_shape_equals_torch(backend, mask_kind):
    """Without is_causal the math and chunked backends fold each group's query heads into rows of its key/value
    head (no copy of the keys); a mask must fold with them: per query head, per row, or one row for all."""
    from attnlab.functional import alibi_bias, sliding_window_mask

    g = torch.Generator().manual_seed(7)
    q = torch.randn(2, 6, 5, 8, generator=g, requires_grad=True)
    k, v = (torch.randn(2, 2, 9, 8, generator=g, requires_grad=True) for _ in range(2))
    mask = {"per_head_float": alibi_bias(6, 5, 9).masked_fill(~sliding_window_mask(5, 9, 4), float("-inf")),
            "rows_bool": sliding_window_mask(5, 9, 3), "padding": torch.tensor([[1] * 9, [0] * 3 + [1] * 6]).bool()
            [:, None, None, :], "none": None}[mask_kind]
    got = scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True, backend=backend)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    grads = torch.autograd.grad(got.square().sum(), (q, k, v))
    want_grads = torch.autograd.grad(want.square().sum(), (q, k, v))
    for a, b in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=0)
    if backend == "math":
        _, w = scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True, return_weights=True)
        _, w_rep = scaled_dot_product_attention(q, k.repeat_interleave(3, 1), v.repeat_interleave(3, 1),
                                                attn_mask=mask, return_weights=True)
        torch.testing.assert_close(w, w_rep, atol=1e-6, rtol=0)  # (B, Hq, Tq, Tk): per query head


def test_the_automatic_choice_compiles_without_a_warning(monkeypatch):
    """Under torch.compile, ``"auto"`` decides without its lru_cache, which dynamo warns about tracing through."""
    import warnings

    import torch._dynamo.utils as dynamo_utils

    monkeypatch.setattr(dynamo_utils, "warn_once_cache", set())  # a warning given earlier in the session counts too
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    compiled = torch.compile(lambda q, k, v: scaled_dot_product_attention(q, k, v, is_causal=True), backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = compiled(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), rtol=0, atol=1e-5)
