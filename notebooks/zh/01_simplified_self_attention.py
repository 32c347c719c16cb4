# %% [markdown]
# # 1. 简化的自注意力（simplified self-attention）
#
# 学习路径的第一步，对应《从零构建大模型》（*Build a Large Language Model From Scratch*）第 3.3 节。
# 自注意力（self-attention）让序列里的每个词元（token）都把所有词元看一遍，按相关程度加权平均，
# 得到它自己的上下文向量（context vector）。这一版还没有任何可训练的参数：
#
# $$Z = \operatorname{softmax}(X X^\top)\,X$$
#
# 三步：注意力分数（attention scores）→ 注意力权重（attention weights）→ 上下文向量。

# %%
# %matplotlib inline
import torch

from attnlab.attention import SimpleSelfAttention
from attnlab.inspect import RandomModel, RandomModelConfig, capture
from attnlab.viz.heatmap import head_figure

torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# 书中的例句 “Your journey starts with one step”（你的旅程从一步开始）有 6 个词元，
# 每个词元用一个 3 维的嵌入（embedding）向量表示。矩阵 $X$ 的每一行就是一个词元：

# %%
tokens = ["Your", "journey", "starts", "with", "one", "step"]
inputs = torch.tensor([[0.43, 0.15, 0.89],   # Your
                       [0.55, 0.87, 0.66],   # journey
                       [0.57, 0.85, 0.64],   # starts
                       [0.22, 0.58, 0.33],   # with
                       [0.77, 0.25, 0.10],   # one
                       [0.05, 0.80, 0.55]])  # step
inputs.shape  # (T, d_in) = (6, 3)

# %% [markdown]
# ## 第一步：注意力分数
#
# 以第二个词元 “journey” 作为查询（query）。它对每个词元的注意力分数就是两个向量的点积：
# 方向越接近，点积越大。

# %%
query = inputs[1]
attn_scores_2 = inputs @ query  # (T,)：每个词元与 journey 的点积
attn_scores_2

# %% [markdown]
# ## 第二步：归一化为注意力权重
#
# softmax 把分数变成和为 1 的正数。直接写 $e^{x_j} / \sum_k e^{x_k}$ 在分数很大时会溢出；
# `torch.softmax` 先减去最大值再取指数，结果相同，却不会溢出。

# %%
naive = torch.exp(attn_scores_2) / torch.exp(attn_scores_2).sum()
attn_weights_2 = torch.softmax(attn_scores_2, dim=0)
assert torch.allclose(naive, attn_weights_2)
print(attn_weights_2, float(attn_weights_2.sum()))

# %% [markdown]
# ## 第三步：上下文向量
#
# “journey” 的上下文向量是所有输入向量按注意力权重的加权和 $z_2 = \sum_j a_{2j}\, x_j$。

# %%
context_vec_2 = attn_weights_2 @ inputs  # (d_in,)
context_vec_2

# %% [markdown]
# ## 一次算完所有词元
#
# 把每个词元都当作查询，三步就变成三次矩阵运算：分数矩阵 $X X^\top$ 的第 $i$ 行是词元 $i$ 对所有词元的分数，
# 按行做 softmax，再乘以 $X$。

# %%
attn_scores = inputs @ inputs.T                    # (T, T)：行是查询，列是被关注的词元
attn_weights = torch.softmax(attn_scores, dim=-1)  # 每一行的和为 1
all_context_vecs = attn_weights @ inputs           # (T, d_in)
assert torch.allclose(all_context_vecs[1], context_vec_2)
attn_weights.sum(dim=-1)

# %% [markdown]
# attnlab 的 `SimpleSelfAttention` 就是这三行；`return_weights=True` 同时返回注意力权重。
# 书中打印的 “journey” 的上下文向量是 `[0.4419, 0.6515, 0.5683]`：

# %%
context, weights = SimpleSelfAttention()(inputs, return_weights=True)
assert torch.allclose(context, all_context_vecs, atol=1e-6)
assert torch.allclose(context[1], torch.tensor([0.4419, 0.6515, 0.5683]), atol=1e-4)
context

# %% [markdown]
# ## 看一看权重
#
# `attnlab.inspect.capture` 记录一次前向计算里注意力做的一切，`attnlab.viz.heatmap.head_figure` 把权重画成热力图：
# 行是查询，列是被关注的词元，格子里写着权重。

# %%
cap = capture(SimpleSelfAttention(), inputs, tokens=tokens, name="SimpleSelfAttention")
head_figure(cap)

# %% [markdown]
# 换一个中文句子。`RandomModel` 给每个词一个固定的随机向量（再加上位置），然后用同一个机制计算注意力；
# 热力图里的中文词元用 attnlab 自带的 Noto Sans CJK 字体画出。
#
# 注意对角线：一个向量和自己的点积往往最大，所以每个词元主要在看它自己。
# 这正是下一节要引入可训练的查询、键和值的原因。

# %%
cap_zh = capture(RandomModel(RandomModelConfig("simple")), "我 爱 学习 AI")
head_figure(cap_zh)

# %% [markdown]
# ## 练习
#
# 按上面的三步，亲手计算最后一个词元 “step” 的上下文向量（形状 `(3,)`），赋给 `answer`。
#
# 约定（每个 notebook 都一样）：下面标着 `solution` 的单元是参考答案，输入默认折叠；
# 可以先删掉它写自己的答案。最后一个单元标着 `check`，是隐藏的检查：运行它，看到 ✓ 就对了。

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
scores_6 = inputs @ inputs[5]
answer = torch.softmax(scores_6, dim=0) @ inputs

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
expected = SimpleSelfAttention()(inputs)[5]
assert torch.is_tensor(answer) and answer.shape == expected.shape, f"shape {tuple(expected.shape)} expected"
diff = (answer - expected).abs().max().item()
assert diff < 1e-6, f"max |answer - expected| = {diff:.2e}"
print(f"✓ max |answer - expected| = {diff:.1e}")
