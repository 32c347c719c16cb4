# %% [markdown]
# # 5. Positional encoding, layer normalization and the Transformer block
#
# Sections 3.1, 3.3 and 3.5 of "Attention Is All You Need" and chapter 4 of *Build a Large Language Model From
# Scratch*. Attention by itself does not know the order of the words; a positional encoding writes "which one" into
# the vectors. Layer normalization keeps every token's vector at a steady scale; the feed-forward network transforms
# each token on its own; residual connections add every sublayer's input straight to its output. The four together
# make the Transformer block.

# %%
# %matplotlib inline
import torch

from attnlab.attention import MultiHeadAttention
from attnlab.layers import (
    BlockSpec,
    FeedForward,
    LayerNorm,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    TransformerBlock,
    sinusoidal_table,
)
from attnlab.viz.pe_plot import pe_figure

torch.set_grad_enabled(False)  # forward passes only
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## Attention cannot see order
#
# Shuffle the input tokens, and the output of self-attention without a causal mask is merely shuffled the same way,
# every number unchanged (it is permutation-equivariant). To it, "I love you" and "you love I" are the same bag of
# words.

# %%
torch.manual_seed(0)
mha = MultiHeadAttention(8, 8, num_heads=2, is_causal=False)
x = torch.randn(1, 5, 8)                # (B, T, d_model)
perm = torch.tensor([4, 3, 2, 1, 0])    # reversed
assert torch.allclose(mha(x[:, perm]), mha(x)[:, perm], atol=1e-6)
(mha(x[:, perm]) - mha(x)[:, perm]).abs().max()

# %% [markdown]
# ## The sinusoidal positional encoding
#
# The paper's choice: $PE(pos, 2i) = \sin(pos / 10000^{2i/d})$, $PE(pos, 2i+1) = \cos(pos / 10000^{2i/d})$.
# Low dimensions oscillate fast, high ones slowly, and every position gets a pattern of its own.
# `SinusoidalPositionalEncoding` adds it to the input; after that, shuffling the order changes the result.

# %%
pe = SinusoidalPositionalEncoding(d_model=8, context_length=16)
x_pos = pe(x)                           # x + PE[:T]
print((mha(pe(x[:, perm])) - mha(x_pos)[:, perm]).abs().max())  # no longer 0: order now matters
sinusoidal_table(4, 8)                  # (context_length, d_model)

# %% [markdown]
# `pe_figure` draws the whole table (positions × dimensions) and a few of its dimensions as curves:

# %%
pe_figure(context_length=64, d_model=32, dims=[0, 1, 6, 16])

# %% [markdown]
# One property of the sinusoidal encoding: the dot product of two positions' encodings depends only on their
# distance $k$ (the two rows below are identical); it is largest at distance 0 and broadly falls as the distance
# grows (a sum of cosines, so not strictly). That makes relative positions easy for a model to learn.

# %%
table = sinusoidal_table(64, 32)
print([round(float(table[10] @ table[10 + k]), 3) for k in range(6)])
print([round(float(table[40] @ table[40 + k]), 3) for k in range(6)])

# %% [markdown]
# GPT uses a learned positional embedding instead: one vector per position, trained with the model. It cannot
# extrapolate to sequences longer than `context_length`.

# %%
learned = LearnedPositionalEmbedding(d_model=8, context_length=16)
learned(x).shape

# %% [markdown]
# ## Layer normalization
#
# For each token's vector, subtract the mean over the features and divide by the standard deviation (with the
# biased variance, i.e. dividing by $D$), then multiply by a learned $\gamma$ and add $\beta$:
#
# $$\operatorname{LN}(x) = \gamma \cdot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta$$
#
# attnlab's `LayerNorm` calls torch's fused kernel by default, and `formula` is the formula written out; both agree
# with `torch.nn.LayerNorm`.

# %%
ln = LayerNorm(8)
y = ln(x)
assert torch.allclose(y, ln.formula(x), atol=1e-6)
assert torch.allclose(y, torch.nn.LayerNorm(8)(x), atol=1e-6)
print(y.mean(dim=-1), y.var(dim=-1, unbiased=False))  # every token: mean 0, variance 1

# %% [markdown]
# ## The feed-forward network
#
# Two linear maps with a GELU between them: $\operatorname{FF}(x) = W_2\,\operatorname{GELU}(W_1 x + b_1) + b_2$,
# usually with $d_{ff} = 4\,d_{model}$. It acts on each token separately; tokens exchange information only in
# attention.

# %%
ff = FeedForward(d_model=8, d_ff=32)
assert torch.allclose(ff(x)[:, 2], ff(x[:, 2:3])[:, 0], atol=1e-6)  # per token: token 2 alone gives the same
ff(x).shape

# %% [markdown]
# ## The Transformer block: post- and pre-LN
#
# The original Transformer and BERT put the layer normalization **after** the residual addition (post-LN):
# $x = \operatorname{LN}(x + \operatorname{Sublayer}(x))$; GPT-2 and the decoders since put it **before** the
# sublayer (pre-LN): $x = x + \operatorname{Sublayer}(\operatorname{LN}(x))$. With pre-LN the residual path runs
# from the embeddings to the output without a normalization in the way, and deep stacks train more easily.

# %%
torch.manual_seed(0)
post = TransformerBlock(BlockSpec(d_model=8, num_heads=2, d_ff=32, norm="post"))
pre = TransformerBlock(BlockSpec(d_model=8, num_heads=2, d_ff=32, norm="pre"))
pre.load_state_dict(post.state_dict())  # the same weights; only where the normalization sits differs

a = post.attn(x)                        # post-LN: normalise after each sublayer
h = post.ln1(x + a)
manual_post = post.ln2(h + post.ff(h))
assert torch.allclose(post(x), manual_post, atol=1e-6)

a = pre.attn(pre.ln1(x))                # pre-LN: the residual stream is never normalised
h = x + a
manual_pre = h + pre.ff(pre.ln2(h))
assert torch.allclose(pre(x), manual_pre, atol=1e-6)
print(post(x).std(dim=-1), pre(x).std(dim=-1))  # post-LN's output is normalised, pre-LN's is not

# %% [markdown]
# A block keeps the shape, `(B, T, d_model)` → `(B, T, d_model)`, so blocks stack one after another;
# `return_weights=True` also gives the block's attention weights `(B, H, T, T)`.

# %%
out, w = pre(x, return_weights=True)
out.shape, w.shape

# %% [markdown]
# ## Exercise
#
# Without `LayerNorm`, layer-normalise `x` above (shape `(1, 5, 8)`) by hand ($\gamma = 1$, $\beta = 0$,
# $\epsilon = 10^{-5}$) and assign the result to `answer`. Mind that the variance is the biased one (divide by $D$,
# not $D - 1$).

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
mean = x.mean(dim=-1, keepdim=True)
var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
answer = (x - mean) / torch.sqrt(var + 1e-5)

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
expected = LayerNorm(8, eps=1e-5)(x)
assert torch.is_tensor(answer) and answer.shape == expected.shape, f"shape {tuple(expected.shape)} expected"
diff = (answer - expected).abs().max().item()
assert diff < 1e-5, f"max |answer - expected| = {diff:.2e}"
print(f"✓ max |answer - expected| = {diff:.1e}")
