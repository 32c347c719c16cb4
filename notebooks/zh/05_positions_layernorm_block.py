# %% [markdown]
# # 5. 位置编码（positional encoding）、层归一化（layer normalization）与 Transformer 块
#
# 对应 “Attention Is All You Need” 第 3.1、3.3、3.5 节和《从零构建大模型》第 4 章。
# 注意力本身不知道词的顺序；位置编码把“第几个”写进向量。层归一化让每个词元（token）的向量保持稳定的尺度；
# 前馈网络（feed-forward network）逐个词元做非线性变换；残差连接（residual connection）把每个子层的输入直接加到输出上。
# 四样东西合在一起，就是 Transformer 块。

# %%
# %matplotlib inline
import torch

from attnlab.attention import MultiHeadAttention
from attnlab.layers import (
    BlockSpec,
    FeedForward,
    LayerNorm,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    TransformerBlock,
    sinusoidal_table,
)
from attnlab.viz.pe_plot import pe_figure

torch.set_grad_enabled(False)  # 这里只做前向计算
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## 注意力看不见顺序
#
# 把输入的词元顺序打乱，不带因果掩码（mask）的自注意力（self-attention）的输出也只是跟着打乱，数值一个不变（置换等变）。
# 对它来说，“我爱你”和“你爱我”是同一袋词。

# %%
torch.manual_seed(0)
mha = MultiHeadAttention(8, 8, num_heads=2, is_causal=False)
x = torch.randn(1, 5, 8)                # (B, T, d_model)
perm = torch.tensor([4, 3, 2, 1, 0])    # 倒过来
assert torch.allclose(mha(x[:, perm]), mha(x)[:, perm], atol=1e-6)
(mha(x[:, perm]) - mha(x)[:, perm]).abs().max()

# %% [markdown]
# ## 正弦位置编码
#
# 原论文的做法：$PE(pos, 2i) = \sin(pos / 10000^{2i/d})$，$PE(pos, 2i+1) = \cos(pos / 10000^{2i/d})$。
# 低维振荡得快，高维振荡得慢，每个位置得到一个独一无二的模式。`SinusoidalPositionalEncoding` 把它加到输入上，
# 之后打乱顺序就会改变结果了。

# %%
pe = SinusoidalPositionalEncoding(d_model=8, context_length=16)
x_pos = pe(x)                           # x + PE[:T]
print((mha(pe(x[:, perm])) - mha(x_pos)[:, perm]).abs().max())  # 不再是 0：顺序有了意义
sinusoidal_table(4, 8)                  # (context_length, d_model)

# %% [markdown]
# `pe_figure` 画出整张表（位置 × 维度）和其中几维的曲线：

# %%
pe_figure(context_length=64, d_model=32, dims=[0, 1, 6, 16])

# %% [markdown]
# 正弦编码的一个性质：两个位置编码的点积只取决于它们的距离 $k$（下面两行完全相同），距离为 0 时最大，
# 随距离增大大体递减（它是几个余弦之和，所以并不严格单调）。模型因此容易学到相对位置。

# %%
table = sinusoidal_table(64, 32)
print([round(float(table[10] @ table[10 + k]), 3) for k in range(6)])
print([round(float(table[40] @ table[40 + k]), 3) for k in range(6)])

# %% [markdown]
# GPT 用的是可学习的位置嵌入（embedding）：每个位置一个向量，随模型一起训练。它不能外推到比
# `context_length` 更长的序列。

# %%
learned = LearnedPositionalEmbedding(d_model=8, context_length=16)
learned(x).shape

# %% [markdown]
# ## 层归一化
#
# 对每个词元的向量，在特征维度上减去均值、除以标准差（用有偏方差，即除以 $D$），再乘以可学习的 $\gamma$、加上 $\beta$：
#
# $$\operatorname{LN}(x) = \gamma \cdot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta$$
#
# attnlab 的 `LayerNorm` 默认调用 torch 的融合内核，`formula` 是逐项写出的公式；两者与 `torch.nn.LayerNorm` 一致。

# %%
ln = LayerNorm(8)
y = ln(x)
assert torch.allclose(y, ln.formula(x), atol=1e-6)
assert torch.allclose(y, torch.nn.LayerNorm(8)(x), atol=1e-6)
print(y.mean(dim=-1), y.var(dim=-1, unbiased=False))  # 每个词元：均值 0，方差 1

# %% [markdown]
# ## 前馈网络
#
# 两层线性变换，中间是 GELU：$\operatorname{FF}(x) = W_2\,\operatorname{GELU}(W_1 x + b_1) + b_2$，
# 通常 $d_{ff} = 4\,d_{model}$。
# 它对每个词元单独作用；词元之间的信息交换只发生在注意力里。

# %%
ff = FeedForward(d_model=8, d_ff=32)
assert torch.allclose(ff(x)[:, 2], ff(x[:, 2:3])[:, 0], atol=1e-6)  # 逐词元：单独算第 2 个词元也一样
ff(x).shape

# %% [markdown]
# ## Transformer 块：后置与前置层归一化
#
# 原始 Transformer 和 BERT 把层归一化放在残差相加**之后**（post-LN）：
# $x = \operatorname{LN}(x + \operatorname{Sublayer}(x))$；
# GPT-2 及之后的解码器放在子层**之前**（pre-LN）：$x = x + \operatorname{Sublayer}(\operatorname{LN}(x))$。
# 前置时残差这条路从嵌入一直通到输出，没有被归一化打断，深层网络更容易训练。

# %%
torch.manual_seed(0)
post = TransformerBlock(BlockSpec(d_model=8, num_heads=2, d_ff=32, norm="post"))
pre = TransformerBlock(BlockSpec(d_model=8, num_heads=2, d_ff=32, norm="pre"))
pre.load_state_dict(post.state_dict())  # 同一组权重，只是层归一化的位置不同

a = post.attn(x)                        # 后置：每个子层之后归一化
h = post.ln1(x + a)
manual_post = post.ln2(h + post.ff(h))
assert torch.allclose(post(x), manual_post, atol=1e-6)

a = pre.attn(pre.ln1(x))                # 前置：残差流不被归一化
h = x + a
manual_pre = h + pre.ff(pre.ln2(h))
assert torch.allclose(pre(x), manual_pre, atol=1e-6)
print(post(x).std(dim=-1), pre(x).std(dim=-1))  # 后置的输出已被归一化，前置的没有

# %% [markdown]
# 块的形状进出不变，`(B, T, d_model)` → `(B, T, d_model)`，所以可以一个接一个地堆叠；`return_weights=True`
# 还会给出这一块的注意力权重（attention weights）`(B, H, T, T)`。

# %%
out, w = pre(x, return_weights=True)
out.shape, w.shape

# %% [markdown]
# ## 练习
#
# 不用 `LayerNorm`，亲手对上面的 `x`（形状 `(1, 5, 8)`）做层归一化（$\gamma = 1$，$\beta = 0$，$\epsilon = 10^{-5}$），
# 结果赋给 `answer`。注意方差是有偏的（除以 $D$，不是 $D - 1$）。

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
mean = x.mean(dim=-1, keepdim=True)
var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
answer = (x - mean) / torch.sqrt(var + 1e-5)

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
expected = LayerNorm(8, eps=1e-5)(x)
assert torch.is_tensor(answer) and answer.shape == expected.shape, f"shape {tuple(expected.shape)} expected"
diff = (answer - expected).abs().max().item()
assert diff < 1e-5, f"max |answer - expected| = {diff:.2e}"
print(f"✓ max |answer - expected| = {diff:.1e}")
