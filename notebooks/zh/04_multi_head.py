# %% [markdown]
# # 4. 多头注意力（multi-head attention）：两种写法
#
# 对应《从零构建大模型》第 3.6 节和 “Attention Is All You Need” 第 3.2.2 节。一个注意力头只能学到一种
# “关注方式”；多头注意力让几个头各自用自己的投影看同一个序列，再把它们的上下文向量（context vectors）拼起来：
#
# $$\operatorname{MultiHead}(X) = \operatorname{Concat}(\text{head}_1, \dots, \text{head}_h)\, W_o$$
#
# 书中有两种写法：把几个因果注意力（causal attention）模块叠在一起的包装器，以及真正的模型使用的
# “权重拆分”写法。下面分别实现，再证明它们相等。

# %%
# %matplotlib inline
import torch

from attnlab.attention import MultiHeadAttention, MultiHeadAttentionWrapper
from attnlab.inspect import RandomModel, RandomModelConfig, capture
from attnlab.viz.heatmap import heads_figure
from attnlab.viz.viewer import show

torch.set_grad_enabled(False)  # 这里只做前向计算
torch.set_printoptions(precision=4, sci_mode=False)
inputs = torch.tensor([[0.43, 0.15, 0.89],   # Your
                       [0.55, 0.87, 0.66],   # journey
                       [0.57, 0.85, 0.64],   # starts
                       [0.22, 0.58, 0.33],   # with
                       [0.77, 0.25, 0.10],   # one
                       [0.05, 0.80, 0.55]])  # step
batch = torch.stack([inputs, inputs])  # (B, T, d_in) = (2, 6, 3)

# %% [markdown]
# ## 写法一：包装器
#
# `MultiHeadAttentionWrapper` 持有 `num_heads` 个独立的 `CausalAttention`，逐个运行，把输出沿最后一维拼接。
# 每个头输出 `d_out = 2` 维，两个头拼成 4 维。容易读懂，但每个头都要做一次小的矩阵乘法。

# %%
torch.manual_seed(123)
wrapper = MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)  # 书中的调用：d_in, d_out, context_length, dropout
out_wrapper = wrapper(batch)
out_wrapper.shape  # (B, T, num_heads · d_out) = (2, 6, 4)

# %% [markdown]
# ## 写法二：权重拆分
#
# `MultiHeadAttention` 只做**一次**大投影（`d_out = 4`），再用 `view` 和 `transpose` 把结果拆成
# `num_heads` 个 `head_dim = d_out / num_heads` 维的头。所有的头在一个批量矩阵乘法里一起算，最后用 `out_proj`
# 把各头的结果混合起来。下面一步一步看形状的变化：

# %%
mha = MultiHeadAttention(3, 4, 6, 0.0, num_heads=2)  # d_in, d_out, context_length, dropout, num_heads
B, T, _ = batch.shape
H, hd = mha.num_heads, mha.head_dim
q = mha.W_query(batch)                    # (B, T, d_out)
q = q.view(B, T, H, hd).transpose(1, 2)   # (B, H, T, head_dim)：每个头一份
k = mha.W_key(batch).view(B, T, H, hd).transpose(1, 2)
v = mha.W_value(batch).view(B, T, H, hd).transpose(1, 2)
scores = q @ k.transpose(2, 3) / hd**0.5  # (B, H, T, T)：所有的头一次算完
mask = torch.ones(T, T, dtype=torch.bool).tril()
weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
context = (weights @ v).transpose(1, 2).reshape(B, T, H * hd)  # 把各头拼回 (B, T, d_out)
out_by_hand = mha.out_proj(context)
assert torch.allclose(out_by_hand, mha(batch), atol=1e-6)
print(q.shape, scores.shape, out_by_hand.shape)

# %% [markdown]
# ## 两种写法是同一个东西
#
# 把包装器里每个头的 $W_q, W_k, W_v$ 上下叠起来拷进 `MultiHeadAttention`，再把 `out_proj` 设成单位矩阵，
# 两者的输出和注意力权重（attention weights）完全一致：拆分只是把几次小乘法合并成一次大乘法。

# %%
with torch.no_grad():
    for name in ("W_query", "W_key", "W_value"):
        getattr(mha, name).weight.copy_(torch.cat([getattr(head, name).weight for head in wrapper.heads]))
    mha.out_proj.weight.copy_(torch.eye(4))
    mha.out_proj.bias.zero_()
out_mha, weights_mha = mha(batch, return_weights=True)
out_w, weights_w = wrapper(batch, return_weights=True)
assert torch.allclose(out_mha, out_w, atol=1e-6) and torch.allclose(weights_mha, weights_w, atol=1e-6)
(out_mha - out_w).abs().max()

# %% [markdown]
# ## 每个头看到的不一样
#
# 一个 4 头的随机模型读中文句子。`heads_figure` 把同一层的所有头画在一起：每个头都是因果的（右上三角为 0），
# 但各自的模式不同。

# %%
cap = capture(RandomModel(RandomModelConfig("multihead", num_heads=4)), "我 爱 学习 人工 智能")
heads_figure(cap)

# %% [markdown]
# `attnlab.viz.viewer.show` 在 notebook 里显示一个可交互的查看器（一个离线的 HTML 页面）：
# 可以切换头，把鼠标放在词元（token）上看它的连线。

# %%
show(cap, height=520)

# %% [markdown]
# ## 练习
#
# 对上面的 `mha` 和 `batch`，不调用 `mha` 本身，亲手算出第一个句子（`batch[0]`）的**第 1 个头**（从 0 数起）的
# 注意力权重（形状 `(6, 6)`），赋给 `answer`。提示：投影、拆分、缩放、因果掩码（causal mask）、softmax。

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
q1 = mha.W_query(batch[0]).view(6, 2, 2)[:, 1]  # (T, head_dim)：第 1 个头的查询
k1 = mha.W_key(batch[0]).view(6, 2, 2)[:, 1]
s1 = q1 @ k1.T / 2**0.5
answer = torch.softmax(s1.masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), float("-inf")), dim=-1)

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
expected = mha(batch, return_weights=True)[1][0, 1]
assert torch.is_tensor(answer) and answer.shape == expected.shape, f"shape {tuple(expected.shape)} expected"
diff = (answer - expected).abs().max().item()
assert diff < 1e-6, f"max |answer - expected| = {diff:.2e}"
print(f"✓ max |answer - expected| = {diff:.1e}")
