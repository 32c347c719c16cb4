# %% [markdown]
# # 4. Multi-head attention, built both ways
#
# Section 3.6 of *Build a Large Language Model From Scratch* and section 3.2.2 of "Attention Is All You Need".
# One attention head can learn one "way of looking"; multi-head attention lets several heads look at the same
# sequence, each through its own projections, and concatenates their context vectors:
#
# $$\operatorname{MultiHead}(X) = \operatorname{Concat}(\text{head}_1, \dots, \text{head}_h)\, W_o$$
#
# The book builds it two ways: a wrapper that stacks several causal attention modules, and the "weight split" that
# real models use. Below, each in turn, and then the proof that they are equal.

# %%
# %matplotlib inline
import torch

from attnlab.attention import MultiHeadAttention, MultiHeadAttentionWrapper
from attnlab.inspect import RandomModel, RandomModelConfig, capture
from attnlab.viz.heatmap import heads_figure
from attnlab.viz.viewer import show

torch.set_grad_enabled(False)  # forward passes only
torch.set_printoptions(precision=4, sci_mode=False)
inputs = torch.tensor([[0.43, 0.15, 0.89],   # Your
                       [0.55, 0.87, 0.66],   # journey
                       [0.57, 0.85, 0.64],   # starts
                       [0.22, 0.58, 0.33],   # with
                       [0.77, 0.25, 0.10],   # one
                       [0.05, 0.80, 0.55]])  # step
batch = torch.stack([inputs, inputs])  # (B, T, d_in) = (2, 6, 3)

# %% [markdown]
# ## Way one: the wrapper
#
# `MultiHeadAttentionWrapper` holds `num_heads` independent `CausalAttention`s, runs them one by one and concatenates
# their outputs along the last dimension. Each head gives `d_out = 2` dimensions; two heads give 4. Easy to read,
# but every head does its own small matrix product.

# %%
torch.manual_seed(123)
wrapper = MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)  # the book's call: d_in, d_out, context_length, dropout
out_wrapper = wrapper(batch)
out_wrapper.shape  # (B, T, num_heads · d_out) = (2, 6, 4)

# %% [markdown]
# ## Way two: splitting the weights
#
# `MultiHeadAttention` makes **one** large projection (`d_out = 4`) and splits it with `view` and `transpose` into
# `num_heads` heads of `head_dim = d_out / num_heads` dimensions. All heads run in one batched matrix product, and
# `out_proj` mixes what they found. The shapes, step by step:

# %%
mha = MultiHeadAttention(3, 4, 6, 0.0, num_heads=2)  # d_in, d_out, context_length, dropout, num_heads
B, T, _ = batch.shape
H, hd = mha.num_heads, mha.head_dim
q = mha.W_query(batch)                    # (B, T, d_out)
q = q.view(B, T, H, hd).transpose(1, 2)   # (B, H, T, head_dim): one slice per head
k = mha.W_key(batch).view(B, T, H, hd).transpose(1, 2)
v = mha.W_value(batch).view(B, T, H, hd).transpose(1, 2)
scores = q @ k.transpose(2, 3) / hd**0.5  # (B, H, T, T): every head at once
mask = torch.ones(T, T, dtype=torch.bool).tril()
weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
context = (weights @ v).transpose(1, 2).reshape(B, T, H * hd)  # the heads concatenated back to (B, T, d_out)
out_by_hand = mha.out_proj(context)
assert torch.allclose(out_by_hand, mha(batch), atol=1e-6)
print(q.shape, scores.shape, out_by_hand.shape)

# %% [markdown]
# ## The two ways are one thing
#
# Stack the wrapper's per-head $W_q, W_k, W_v$ on top of each other, copy them into `MultiHeadAttention`, make
# `out_proj` the identity, and the outputs and attention weights agree exactly: the split only fuses several small
# products into one large one.

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
# ## Every head sees something else
#
# A random model with 4 heads reads a Chinese sentence, `我 爱 学习 人工 智能` ("I love learning artificial
# intelligence"). `heads_figure` draws every head of a layer together: each one is causal (the upper-right triangle is
# 0), but each has a pattern of its own.

# %%
cap = capture(RandomModel(RandomModelConfig("multihead", num_heads=4)), "我 爱 学习 人工 智能")
heads_figure(cap)

# %% [markdown]
# `attnlab.viz.viewer.show` embeds an interactive viewer (one offline HTML page) in the notebook: switch heads, and
# hover a token to see its lines.

# %%
show(cap, height=520)

# %% [markdown]
# ## Exercise
#
# For `mha` and `batch` above, and without calling `mha` itself, compute by hand the attention weights of **head 1**
# (counting from 0) for the first sentence (`batch[0]`), shape `(6, 6)`, and assign them to `answer`.
# Hint: project, split, scale, causal mask, softmax.

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
q1 = mha.W_query(batch[0]).view(6, 2, 2)[:, 1]  # (T, head_dim): head 1's queries
k1 = mha.W_key(batch[0]).view(6, 2, 2)[:, 1]
s1 = q1 @ k1.T / 2**0.5
answer = torch.softmax(s1.masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), float("-inf")), dim=-1)

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
expected = mha(batch, return_weights=True)[1][0, 1]
assert torch.is_tensor(answer) and answer.shape == expected.shape, f"shape {tuple(expected.shape)} expected"
diff = (answer - expected).abs().max().item()
assert diff < 1e-6, f"max |answer - expected| = {diff:.2e}"
print(f"✓ max |answer - expected| = {diff:.1e}")
