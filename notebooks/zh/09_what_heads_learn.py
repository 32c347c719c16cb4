# %% [markdown]
# # 9. 注意力头学到了什么
#
# 前面几个笔记本的热力图画出了每一个注意力权重（attention weight），可是一张权重图并不能告诉我们一个头是
# *做什么用的*。这个笔记本跑三个回答了这个问题的实验，规模小到在笔记本电脑上就能跑：
#
# 1. **归纳头**（induction head，Olsson 等人，2022）：两层的模型学会把 `… A B … A` 接成 `B`，而做这件事的头在训练中
#    是突然出现的；一层的模型永远形成不了。
# 2. **BERT 各个头的分工**（Clark 等人，2019）：在几百个句子上测量预训练 BERT 的每个头在看什么。
# 3. **注意力 rollout**（Abnar 与 Zuidema，2020）：追踪信息穿过每一层，而不只是一层。
#
# 还有一个贯穿始终的工具：**头掩码（head mask）**，它把一个头的输出去掉，看看这个头值多少（Michel 等人，2019）；
# 以及它的后继：**修补**（patching），找出哪个头导致了预测，经由它的哪个输入（Wang 等人，2022；Elhage 等人，2021）。

# %%
# %matplotlib inline
import torch

from attnlab.data.sentences import shakespeare_sentences
from attnlab.heads import (
    attention_flow,
    attribute_heads,
    baselines,
    patch_heads,
    path_patch,
    recovered,
    rollout,
)
from attnlab.heads.induction import InductionConfig, prefix_matching_scores, results, train_induction
from attnlab.heads.induction_circuit import induction_pair, repeat_metric
from attnlab.heads.repeated_tokens import repeated_halves
from attnlab.heads.roles import head_roles
from attnlab.inspect import capture
from attnlab.pretrained import load_bert
from attnlab.viz.induction_figures import induction_head_figure, induction_training_figure
from attnlab.viz.patching_figures import head_grid_figure, path_grid_figure
from attnlab.viz.roles_figures import special_tokens_figure
from attnlab.viz.rollout_figure import rollout_figure

torch.set_printoptions(precision=3, sci_mode=False)

# %% [markdown]
# ## 归纳头
#
# 数据：随机的词元（token），其中时不时有一段词元在后面再出现一次。随机词元是没法预测的，只有在重复的片段里例外：
# 见过 `A B` 之后，下一个 `A` 后面跟的就是 `B`。两个模型都是纯注意力的 Transformer（没有前馈层），一个一层、一个
# 两层，用同样的数据、步数和种子训练。实验每 50 步测量一次每个头的**前缀匹配分数**：在后半段重复前半段的序列上，
# 后半段的一个词元放在“它上一次出现的位置的下一个词元”上的注意力权重。得分接近 1 的头就是归纳头。
#
# （这里训练 600 步，大约一分钟；`attnlab heads induction` 训练 800 步。）

# %%
config = InductionConfig(steps=600)
runs = train_induction(config)
result = results(config, runs)
for name, model in result["models"].items():
    best = max(max(row) for row in model["prefix_matching"])
    print(f"{name}: best prefix-matching score {best:.2f}, in-context learning score {model['icl_score']:+.2f}, "
          f"phase change at step {model['phase_change_step']}")

# %% [markdown]
# 训练曲线：两层模型在重复的后半段上的损失，恰好在它的某个头开始做前缀匹配的那一步骤降；与此同时，它的上下文学习
# 分数（上下文靠后处的损失减去靠前处的损失）也下降了。一层模型的分数一直贴着底。

# %%
induction_training_figure(result)

# %% [markdown]
# 它得分最高的头，画在一个后半段重复前半段的序列上：紧挨在“上一次出现”那条对角线右边的亮条纹，就是这个头在看
# 当前词元上一次出现时*后面*跟着的那个词元。

# %%
two = runs["2-layer"]
layer, head = two.induction_head()
tokens = repeated_halves(1, config.half, config.vocab_size, torch.Generator().manual_seed(1))[0]
cap = capture(two.model, tokens, tokens=[str(t) for t in tokens.tolist()])
induction_head_figure(cap.weights(layer, head), cap.tokens, layer, head,
                      result["models"]["2-layer"]["prefix_matching"][layer][head])

# %% [markdown]
# ## 去掉一个头：头掩码
#
# 每个注意力模块都接受 `head_mask`：每个头一个数，在各个头的输出被 `out_proj` 混合之前乘到这个头的输出上；0 就是
# 去掉这个头。模型形成了不止一个归纳头，所以只去掉得分最高的那个代价很小：其他的会顶上。去掉所有得分超过 0.5 的头，
# 或者去掉第 0 层（它的头告诉每个位置前一个词元是什么，也就是归纳头要查的东西），重复的部分就读不出来了：

# %%
seq = repeated_halves(64, config.half, config.vocab_size, torch.Generator().manual_seed(2))
inputs, targets = seq[:, :-1], seq[:, 1:].clone()
targets[:, : config.half - 1] = -100  # 只算重复的后半段


def repeat_loss(head_mask=None):
    with torch.no_grad():
        return float(two.model(inputs, targets=targets, head_mask=head_mask).loss)


scores = torch.tensor(result["models"]["2-layer"]["prefix_matching"])  # (layers, heads)
masks = {"nothing": torch.ones_like(scores), "the best induction head": torch.ones_like(scores),
         "every head scoring over 0.5": (scores <= 0.5).float(), "all of layer 0": torch.ones_like(scores)}
masks["the best induction head"][layer, head] = 0.0
masks["all of layer 0"][0] = 0.0
for removed, mask in masks.items():
    print(f"removed {removed:<28} loss on the repeated half {repeat_loss(mask):.3f}")

