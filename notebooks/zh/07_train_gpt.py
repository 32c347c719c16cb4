# %% [markdown]
# # 7. 训练一个小 GPT，再从它采样
#
# 对应《从零构建大模型》第 4、5 章。GPT 是一叠因果注意力（causal attention）块：每个位置只看它之前的词元（token），
# 预测下一个词元。训练目标是下一个词元的交叉熵（cross-entropy）。这里用三首唐诗训练一个只有三万多个参数的字符级模型，
# 在 CPU 上只需要几秒钟；然后用贪心解码（greedy decoding）和带温度的采样生成文字，再看它学到的注意力。

# %%
# %matplotlib inline
import math
import tempfile
from pathlib import Path

import torch

from attnlab.data import CharTokenizer
from attnlab.generation import GenerationConfig, encode_prompt, generate
from attnlab.inspect import capture
from attnlab.models import GPT, GPTConfig, load_trained
from attnlab.training import TrainConfig, train
from attnlab.viz.heatmap import heads_figure
from attnlab.viz.loss_curve import loss_figure

torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## 语料
#
# 《静夜思》《春晓》《登鹳雀楼》，重复 30 遍写进一个文本文件。字符级分词器（`CharTokenizer`）把每个字当作一个词元。

# %%
poems = ("床前明月光，疑是地上霜。举头望明月，低头思故乡。\n"
         "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。\n"
         "白日依山尽，黄河入海流。欲穷千里目，更上一层楼。\n")
workdir = Path(tempfile.mkdtemp())
(workdir / "poems.txt").write_text(poems * 30, encoding="utf-8")
tokenizer = CharTokenizer.train(poems)
print(tokenizer.vocab_size, tokenizer.encode("床前明月光"))

# %% [markdown]
# ## 训练之前
#
# `tiny` 预设：2 个块，每块 2 个头，`d_model = 32`，`context_length = 32`。模型对每个位置输出一个长为
# `vocab_size` 的 logits 向量；给出 `targets`（输入右移一位）就同时算出损失。没训练过的模型几乎是均匀猜测，
# 损失约为 $\ln(\text{vocab\_size})$。

# %%
torch.manual_seed(0)
model = GPT(GPTConfig.from_preset("tiny", vocab_size=tokenizer.vocab_size))
ids = torch.as_tensor(tokenizer.encode(poems), dtype=torch.long)
x, y = ids[:32][None], ids[1:33][None]  # (B, T)：目标是下一个字
out = model(x, targets=y)
print(out.logits.shape, f"loss {out.loss:.3f} vs ln(vocab_size) = {math.log(tokenizer.vocab_size):.3f}")

# %% [markdown]
# ## 训练
#
# `attnlab.training.train` 完成整个循环：AdamW、学习率预热和余弦衰减、梯度裁剪、定期评估和检查点。
# 150 步，每步 16 条长 32 的序列。验证集是语料的最后 10%，这里和训练集是同样的诗，
# 所以验证损失只说明模型记住了它们，并不衡量泛化。

# %%
config = TrainConfig(data=str(workdir / "poems.txt"), out=str(workdir / "run"), preset="tiny",
                     max_iters=150, batch_size=16, learning_rate=3e-3, warmup_iters=10,
                     eval_interval=25, eval_iters=4, seed=0)
result = train(config, quiet=True)
step, train_loss, val_loss = result.evals[-1]
print(f"step {step} ({result.stop_reason}): train loss {train_loss:.3f}, val loss {val_loss:.3f}, "
      f"{result.tokens_per_s:,.0f} tokens/s")

# %%
loss_figure(result.train_losses, result.evals, title="tiny GPT on three Tang poems")

# %% [markdown]
# ## 生成
#
# `load_trained` 读回检查点和分词器。`generate` 每步把目前的序列送进模型，取最后一个位置的 logits，选出下一个字
# （KV 缓存让每一步只需计算一个新位置）。`temperature=0` 是贪心解码：每步取概率最大的字。

# %%
model, tokenizer = load_trained(workdir / "run")
prompt = encode_prompt(tokenizer, "床前")  # (1, T)
greedy = generate(model, prompt, 22, GenerationConfig(temperature=0))
tokenizer.decode(greedy[0].tolist())

# %% [markdown]
# 温度把 logits 除以 $t$ 再做 softmax：$t < 1$ 让分布更尖，$t > 1$ 让它更平，采样也就更“大胆”。
# 先看 “明” 之后下一个字的概率，再在不同温度下采样：

# %%
with torch.no_grad():
    logits = model(encode_prompt(tokenizer, "床前明")).logits[0, -1]
for t in (0.5, 1.0, 2.0):
    p, k = torch.softmax(logits / t, dim=-1).topk(3)
    print(f"t = {t}: " + ", ".join(f"{tokenizer.decode([int(i)])} {float(q):.2f}" for q, i in zip(p, k, strict=True)))

# %%
g = torch.Generator().manual_seed(0)
for t in (0.5, 1.0, 2.0):
    sampled = generate(model, prompt, 22, GenerationConfig(temperature=t, top_k=10, generator=g))
    print(f"t = {t}: {tokenizer.decode(sampled[0].tolist())!r}")

# %% [markdown]
# ## 它学到的注意力
#
# `capture` 也能读训练好的 GPT：每个头都是因果的，右上三角为 0。

# %%
cap = capture(model, "举头望明月，低头思故乡。", tokenizer=tokenizer, name="tiny GPT")
heads_figure(cap, layer=1)

# %% [markdown]
# ## 练习
#
# 不用 `generate`，自己写贪心解码：从提示 “白日” 开始，循环 10 次，每次把当前序列（最多 `context_length` 个词元）
# 送进 `model`，取最后一个位置 logits 的 argmax，接到序列末尾。把最终的 `(1, 12)` 张量赋给 `answer`。

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
idx = encode_prompt(tokenizer, "白日")
with torch.no_grad():
    for _ in range(10):
        logits = model(idx[:, -model.config.context_length:]).logits  # (1, T, vocab_size)
        next_id = logits[:, -1].argmax(dim=-1, keepdim=True)           # (1, 1)
        idx = torch.cat([idx, next_id], dim=1)
answer = idx

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
expected = generate(model, encode_prompt(tokenizer, "白日"), 10, GenerationConfig(temperature=0))
assert torch.is_tensor(answer) and answer.shape == expected.shape, f"shape {tuple(expected.shape)} expected"
text, want = tokenizer.decode(answer[0].tolist()), tokenizer.decode(expected[0].tolist())
assert torch.equal(answer, expected), f"{text!r} != {want!r}"
print(f"✓ {text!r}")
