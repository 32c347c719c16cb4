# %% [markdown]
# # 11. 实时的注意力：笔记本里的探索器
#
# `attnlab explore` 启动一个页面，输入文字时每一层、每个头都随之更新。同一个页面也能在笔记本单元里运行：
# `attnlab.explore.show(model, text)` 返回一个小部件（anywidget），它的脚本在单元里运行，向内核要数字，而这些数字
# 都来自模型自己的前向计算。在它的文本框里打字、关掉一个头、逐步演算一个头：画出来的每个数都是模型算出来的。

# %%
# %matplotlib inline
import torch

from attnlab.explore import show
from attnlab.inspect import capture
from attnlab.pretrained import load_bert
from attnlab.viz.heatmap import head_figure

torch.set_grad_enabled(False)  # 只做前向计算

# %% [markdown]
# ## 小部件
#
# all-MiniLM-L6-v2（随 attnlab 安装的编码器（encoder））读一句话。在 JupyterLab 里，下面这个单元显示探索器：
# 一次看全部 6 × 12 个头、单个头的矩阵、逐步演算一个头，以及语言切换（English / 中文）。

# %%
bert = load_bert()
sentence = "The cat sat on the mat because it was tired."
widget = show(bert, sentence)
widget

# %% [markdown]
# ## 同样的数，在 Python 里
#
# `widget.ask` 发出页面发的同一个请求（`docs/explore.md` 里的接口），返回它的回答。这里是每一层、每个头的
# 注意力权重（attention weight）：与模型在 `return_weights=True` 时返回的相等。

# %%
reading = widget.ask("forward", {"text": sentence})
shown = torch.tensor(reading["attentions"])               # (层, 头, T, T)
batch = bert.tokenize(sentence)
own = torch.stack([a[0] for a in bert(batch.input_ids, return_weights=True).attentions])
print(reading["tokens"])
print(f"max |page - model| = {(shown - own).abs().max():.1e}")

# %% [markdown]
# 页面上的单头视图，画成图：第 0 层第 5 个头看的是前一个词元（token）。

# %%
head_figure(capture(bert, sentence, tokenizer=bert.tokenizer, name="all-MiniLM-L6-v2"), layer=0, head=5)

# %% [markdown]
# ## 逐步演算一个头
#
# 第 4 层第 10 个头，查询（query）是 "it"：分数 q·k_j、除以 √d_k、softmax，以及演算出的权重与模型自己的相差多少。

# %%
steps = widget.ask("head", {"text": sentence, "layer": 4, "head": 10, "query": reading["tokens"].index("it")})
for token, weight in zip(steps["tokens"], steps["weights"], strict=True):
    print(f"{token:>10}  {weight:.4f}")
print("check:", steps["check"])

# %% [markdown]
# ## 练习
#
# 关掉第 0 层的第 3 个头（页面上的开关发送的就是这个 `head_mask`：`[层, 头]` 对的列表），看看句向量移动了多少：
# 关掉这个头时的句向量与所有头都开着时的句向量之间的余弦相似度。把它赋给 `answer`（一个浮点数）。

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
answer = widget.ask("forward", {"text": sentence, "head_mask": [[0, 3]]})["baseline"]["embedding_similarity"]

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
mask = torch.ones(6, 12)
mask[0, 3] = 0.0
off = bert(batch.input_ids, head_mask=mask).last_hidden_state[0].mean(0)
on = bert(batch.input_ids).last_hidden_state[0].mean(0)
expected = float(torch.nn.functional.cosine_similarity(off, on, dim=0))
assert isinstance(answer, float), f"a float expected, got {type(answer).__name__}"
assert abs(answer - expected) < 1e-5, f"|answer - expected| = {abs(answer - expected):.2e}"
print(f"✓ cosine similarity {answer:.6f}")
