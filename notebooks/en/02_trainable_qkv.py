# %% [markdown]
# # 2. Trainable weights: scaled dot-product attention
#
# Section 3.4 of *Build a Large Language Model From Scratch*, and equation (1) of "Attention Is All You Need".
# The self-attention of the previous notebook took dot products of the embeddings themselves; now the model gets
# three trainable matrices that project each token's input $x$ into a query, a key and a value:
#
# $$Q = X W_q,\quad K = X W_k,\quad V = X W_v$$
#
# $$Z = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V$$
#
# The query asks "what am I looking for", the key answers "what do I hold", and the value is what is actually taken.

# %%
# %matplotlib inline
import torch

from attnlab.attention import SelfAttentionV1, SelfAttentionV2
from attnlab.inspect import RandomModel, RandomModelConfig, capture, explain
from attnlab.viz.heatmap import head_figure

torch.set_grad_enabled(False)  # forward passes only: no grad_fn in the outputs
torch.set_printoptions(precision=4, sci_mode=False)
inputs = torch.tensor([[0.43, 0.15, 0.89],   # Your
                       [0.55, 0.87, 0.66],   # journey
                       [0.57, 0.85, 0.64],   # starts
                       [0.22, 0.58, 0.33],   # with
                       [0.77, 0.25, 0.10],   # one
                       [0.05, 0.80, 0.55]])  # step

# %% [markdown]
# ## Three projections
#
# Like the book, `SelfAttentionV1` keeps $W_q, W_k, W_v$ as `nn.Parameter`s (shape `(d_in, d_out)`, initialised
# uniformly in [0, 1)). With the seed 123 its numbers are the ones the book prints. `project` returns $Q, K, V$.

# %%
torch.manual_seed(123)
sa_v1 = SelfAttentionV1(d_in=3, d_out=2)
queries, keys, values = sa_v1.project(inputs)  # each (T, d_out) = (6, 2)
queries

# %% [markdown]
# ## Scores, scaling, softmax, weighted sum
#
# The attention scores are the dot products of queries and keys, $Q K^\top$; divided by $\sqrt{d_k}$ and passed
# through softmax they become the attention weights; the weights then sum the values into the context vectors.

# %%
d_k = keys.shape[-1]
attn_scores = queries @ keys.T                               # (T, T)
attn_weights = torch.softmax(attn_scores / d_k**0.5, dim=-1)
context_vecs = attn_weights @ values                         # (T, d_out)
assert torch.allclose(context_vecs, sa_v1(inputs), atol=1e-6)
context_vecs[0]  # the book's numbers: [0.2996, 0.8053]

# %% [markdown]
# ## Why divide by $\sqrt{d_k}$
#
# The dot product of two random $d$-dimensional vectors has a variance proportional to $d$. The wider the vectors,
# the further apart the scores, and the closer softmax gets to one-hot, where its gradient all but vanishes.
# Divided by $\sqrt{d_k}$, the scores have a standard deviation of about 1 again and softmax stays "soft".
# Below, scores against 8 random keys, and the largest weight:

# %%
g = torch.Generator().manual_seed(0)
for d in (4, 64, 1024):
    q, k = torch.randn(d, generator=g), torch.randn(8, d, generator=g)
    s = k @ q
    print(f"d = {d:4}: std(q·k) = {s.std():6.2f}, max weight unscaled {torch.softmax(s, 0).max():.3f}, "
          f"scaled {torch.softmax(s / d**0.5, 0).max():.3f}")

# %% [markdown]
# ## The `nn.Linear` version
#
# `SelfAttentionV2` projects with `nn.Linear` (a better initialisation, and an optional bias). `nn.Linear` stores
# its weight as `(d_out, d_in)` and computes $x W^\top$, so with V1's matrices copied in transposed, the two give
# exactly the same output:

# %%
sa_v2 = SelfAttentionV2(d_in=3, d_out=2)
with torch.no_grad():
    sa_v2.W_query.weight.copy_(sa_v1.W_query.T)
    sa_v2.W_key.weight.copy_(sa_v1.W_key.T)
    sa_v2.W_value.weight.copy_(sa_v1.W_value.T)
assert torch.allclose(sa_v2(inputs), sa_v1(inputs), atol=1e-6)
sa_v2(inputs)

# %% [markdown]
# ## One query, step by step: `explain`
#
# `capture` records the model's own $Q, K, V$ and weights; `explain` works out every number for one query token
# and compares them with what the model computed in its forward pass (`max_abs_diff_weights`). Here the `scaled`
# mechanism of `RandomModel` reads a Chinese sentence, `我 爱 学习 AI` ("I love learning AI"):

# %%
cap = capture(RandomModel(RandomModelConfig("scaled")), "我 爱 学习 AI")
e = explain(cap, "爱")
print(f"query {e.query_token!r}: q = {e.query.numpy().round(4)}, d_k = {e.keys.shape[-1]}")
for j, token in enumerate(e.tokens):
    print(f"  {token:>4}  q·k = {e.raw_scores[j]:8.4f}   ÷√d_k = {e.scaled_scores[j]:8.4f}   "
          f"weight = {e.weights[j]:.4f}")
print("context =", e.context.numpy().round(4), f"  (max |Δ| vs the model: {e.max_abs_diff_weights:.1e})")

# %%
head_figure(cap)

# %% [markdown]
# Compare with the previous notebook's heatmap: with $W_q$ and $W_k$ a token no longer stares at itself; whom it
# attends to is for training to decide.

# %% [markdown]
# ## Exercise
#
# From `cap.queries[0]` (shape `(H, T, d_k)`, here $H = 1$) and `cap.keys[0]`, compute by hand the attention weights
# of the query `学习` (position 2, counting from 0) over all tokens (shape `(4,)`), and assign them to `answer`.
# Do not forget the scaling.

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
q = cap.queries[0][0, 2]  # (d_k,)
K = cap.keys[0][0]        # (T, d_k)
answer = torch.softmax(K @ q / K.shape[-1] ** 0.5, dim=0)

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
expected = cap.attentions[0][0, 2]
assert torch.is_tensor(answer) and answer.shape == expected.shape, f"shape {tuple(expected.shape)} expected"
diff = (answer - expected).abs().max().item()
assert diff < 1e-6, f"max |answer - expected| = {diff:.2e}"
print(f"✓ max |answer - expected| = {diff:.1e}")
