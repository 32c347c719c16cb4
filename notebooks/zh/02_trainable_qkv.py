# %% [markdown]
# # 2. 可训练的权重：缩放点积注意力（scaled dot-product attention）
#
# 对应《从零构建大模型》第 3.4 节和 “Attention Is All You Need” 的公式 (1)。
# 上一节的自注意力（self-attention）直接拿嵌入（embedding）做点积；这一节给模型三个可训练的矩阵，
# 把每个词元（token）的输入 $x$ 分别投影成查询（query）、键（key）和值（value）：
#
# $$Q = X W_q,\quad K = X W_k,\quad V = X W_v$$
#
# $$Z = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V$$
#
# 查询问“我在找什么”，键答“我有什么”，值是真正被取走的内容。

# %%
# %matplotlib inline
import torch

from attnlab.attention import SelfAttentionV1, SelfAttentionV2
from attnlab.inspect import RandomModel, RandomModelConfig, capture, explain
from attnlab.viz.heatmap import head_figure

torch.set_grad_enabled(False)  # 这里只做前向计算，输出里不显示 grad_fn
torch.set_printoptions(precision=4, sci_mode=False)
inputs = torch.tensor([[0.43, 0.15, 0.89],   # Your
                       [0.55, 0.87, 0.66],   # journey
                       [0.57, 0.85, 0.64],   # starts
                       [0.22, 0.58, 0.33],   # with
                       [0.77, 0.25, 0.10],   # one
                       [0.05, 0.80, 0.55]])  # step

# %% [markdown]
# ## 三个投影
#
# `SelfAttentionV1` 和书中一样，用 `nn.Parameter` 保存 $W_q, W_k, W_v$（形状 `(d_in, d_out)`，初值在 [0, 1) 均匀分布）。
# 随机种子取 123，数字就和书中打印的一致。`project` 返回 $Q, K, V$。

# %%
torch.manual_seed(123)
sa_v1 = SelfAttentionV1(d_in=3, d_out=2)
queries, keys, values = sa_v1.project(inputs)  # 各为 (T, d_out) = (6, 2)
queries

# %% [markdown]
# ## 分数、缩放、softmax、加权和
#
# 注意力分数（attention scores）是查询与键的点积 $Q K^\top$；除以 $\sqrt{d_k}$ 之后再做 softmax，
# 得到注意力权重（attention weights）；最后用权重对值加权求和，得到上下文向量（context vectors）。

# %%
d_k = keys.shape[-1]
attn_scores = queries @ keys.T                               # (T, T)
attn_weights = torch.softmax(attn_scores / d_k**0.5, dim=-1)
context_vecs = attn_weights @ values                         # (T, d_out)
assert torch.allclose(context_vecs, sa_v1(inputs), atol=1e-6)
context_vecs[0]  # 书中的数字：[0.2996, 0.8053]

# %% [markdown]
# ## 为什么除以 $\sqrt{d_k}$
#
# 两个 $d$ 维随机向量的点积，方差与 $d$ 成正比。维度越高，分数差距越大，softmax 就越接近 one-hot，
# 梯度几乎消失。除以 $\sqrt{d_k}$ 后分数的标准差回到 1 左右，softmax 保持“柔和”。
# 下面对 8 个随机键计算分数，看最大的那个权重：

# %%
g = torch.Generator().manual_seed(0)
for d in (4, 64, 1024):
    q, k = torch.randn(d, generator=g), torch.randn(8, d, generator=g)
    s = k @ q
    print(f"d = {d:4}: std(q·k) = {s.std():6.2f}, max weight unscaled {torch.softmax(s, 0).max():.3f}, "
          f"scaled {torch.softmax(s / d**0.5, 0).max():.3f}")

# %% [markdown]
# ## `nn.Linear` 版本
#
# `SelfAttentionV2` 用 `nn.Linear` 做投影（初始化更好，还可以加偏置）。`nn.Linear` 把权重存成 `(d_out, d_in)`，
# 计算的是 $x W^\top$，所以把 V1 的矩阵转置后拷进去，两者输出完全相同：

# %%
sa_v2 = SelfAttentionV2(d_in=3, d_out=2)
with torch.no_grad():
    sa_v2.W_query.weight.copy_(sa_v1.W_query.T)
    sa_v2.W_key.weight.copy_(sa_v1.W_key.T)
    sa_v2.W_value.weight.copy_(sa_v1.W_value.T)
assert torch.allclose(sa_v2(inputs), sa_v1(inputs), atol=1e-6)
sa_v2(inputs)

# %% [markdown]
# ## 逐步看一个查询：`explain`
#
# `capture` 记录模型自己的 $Q, K, V$ 和权重；`explain` 对一个查询词元把每一步的数字都算出来，
# 并与模型前向计算的结果比对（`max_abs_diff_weights`）。这里用 `RandomModel` 的 `scaled` 机制读中文句子：

# %%
cap = capture(RandomModel(RandomModelConfig("scaled")), "我 爱 学习 AI")
e = explain(cap, "爱")
print(f"query {e.query_token!r}: q = {e.query.numpy().round(4)}, d_k = {e.keys.shape[-1]}")
for j, token in enumerate(e.tokens):
    print(f"  {token:>4}  q·k = {e.raw_scores[j]:8.4f}   ÷√d_k = {e.scaled_scores[j]:8.4f}   "
          f"weight = {e.weights[j]:.4f}")
print("context =", e.context.numpy().round(4), f"  (max |Δ| vs the model: {e.max_abs_diff_weights:.1e})")

# %%
head_figure(cap)

# %% [markdown]
# 和上一节的热力图比一比：有了 $W_q$ 和 $W_k$，一个词元不再只盯着自己；它关注谁，由训练来决定。

# %% [markdown]
# ## 练习
#
# 用 `cap.queries[0]`（形状 `(H, T, d_k)`，这里 $H = 1$）和 `cap.keys[0]`，亲手计算查询 “学习”（第 2 个位置，从 0 数起）
# 对所有词元的注意力权重（形状 `(4,)`），赋给 `answer`。别忘了缩放。

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
q = cap.queries[0][0, 2]  # (d_k,)
K = cap.keys[0][0]        # (T, d_k)
answer = torch.softmax(K @ q / K.shape[-1] ** 0.5, dim=0)

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
expected = cap.attentions[0][0, 2]
assert torch.is_tensor(answer) and answer.shape == expected.shape, f"shape {tuple(expected.shape)} expected"
diff = (answer - expected).abs().max().item()
assert diff < 1e-6, f"max |answer - expected| = {diff:.2e}"
print(f"✓ max |answer - expected| = {diff:.1e}")