# %% [markdown]
# ## 哪些头导致了预测：修补
#
# 一个*看起来*像归纳头的头，不一定就是做出预测的那个头。**激活修补**（activation patching）用干预来查明：在干净的
# 输入（重复的两半）和损坏的输入（同样的后半段，前半段重抽，于是没有任何重复）上各跑一次模型，再在损坏的输入上跑
# 一次，其中一个头的输出取自干净运行。度量恢复回来的份额，就是这个头的功劳。**归因修补**（attribution patching）
# 用一次前向和一次反向同时估计每个头的份额（一阶估计；当一个头通过把注意力从一个键移到另一个键起作用时，它会失效）。

# %%
clean, corrupt = induction_pair(config)  # 重复的两半；前半段重抽之后的同样后半段
metric = repeat_metric(clean, config.half)  # 重复让模型能预测的 15 个后继词元的平均对数概率
top, bottom = baselines(two.model, clean, corrupt, metric)
patched = recovered(patch_heads(two.model, clean, corrupt, metric), top, bottom)
estimate = recovered(attribute_heads(two.model, clean, corrupt, metric) + bottom, top, bottom)
print(f"clean {top:.3f}, corrupted {bottom:.3f}")
print("activation patching\n", patched)
print("attribution patching\n", estimate)
head_grid_figure([("activation patching", patched.tolist()), ("attribution patching", estimate.tolist())],
                 "share of the repeat restored by one head", "share restored")

# %% [markdown]
# **路径修补**（path patching）问的是经由哪个输入。把重抽运行里第 0 层的头放进重复的运行，只让它经由第 1 层某个头的
# 查询（query）、键（key）或值（value）到达输出（其余每个注意力输出都固定在重复运行的值上）。“前一个词元”头经由归纳头的
# **键**喂给它们：这就是 Elhage 等人（2021）描述的 K-组合（K-composition）；经由查询和值则什么也没损失。

# %%
paths = {head: {site: recovered(path_patch(two.model, corrupt, clean, metric, (0, head), site=site), bottom, top)
                [1:].tolist() for site in ("query", "key", "value")} for head in range(config.num_heads)}
lost = {site: max(max(paths[h][site][0]) for h in paths) for site in ("query", "key", "value")}
print("the most lost through one layer-1 head's", {site: round(v, 2) for site, v in lost.items()})
path_grid_figure(paths, "share of the repeat's advantage lost through one path")

# %% [markdown]
# ## BERT 的头在看什么
#
# Clark 等人对 BERT-base 的每个头测量了：它有多少注意力给了 `[CLS]`、给了 `[SEP]`、给了标点、给了前一个和后一个
# 词元，以及它的注意力有多分散（熵）。`head_roles` 对 all-MiniLM-L6-v2（6 层 × 12 个头）做同样的测量，用的是
# 《哈姆雷特》里的句子，在所有查询（query）词元上汇总。

# %%
bert = load_bert()
roles = head_roles(bert, shakespeare_sentences(100))
for layer, heads in enumerate(roles["layers"]):
    means = {key: sum(h[key] for h in heads) / len(heads) for key in ("cls", "sep", "punct", "prev", "entropy")}
    print(f"layer {layer}: " + ", ".join(f"{k} {v:.2f}" for k, v in means.items()))

# %% [markdown]
# BERT-base 的中间几层把一半以上的注意力给了 `[SEP]`；MiniLM 则不同，它的头把大部分注意力给了 `[CLS]`，几乎不给
# `[SEP]`。两者都有看前一个词元的头（第 0 层第 2 个头几乎把全部权重都放在那里）。docs/zh/heads.md 逐条比较了两者。

# %%
special_tokens_figure(roles)

# %% [markdown]
# ## 注意力 rollout
#
# 一层的注意力说的是一个词元怎样混合下一层的向量；可是经过六层，这些混合又被再混合，
# 而残差连接（residual connection）还把每个向量原样带了过去。rollout 把各层按头平均的注意力乘起来，
# 每层都和单位矩阵（残差通路）各占一半。
# 注意力 flow 则换一个问法：在各层组成的图上，从顶层的一个词元到一个输入词元，最多能流过多少（一个最大流问题）。

# %%
cap = capture(bert, "The cat sat on the mat because it was tired.", tokenizer=bert.tokenizer)
rolled = rollout(cap.attentions)
# [CLS] 的信息从哪里来
print([(t, round(w, 3)) for t, w in zip(cap.tokens, rolled[0].tolist(), strict=True)])
flow = attention_flow(cap.attentions)
rollout_figure(cap.tokens, cap.attentions[-1].mean(dim=0), rolled, flow, layer=cap.num_layers - 1)

# %% [markdown]
# ## 练习
#
# `weights` 是两层模型在一个 `2 · half` 个词元、后半段重复前半段的序列上，第 1 层的注意力权重 `(H, T, T)`。
# 请手算每个头的前缀匹配分数（形状 `(H,)`）：对后半段的每个查询 `i`，取它放在“词元 `i` 上一次出现的位置的下一个
# 词元”上的权重，再对这些查询求平均。把结果赋给 `answer`。

# %%
half = config.half
sequence = repeated_halves(1, half, config.vocab_size, torch.Generator().manual_seed(3))
with torch.no_grad():
    weights = two.model(sequence, return_weights=True).attentions[1][0]
weights.shape

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
queries = torch.arange(half, 2 * half)
answer = weights[:, queries, queries - half + 1].mean(dim=-1)

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
assert answer.shape == (config.num_heads,)
assert torch.allclose(answer, prefix_matching_scores([weights[None]], half)[0], atol=1e-6)
print("✓ prefix-matching scores:", [round(float(s), 3) for s in answer])
