# %% [markdown]
# # 3. Causal attention: the mask and dropout
#
# Section 3.5 of *Build a Large Language Model From Scratch*. A language model predicts one token after another, so
# the token at position $i$ may only look at positions $0..i$, never peek at the words after it. The way to do it is
# a mask that sets the attention scores above the diagonal to $-\infty$ before the softmax. In training, dropout
# then drops a random part of the attention weights, against overfitting.

# %%
# %matplotlib inline
import torch

from attnlab.attention import CausalAttention
from attnlab.functional import causal_mask
from attnlab.inspect import RandomModel, RandomModelConfig, capture
from attnlab.viz.heatmap import head_figure

torch.set_grad_enabled(False)  # forward passes only: no grad_fn in the outputs
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
scores = queries @ keys.T / keys.shape[-1] ** 0.5  # scaled scores, not masked yet

# %% [markdown]
# ## The causal mask
#
# attnlab follows PyTorch's convention: in a boolean mask `True` means "may attend". `causal_mask(T)` is a lower
# triangle:

# %%
mask = causal_mask(6)
mask.int()

# %% [markdown]
# ## Two ways, one result
#
# The book first shows an intuitive way: softmax, then zero the weights of future positions, then renormalise every
# row. The better way sets the scores of future positions to $-\infty$ **before** the softmax: $e^{-\infty} = 0$,
# and the softmax's denominator only sums the allowed positions, all in one step.

# %%
w = torch.softmax(scores, dim=-1)
w_zeroed = w * mask                                       # future positions zeroed
weights_renorm = w_zeroed / w_zeroed.sum(dim=-1, keepdim=True)

masked_scores = scores.masked_fill(~mask, float("-inf"))  # future positions -> -inf
weights_causal = torch.softmax(masked_scores, dim=-1)
assert torch.allclose(weights_renorm, weights_causal, atol=1e-6)

_, weights_module = ca(inputs, return_weights=True)       # what CausalAttention computes itself
assert torch.allclose(weights_module, weights_causal, atol=1e-6)
weights_causal

# %% [markdown]
# ## Dropout
#
# In training, dropout sets each weight to zero with probability $p$ and multiplies the survivors by $1/(1-p)$, so
# the expected output is unchanged. At inference (`eval()`) it does nothing.

# %%
torch.manual_seed(123)
dropout = torch.nn.Dropout(0.5)
dropout(torch.ones(6, 6))  # about half are 0, the rest 1 / (1 - 0.5) = 2

# %%
ca_drop = CausalAttention(d_in=3, d_out=2, context_length=6, dropout=0.5)
ca_drop.load_state_dict(ca.state_dict())
torch.manual_seed(123)
_, w_train = ca_drop.train()(inputs, return_weights=True)  # training mode: random drops
_, w_eval = ca_drop.eval()(inputs, return_weights=True)    # inference mode: no dropout
assert torch.allclose(w_eval, weights_causal, atol=1e-6)
w_train

# %% [markdown]
# ## Padding is a mask too
#
# The sentences of a batch differ in length, and the short ones are filled up with padding at the end.
# `attention_mask` has shape `(B, T)`, 1 for a real token and 0 for padding; a padded position gets exactly 0 weight
# as a key. Below, only the first 4 tokens of the second sentence are real:

# %%
batch = torch.stack([inputs, inputs])  # (B, T, d_in) = (2, 6, 3)
attention_mask = torch.tensor([[1, 1, 1, 1, 1, 1],
                               [1, 1, 1, 1, 0, 0]])
_, w_pad = ca(batch, attention_mask=attention_mask, return_weights=True)
w_pad[1]

# %% [markdown]
# ## Causal attention on a Chinese sentence
#
# The upper-right triangle of the heatmap is all zeros: no token saw a word after it.

# %%
cap = capture(RandomModel(RandomModelConfig("causal")), "我 爱 学习 人工 智能")
head_figure(cap)

# %% [markdown]
# ## Exercise
#
# Combine the two masks: for the second sentence of the batch (its last two positions are padding), compute by hand,
# from `scores`, `mask` and `attention_mask[1]` above, the attention weights (shape `(6, 6)`), and assign them to
# `answer`. A key must be allowed by both the causal mask and the padding mask (the two boolean masks "and"-ed).

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
allowed = mask & attention_mask[1].bool()  # (T, T) & (T,): broadcast over the rows
answer = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
expected = ca(batch, attention_mask=attention_mask, return_weights=True)[1][1]
assert torch.is_tensor(answer) and answer.shape == expected.shape, f"shape {tuple(expected.shape)} expected"
diff = (answer - expected).abs().max().item()
assert diff < 1e-6, f"max |answer - expected| = {diff:.2e}"
print(f"✓ max |answer - expected| = {diff:.1e}")
