# %% [markdown]
# # 8. The NumPy twin: timings and FLOPs
#
# Nothing in attention needs a deep-learning framework: matrix products, an exponential, sums. `attnlab.numpy`
# rewrites the whole forward pass with NumPy alone (softmax, masks, scaled dot-product attention, multi-head
# attention, positional encoding, layer normalization, the whole encoder), with the torch version's argument names
# and mask conventions, and the tests hold every function equal to its torch counterpart to 1e-5. This notebook
# checks that first, then compares the speed of the implementations, and uses FLOPs to measure how far each is from
# the machine's limit.

# %%
# %matplotlib inline
import timeit

import numpy as np
import torch
from matplotlib.figure import Figure

from attnlab import functional as AF
from attnlab import numpy as anp
from attnlab.attention import MultiHeadAttention
from attnlab.bench.flops import attention_flops

torch.set_grad_enabled(False)  # forward passes only
np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## softmax
#
# Subtract each row's maximum first and `exp` cannot overflow; a row that is all $-\infty$ (a query that may look
# at nothing) gives all zeros, not NaN.

# %%
scores = np.array([[1.0, 2.0, 3.0],
                   [1000.0, 1001.0, 1002.0],
                   [-np.inf, -np.inf, -np.inf]], dtype=np.float32)
anp.softmax(scores)

# %% [markdown]
# ## Element by element against torch
#
# The same argument names and the same mask conventions (a boolean mask is `True` where a query may attend;
# `is_causal` is top-left aligned):

# %%
rng = np.random.default_rng(0)
q, k, v = rng.standard_normal((3, 2, 4, 16, 8), dtype=np.float32)  # each (B, H, T, D)
out_np, w_np = anp.scaled_dot_product_attention(q, k, v, is_causal=True, return_weights=True)
out_t, w_t = AF.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                                             is_causal=True, return_weights=True)
print(np.abs(out_np - out_t.numpy()).max(), np.abs(w_np - w_t.numpy()).max())

# %% [markdown]
# A torch module's weights become NumPy arrays through the one converter, `state_dict_to_arrays`, under the same
# names:

# %%
torch.manual_seed(0)
mha = MultiHeadAttention(64, 64, num_heads=4, is_causal=True).eval()
params = anp.state_dict_to_arrays(mha.state_dict())
print({name: a.shape for name, a in params.items()})
x = torch.randn(2, 10, 64)
out = anp.multi_head_attention(x.numpy(), params, num_heads=4, is_causal=True)
np.abs(out - mha(x).numpy()).max()

# %% [markdown]
# ## Counting the arithmetic
#
# One forward pass of multi-head self-attention, a multiply-add counted as 2 floating-point operations: the $QKV$
# projections $2 \cdot 3 \cdot B T d^2$, the scores $Q K^\top$ and the weighted sum $2 \cdot B h P d_h$ each, the
# output projection $2 \cdot B T d^2$. $P$ is the number of query-key pairs: $T^2$ without a mask; causal attention
# counts only the $T(T+1)/2$ allowed ones. The longer the sequence, the larger the share of attention itself
# (proportional to $T^2$):

# %%
for T in (256, 1024, 4096, 16384):
    f = attention_flops(1, T, 512, 8, is_causal=True)
    print(f"T = {T:6}: {f.total / 1e9:8.2f} GFLOP, attention part {(f.scores + f.weighted_sum) / f.total:5.1%}, "
          f"one (B, h, T, T) fp32 score matrix {8 * T * T * 4 / 2**20:8.0f} MiB")

# %% [markdown]
# ## Timing
#
# One causal multi-head attention, five implementations: torch `math` (explicit score matrices), attnlab's `chunked`
# (online softmax over blocks), torch's fused kernel `sdpa`, and NumPy's `math` and `chunked`. Each is warmed up
# once, then the median of 5 runs is taken. The figures depend on this machine (and on how busy it is right now), so
# nothing is asserted about them; `attnlab bench` measures properly and in full.

# %%
B, T, d, h = 1, 1024, 256, 4
torch.manual_seed(0)
x = torch.randn(B, T, d)
modules = {b: MultiHeadAttention(d, d, num_heads=h, is_causal=True, backend=b).eval()
           for b in ("math", "chunked", "sdpa")}
for m in modules.values():
    m.load_state_dict(modules["math"].state_dict())  # the same weights
params = anp.state_dict_to_arrays(modules["math"].state_dict())
runs = {
    "torch math": lambda: modules["math"](x).numpy(),
    "torch chunked": lambda: modules["chunked"](x).numpy(),
    "torch sdpa": lambda: modules["sdpa"](x).numpy(),
    "numpy math": lambda: anp.multi_head_attention(x.numpy(), params, num_heads=h, backend="math"),
    "numpy chunked": lambda: anp.multi_head_attention(x.numpy(), params, num_heads=h, backend="chunked"),
}
flops = attention_flops(B, T, d, h, is_causal=True)
reference = runs["torch math"]()
ms = {}
for name, run in runs.items():
    assert np.abs(run() - reference).max() < 1e-4  # the warm-up, which also checks the results agree
    ms[name] = 1e3 * float(np.median(timeit.repeat(run, number=1, repeat=5)))
    print(f"{name:>14}: {ms[name]:7.2f} ms, {flops.total / (ms[name] * 1e6):6.2f} GFLOP/s")

# %%
fig = Figure(figsize=(7, 3), layout="constrained")
ax = fig.add_subplot()
ax.barh(list(ms), list(ms.values()), color=["C0", "C0", "C0", "C1", "C1"])
ax.invert_yaxis()
ax.set_xlabel("median time per forward pass (ms), lower is better")
ax.set_title(f"causal multi-head attention, B={B}, T={T}, d={d}, h={h}")
fig

# %% [markdown]
# ## Exercise
#
# For **causal** self-attention with $B = 1$, $T = 1024$, $d = 512$, $h = 8$, count the FLOPs of attention itself
# (the scores $Q K^\top$ plus the weighted sum): a multiply-add counts 2, and only the query-key pairs a query may
# attend count. Assign the integer to `answer`.

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
pairs = 1024 * (1024 + 1) // 2   # causal: T(T+1)/2 pairs
head_dim = 512 // 8
answer = 2 * (2 * 1 * 8 * pairs * head_dim)  # scores and weighted sum, 2·B·h·P·d_h each

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
f = attention_flops(1, 1024, 512, 8, is_causal=True)
expected = f.scores + f.weighted_sum
assert isinstance(answer, int | np.integer), f"an integer expected, got {type(answer).__name__}"
assert answer == expected, f"{answer:,} != {expected:,}"
print(f"✓ {answer:,} FLOPs")
