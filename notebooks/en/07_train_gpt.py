# %% [markdown]
# # 7. Training a small GPT, and sampling from it
#
# Chapters 4 and 5 of *Build a Large Language Model From Scratch*. A GPT is a stack of causal attention blocks: every
# position sees only the tokens before it and predicts the next token. The training objective is the cross-entropy of
# that next token. Here a character-level model of some thirty thousand parameters learns three Tang poems, in a few
# seconds on a CPU; then greedy decoding and sampling with a temperature write text, and we look at the attention it
# has learned.

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
# ## The corpus
#
# "Quiet Night Thought", "Spring Dawn" and "On the Stork Tower", repeated 30 times in a text file. The character-level
# tokenizer (`CharTokenizer`) makes every character one token.

# %%
poems = ("床前明月光，疑是地上霜。举头望明月，低头思故乡。\n"
         "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。\n"
         "白日依山尽，黄河入海流。欲穷千里目，更上一层楼。\n")
workdir = Path(tempfile.mkdtemp())
(workdir / "poems.txt").write_text(poems * 30, encoding="utf-8")
tokenizer = CharTokenizer.train(poems)
print(tokenizer.vocab_size, tokenizer.encode("床前明月光"))

# %% [markdown]
# ## Before training
#
# The `tiny` preset: 2 blocks of 2 heads, `d_model = 32`, `context_length = 32`. For every position the model outputs
# a vector of `vocab_size` logits; given `targets` (the input shifted by one) it computes the loss as well. An
# untrained model guesses almost uniformly, so its loss is about $\ln(\text{vocab\_size})$.

# %%
torch.manual_seed(0)
model = GPT(GPTConfig.from_preset("tiny", vocab_size=tokenizer.vocab_size))
ids = torch.as_tensor(tokenizer.encode(poems), dtype=torch.long)
x, y = ids[:32][None], ids[1:33][None]  # (B, T): the target is the next character
out = model(x, targets=y)
print(out.logits.shape, f"loss {out.loss:.3f} vs ln(vocab_size) = {math.log(tokenizer.vocab_size):.3f}")

# %% [markdown]
# ## Training
#
# `attnlab.training.train` runs the whole loop: AdamW, learning-rate warm-up and cosine decay, gradient clipping,
# periodic evaluation and checkpoints. 150 steps of 16 sequences of length 32. The validation split is the last 10 %
# of the corpus, here the very same poems, so the validation loss only shows that the model has memorised them; it
# says nothing about generalisation.

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
# ## Generating
#
# `load_trained` reads the checkpoint and the tokenizer back. At every step `generate` feeds the sequence so far to
# the model, takes the logits of the last position and picks the next character (a KV cache means each step computes
# only the one new position). `temperature=0` is greedy decoding: the most likely character every time.

# %%
model, tokenizer = load_trained(workdir / "run")
prompt = encode_prompt(tokenizer, "床前")  # (1, T)
greedy = generate(model, prompt, 22, GenerationConfig(temperature=0))
tokenizer.decode(greedy[0].tolist())

# %% [markdown]
# The temperature divides the logits by $t$ before the softmax: $t < 1$ sharpens the distribution, $t > 1$ flattens
# it, and sampling becomes "bolder". First the probabilities of the character after `床前明`, then samples at
# several temperatures:

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
# ## The attention it learned
#
# `capture` reads a trained GPT too: every head is causal, its upper-right triangle 0.

# %%
cap = capture(model, "举头望明月，低头思故乡。", tokenizer=tokenizer, name="tiny GPT")
heads_figure(cap, layer=1)

# %% [markdown]
# ## Exercise
#
# Write greedy decoding yourself, without `generate`: start from the prompt `白日`, and 10 times feed the current
# sequence (at most `context_length` tokens of it) to `model`, take the argmax of the last position's logits and
# append it to the sequence. Assign the final `(1, 12)` tensor to `answer`.

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
