# %% [markdown]
# # 3. 因果注意力（causal attention）：掩码（mask）与暂退法（dropout）
#
# 对应《从零构建大模型》第 3.5 节。语言模型逐个预测下一个词元（token），所以位置 $i$ 的词元只能看位置
# $0..i$，不能偷看后面的词。做法是在 softmax 之前，用掩码把对角线以上的注意力分数（attention scores）
# 设成 $-\infty$。训练时再用暂退法随机丢掉一部分注意力权重（attention weights），减少过拟合。

# %%
# %matplotlib inline
import torch

from attnlab.attention import CausalAttention
from attnlab.functional import causal_mask
from attnlab.inspect import RandomModel, RandomModelConfig, capture
from attnlab.viz.heatmap import head_figure

torch.set_grad_enabled(False)  # 这里只做前向计算，输出里不显示 grad_fn
torch.set_printoptions(precision=4, sci_mode=False)
inputs = torch.tensor([[0.43, 0.15, 0.89],   # Your
                       [0.55, 0.87, 0.66],   # journey
                       [0.57, 0.85, 0.64],   # starts
                       [0.22, 0.58, 0.33],   # with
                       [0.77, 0.25, 0.10],   # one
                       [0.05, 0.80, 0.55]])  # step
torch.manual_seed(123)
ca = CausalAttention(d_in=3, d_out=2, context_length=6, dropout=0.0)
queries, keys, values = ca.project(inputs)
scores = queries @ keys.T / keys.shape[-1] ** 0.5  # 缩放后的分数，还没有掩码

# %% [markdown]
# ## 因果掩码
#
# attnlab 和 PyTorch 的约定一样：布尔掩码里 `True` 表示“可以关注”。`causal_mask(T)` 是一个下三角矩阵：

# %%
mask = causal_mask(6)
mask.int()

# %% [markdown]
# ## 两种做法，结果相同
#
# 书中先演示了一种直观的做法：先 softmax，再把未来位置的权重清零，最后每行重新归一化。
# 更好的做法是在 softmax **之前**把未来位置的分数设为 $-\infty$：$e^{-\infty} = 0$，
# 而且 softmax 的分母只累加允许的位置，一步完成。

# %%
w = torch.softmax(scores, dim=-1)
w_zeroed = w * mask                                       # 未来位置清零
weights_renorm = w_zeroed / w_zeroed.sum(dim=-1, keepdim=True)

masked_scores = scores.masked_fill(~mask, float("-inf"))  # 未来位置 -> -inf
weights_causal = torch.softmax(masked_scores, dim=-1)
assert torch.allclose(weights_renorm, weights_causal, atol=1e-6)

_, weights_module = ca(inputs, return_weights=True)       # CausalAttention 自己算的
assert torch.allclose(weights_module, weights_causal, atol=1e-6)
weights_causal

# %% [markdown]
# ## 暂退法
#
# 训练时，暂退法以概率 $p$ 把每个权重置零，并把留下的乘以 $1/(1-p)$，这样输出的期望不变。
# 推理（`eval()`）时它什么也不做。

# %%
torch.manual_seed(123)
dropout = torch.nn.Dropout(0.5)
dropout(torch.ones(6, 6))  # 约一半是 0，其余是 1 / (1 - 0.5) = 2

# %%
ca_drop = CausalAttention(d_in=3, d_out=2, context_length=6, dropout=0.5)
ca_drop.load_state_dict(ca.state_dict())
torch.manual_seed(123)
_, w_train = ca_drop.train()(inputs, return_weights=True)  # 训练模式：随机丢弃
_, w_eval = ca_drop.eval()(inputs, return_weights=True)    # 推理模式：没有暂退
assert torch.allclose(w_eval, weights_causal, atol=1e-6)
w_train

# %% [markdown]
# ## 填充（padding）也是掩码
#
# 一个批次里的句子长短不一，短的要在末尾补上填充位。`attention_mask` 的形状是 `(B, T)`，1 表示真实词元，
# 0 表示填充；被填充的位置作为键时得到的权重恰好为 0。下面第二个句子只有前 4 个词元是真的：

# %%
batch = torch.stack([inputs, inputs])  # (B, T, d_in) = (2, 6, 3)
attention_mask = torch.tensor([[1, 1, 1, 1, 1, 1],
                               [1, 1, 1, 1, 0, 0]])
_, w_pad = ca(batch, attention_mask=attention_mask, return_weights=True)
w_pad[1]

# %% [markdown]
# ## 中文句子上的因果注意力
#
# 热力图的右上三角全是 0：没有一个词元看到了它后面的词。

# %%
cap = capture(RandomModel(RandomModelConfig("causal")), "我 爱 学习 人工 智能")
head_figure(cap)

# %% [markdown]
# ## 练习
#
# 把两种掩码合在一起：对批次里的第二个句子（最后两个位置是填充），用上面的 `scores`、`mask` 和
# `attention_mask[1]` 亲手算出注意力权重（形状 `(6, 6)`），赋给 `answer`。
# 一个键必须同时被因果掩码和填充掩码允许（两个布尔掩码取“与”）。

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
allowed = mask & attention_mask[1].bool()  # (T, T) & (T,)：广播到每一行
answer = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
expected = ca(batch, attention_mask=attention_mask, return_weights=True)[1][1]
assert torch.is_tensor(answer) and answer.shape == expected.shape, f"shape {tuple(expected.shape)} expected"
diff = (answer - expected).abs().max().item()
assert diff < 1e-6, f"max |answer - expected| = {diff:.2e}"
print(f"✓ max |answer - expected| = {diff:.1e}")
