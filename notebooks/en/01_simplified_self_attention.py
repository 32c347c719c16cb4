# %% [markdown]
# # 1. Simplified self-attention
#
# The first step of the path, section 3.3 of *Build a Large Language Model From Scratch*.
# Self-attention lets every token of a sequence look at all the tokens, average them weighted by how relevant
# each one is, and so obtain its own context vector. This version has no trainable parameters yet:
#
# $$Z = \operatorname{softmax}(X X^\top)\,X$$
#
# Three steps: attention scores → attention weights → context vectors.

# %%
# %matplotlib inline
import torch

from attnlab.attention import SimpleSelfAttention
from attnlab.inspect import RandomModel, RandomModelConfig, capture
from attnlab.viz.heatmap import head_figure

torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# The book's sentence "Your journey starts with one step" has 6 tokens, each represented by a 3-dimensional
# embedding vector. Each row of the matrix $X$ is one token:

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
# ## Step 1: attention scores
#
# Take the second token, "journey", as the query. Its attention score for each token is the dot product of the
# two vectors: the closer their directions, the larger the dot product.

# %%
query = inputs[1]
attn_scores_2 = inputs @ query  # (T,): each token's dot product with journey
attn_scores_2

# %% [markdown]
# ## Step 2: normalise into attention weights
#
# softmax turns the scores into positive numbers that sum to 1. Written directly as
# $e^{x_j} / \sum_k e^{x_k}$ it overflows for large scores; `torch.softmax` subtracts the maximum before
# exponentiating, which gives the same result without overflow.

# %%
naive = torch.exp(attn_scores_2) / torch.exp(attn_scores_2).sum()
attn_weights_2 = torch.softmax(attn_scores_2, dim=0)
assert torch.allclose(naive, attn_weights_2)
print(attn_weights_2, float(attn_weights_2.sum()))

# %% [markdown]
# ## Step 3: the context vector
#
# The context vector of "journey" is the sum of all input vectors weighted by the attention weights,
# $z_2 = \sum_j a_{2j}\, x_j$.

# %%
context_vec_2 = attn_weights_2 @ inputs  # (d_in,)
context_vec_2

# %% [markdown]
# ## Every token at once
#
# With every token as a query, the three steps become three matrix operations: row $i$ of the score matrix
# $X X^\top$ holds token $i$'s scores for all tokens; softmax each row, then multiply by $X$.

# %%
attn_scores = inputs @ inputs.T                    # (T, T): query rows, attended-to columns
attn_weights = torch.softmax(attn_scores, dim=-1)  # every row sums to 1
all_context_vecs = attn_weights @ inputs           # (T, d_in)
assert torch.allclose(all_context_vecs[1], context_vec_2)
attn_weights.sum(dim=-1)

# %% [markdown]
# attnlab's `SimpleSelfAttention` is exactly these three lines; `return_weights=True` returns the attention
# weights as well. The book prints `[0.4419, 0.6515, 0.5683]` as the context vector of "journey":

# %%
context, weights = SimpleSelfAttention()(inputs, return_weights=True)
assert torch.allclose(context, all_context_vecs, atol=1e-6)
assert torch.allclose(context[1], torch.tensor([0.4419, 0.6515, 0.5683]), atol=1e-4)
context

# %% [markdown]
# ## Looking at the weights
#
# `attnlab.inspect.capture` records everything attention did in one forward pass, and
# `attnlab.viz.heatmap.head_figure` draws the weights as a heatmap: query rows, attended-to columns, the weight
# written in each cell.

# %%
cap = capture(SimpleSelfAttention(), inputs, tokens=tokens, name="SimpleSelfAttention")
head_figure(cap)

# %% [markdown]
# Now a Chinese sentence, `我 爱 学习 AI` ("I love learning AI"). `RandomModel` gives each word a fixed random
# vector (plus its position) and computes attention with the same mechanism; the heatmap draws the Chinese tokens
# with the Noto Sans CJK font attnlab ships.
#
# Look at the diagonal: a vector's dot product with itself tends to be the largest, so each token mostly looks at
# itself. That is exactly why the next notebook brings in trainable queries, keys and values.

# %%
cap_zh = capture(RandomModel(RandomModelConfig("simple")), "我 爱 学习 AI")
head_figure(cap_zh)

# %% [markdown]
# ## Exercise
#
# Following the three steps above, compute by hand the context vector of the last token, "step" (shape `(3,)`),
# and assign it to `answer`.
#
# The convention (the same in every notebook): the cell tagged `solution` below is the reference answer, its input
# collapsed; delete it and write your own first if you like. The last cell, tagged `check`, is the hidden check:
# run it, and a ✓ means your answer is right.

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
scores_6 = inputs @ inputs[5]
answer = torch.softmax(scores_6, dim=0) @ inputs

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
expected = SimpleSelfAttention()(inputs)[5]
assert torch.is_tensor(answer) and answer.shape == expected.shape, f"shape {tuple(expected.shape)} expected"
diff = (answer - expected).abs().max().item()
assert diff < 1e-6, f"max |answer - expected| = {diff:.2e}"
print(f"✓ max |answer - expected| = {diff:.1e}")
