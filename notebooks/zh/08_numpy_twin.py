# %% [markdown]
# # 8. NumPy 孪生实现：计时与浮点运算次数（FLOPs）
#
# 注意力里没有任何非深度学习框架不可的东西：矩阵乘法、指数、求和。`attnlab.numpy` 只用 NumPy 重写了整个前向计算
# （softmax、掩码（mask）、缩放点积注意力（scaled dot-product attention）、多头注意力（multi-head attention）、
# 位置编码（positional encoding）、层归一化（layer normalization）、整个编码器（encoder）），
# 参数名和掩码约定都与 torch 版相同，测试中逐个函数与 torch 版一致到 1e-5。
# 这一节先验证这一点，再比较各种实现的速度，并用浮点运算次数衡量它们离机器的极限有多远。

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

torch.set_grad_enabled(False)  # 这里只做前向计算
np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## softmax
#
# 先减去每行的最大值，`exp` 就不会溢出；一整行都是 $-\infty$（一个什么都不能看的查询（query））得到全 0，而不是 NaN。

# %%
scores = np.array([[1.0, 2.0, 3.0],
                   [1000.0, 1001.0, 1002.0],
                   [-np.inf, -np.inf, -np.inf]], dtype=np.float32)
anp.softmax(scores)

# %% [markdown]
# ## 与 torch 逐元素比较
#
# 同样的参数名、同样的掩码约定（布尔掩码 `True` 表示可以关注，`is_causal` 左上对齐）：

# %%
rng = np.random.default_rng(0)
q, k, v = rng.standard_normal((3, 2, 4, 16, 8), dtype=np.float32)  # 各为 (B, H, T, D)
out_np, w_np = anp.scaled_dot_product_attention(q, k, v, is_causal=True, return_weights=True)
out_t, w_t = AF.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                                             is_causal=True, return_weights=True)
print(np.abs(out_np - out_t.numpy()).max(), np.abs(w_np - w_t.numpy()).max())

# %% [markdown]
# 一个 torch 模块的权重通过唯一的转换函数 `state_dict_to_arrays` 变成 NumPy 数组，名字不变：

# %%
torch.manual_seed(0)
mha = MultiHeadAttention(64, 64, num_heads=4, is_causal=True).eval()
params = anp.state_dict_to_arrays(mha.state_dict())
print({name: a.shape for name, a in params.items()})
x = torch.randn(2, 10, 64)
out = anp.multi_head_attention(x.numpy(), params, num_heads=4, is_causal=True)
np.abs(out - mha(x).numpy()).max()

# %% [markdown]
# ## 计多少算
#
# 一次多头自注意力（self-attention）的前向计算，把一次乘加记作 2 次浮点运算：$QKV$ 投影 $2 \cdot 3 \cdot B T d^2$，
# 分数 $Q K^\top$ 和加权求和各 $2 \cdot B h P d_h$，输出投影 $2 \cdot B T d^2$。$P$ 是查询–键对的个数：
# 不带掩码时是 $T^2$；因果注意力（causal attention）只算允许的 $T(T+1)/2$ 对。
# 序列越长，注意力本身（与 $T^2$ 成正比）在总量中占得越多：

# %%
for T in (256, 1024, 4096, 16384):
    f = attention_flops(1, T, 512, 8, is_causal=True)
    print(f"T = {T:6}: {f.total / 1e9:8.2f} GFLOP, attention part {(f.scores + f.weighted_sum) / f.total:5.1%}, "
          f"one (B, h, T, T) fp32 score matrix {8 * T * T * 4 / 2**20:8.0f} MiB")

# %% [markdown]
# ## 计时
#
# 同一个因果多头注意力，五种实现：torch 的 `math`（显式的分数矩阵）、attnlab 的 `chunked`（在线 softmax，分块）、
# torch 的融合内核 `sdpa`，以及 NumPy 的 `math` 和 `chunked`。每种先预热一次，再取 5 次的中位数。
# 数字取决于这台机器（以及它此刻有多忙），这里不做断言；`attnlab bench` 会做完整、认真的测量。

# %%
B, T, d, h = 1, 1024, 256, 4
torch.manual_seed(0)
x = torch.randn(B, T, d)
modules = {b: MultiHeadAttention(d, d, num_heads=h, is_causal=True, backend=b).eval()
           for b in ("math", "chunked", "sdpa")}
for m in modules.values():
    m.load_state_dict(modules["math"].state_dict())  # 同一组权重
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
    assert np.abs(run() - reference).max() < 1e-4  # 预热，顺便确认结果相同
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
# ## 练习
#
# 对 $B = 1$、$T = 1024$、$d = 512$、$h = 8$ 的**因果**自注意力，算出注意力本身（分数 $Q K^\top$ 加上加权求和）
# 的浮点运算次数：一次乘加记 2 次，只数查询可以关注的那些查询–键对。把这个整数赋给 `answer`。

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
pairs = 1024 * (1024 + 1) // 2   # 因果：T(T+1)/2 对
head_dim = 512 // 8
answer = 2 * (2 * 1 * 8 * pairs * head_dim)  # 分数和加权求和，各 2·B·h·P·d_h

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
f = attention_flops(1, 1024, 512, 8, is_causal=True)
expected = f.scores + f.weighted_sum
assert isinstance(answer, int | np.integer), f"an integer expected, got {type(answer).__name__}"
assert answer == expected, f"{answer:,} != {expected:,}"
print(f"✓ {answer:,} FLOPs")
