# %% [markdown]
# # 9. What the heads learn
#
# The heatmaps of the earlier notebooks show every attention weight, but a picture of weights does not say what a
# head is *for*. This notebook runs three of the experiments that answered that question, small enough for a
# laptop:
#
# 1. **Induction heads** (Olsson et al., 2022): a two-layer model learns to continue `… A B … A` with `B`, and the
#    head that does it appears suddenly during training; a one-layer model never forms one.
# 2. **BERT's head roles** (Clark et al., 2019): what each head of a pretrained BERT looks at, measured over
#    hundreds of sentences.
# 3. **Attention rollout** (Abnar & Zuidema, 2020): following the information through every layer, not one.
#
# And one tool that runs through them: the **head mask**, which removes a head's output, to see what it was worth
# (Michel et al., 2019); and what came after it, **patching**: which head makes the prediction, and through which of
# its inputs (Wang et al., 2022; Elhage et al., 2021).

# %%
# %matplotlib inline
import torch

from attnlab.data.sentences import shakespeare_sentences
from attnlab.heads import (
    attention_flow,
    attribute_heads,
    baselines,
    patch_heads,
    path_patch,
    recovered,
    rollout,
)
from attnlab.heads.induction import InductionConfig, prefix_matching_scores, results, train_induction
from attnlab.heads.induction_circuit import induction_pair, repeat_metric
from attnlab.heads.repeated_tokens import repeated_halves
from attnlab.heads.roles import head_roles
from attnlab.inspect import capture
from attnlab.pretrained import load_bert
from attnlab.viz.induction_figures import induction_head_figure, induction_training_figure
from attnlab.viz.patching_figures import head_grid_figure, path_grid_figure
from attnlab.viz.roles_figures import special_tokens_figure
from attnlab.viz.rollout_figure import rollout_figure

torch.set_printoptions(precision=3, sci_mode=False)

# %% [markdown]
# ## Induction heads
#
# The data: random tokens, where from time to time a span of tokens comes again later. A random token cannot be
# predicted, except inside a repeat: once `A B` has been seen, after the next `A` comes `B`. The two models are
# attention-only Transformers (no feed-forward layers), one with one layer and one with two, trained with the same
# data, steps and seed. Every 50 steps the experiment measures each head's **prefix-matching score**: on a
# sequence whose second half repeats its first, the attention weight a token of the second half puts on the
# token right after its earlier occurrence. A head that scores near 1 is an induction head.
#
# (600 steps here, about a minute; `attnlab heads induction` trains 800.)

# %%
config = InductionConfig(steps=600)
runs = train_induction(config)
result = results(config, runs)
for name, model in result["models"].items():
    best = max(max(row) for row in model["prefix_matching"])
    print(f"{name}: best prefix-matching score {best:.2f}, in-context learning score {model['icl_score']:+.2f}, "
          f"phase change at step {model['phase_change_step']}")

# %% [markdown]
# The training curves: the loss of the two-layer model on the repeated half collapses at the step where one of
# its heads starts to match prefixes, and at the same time its in-context learning score (the loss late in the
# context minus the loss early in it) drops. The one-layer model's score stays near the floor.

# %%
induction_training_figure(result)

# %% [markdown]
# Its best head, on a sequence whose second half repeats the first: the bright stripe just right of the diagonal
# of the earlier occurrences is the head looking at the token that came *after* the current token last time.

# %%
two = runs["2-layer"]
layer, head = two.induction_head()
tokens = repeated_halves(1, config.half, config.vocab_size, torch.Generator().manual_seed(1))[0]
cap = capture(two.model, tokens, tokens=[str(t) for t in tokens.tolist()])
induction_head_figure(cap.weights(layer, head), cap.tokens, layer, head,
                      result["models"]["2-layer"]["prefix_matching"][layer][head])

# %% [markdown]
# ## Removing a head: the head mask
#
# Every attention module takes `head_mask`: one number per head that multiplies the head's output before the heads
# are mixed by `out_proj`; 0 removes the head. The model formed more than one induction head, so removing the
# best one alone costs little: the others stand in for it. Remove every head that scores over 0.5, or layer 0
# (whose heads tell each position which token came before it, what the induction heads look up), and the
# repeat can no longer be read:

# %%
seq = repeated_halves(64, config.half, config.vocab_size, torch.Generator().manual_seed(2))
inputs, targets = seq[:, :-1], seq[:, 1:].clone()
targets[:, : config.half - 1] = -100  # only the repeated half counts


def repeat_loss(head_mask=None):
    with torch.no_grad():
        return float(two.model(inputs, targets=targets, head_mask=head_mask).loss)


scores = torch.tensor(result["models"]["2-layer"]["prefix_matching"])  # (layers, heads)
masks = {"nothing": torch.ones_like(scores), "the best induction head": torch.ones_like(scores),
         "every head scoring over 0.5": (scores <= 0.5).float(), "all of layer 0": torch.ones_like(scores)}
masks["the best induction head"][layer, head] = 0.0
masks["all of layer 0"][0] = 0.0
for removed, mask in masks.items():
    print(f"removed {removed:<28} loss on the repeated half {repeat_loss(mask):.3f}")

# %% [markdown]
# ## Which heads cause it: patching
#
# A head that *looks* like an induction head need not be the one that makes the prediction. **Activation
# patching** finds out by intervention: run the model on a clean input (the repeated halves) and on a corrupted
# one (the same second half after a re-drawn first half, so nothing repeats), then run the corrupted input again
# with one head's output taken from the clean run. The share of the metric that comes back is that head's doing.
# **Attribution patching** estimates every head's share at once from one forward and one backward pass (a first-order
# estimate, which fails where a head acts by moving its attention from one key to another).

# %%
clean, corrupt = induction_pair(config)  # repeated halves; the same second half after a re-drawn first half
metric = repeat_metric(clean, config.half)  # mean log-probability of the 15 successors a repeat gives away
top, bottom = baselines(two.model, clean, corrupt, metric)
patched = recovered(patch_heads(two.model, clean, corrupt, metric), top, bottom)
estimate = recovered(attribute_heads(two.model, clean, corrupt, metric) + bottom, top, bottom)
print(f"clean {top:.3f}, corrupted {bottom:.3f}")
print("activation patching\n", patched)
print("attribution patching\n", estimate)
head_grid_figure([("activation patching", patched.tolist()), ("attribution patching", estimate.tolist())],
                 "share of the repeat restored by one head", "share restored")

# %% [markdown]
# **Path patching** asks through which input. The layer-0 head of the re-drawn run is put into the repeated run and
# reaches the output only through one layer-1 head's queries, keys or values (every other attention output held at
# the repeated run's). The previous-token head feeds the induction heads through their **keys**: K-composition, the
# mechanism Elhage et al. (2021) describe; through queries and values nothing is lost.

# %%
paths = {head: {site: recovered(path_patch(two.model, corrupt, clean, metric, (0, head), site=site), bottom, top)
                [1:].tolist() for site in ("query", "key", "value")} for head in range(config.num_heads)}
lost = {site: max(max(paths[h][site][0]) for h in paths) for site in ("query", "key", "value")}
print("the most lost through one layer-1 head's", {site: round(v, 2) for site, v in lost.items()})
path_grid_figure(paths, "share of the repeat's advantage lost through one path")

# %% [markdown]
# ## What BERT's heads look at
#
# Clark et al. measured, for every head of BERT-base, how much of its attention goes to `[CLS]`, to `[SEP]`, to
# punctuation, to the previous and the next token, and how spread out it is (the entropy). `head_roles` does the
# same for all-MiniLM-L6-v2 (6 layers × 12 heads) over sentences of Hamlet, pooled over every query token.

# %%
bert = load_bert()
roles = head_roles(bert, shakespeare_sentences(100))
for layer, heads in enumerate(roles["layers"]):
    means = {key: sum(h[key] for h in heads) / len(heads) for key in ("cls", "sep", "punct", "prev", "entropy")}
    print(f"layer {layer}: " + ", ".join(f"{k} {v:.2f}" for k, v in means.items()))

# %% [markdown]
# Unlike BERT-base, whose middle layers send over half of their attention to `[SEP]`, MiniLM's heads send most of
# theirs to `[CLS]` and almost none to `[SEP]`; both have heads that look at the previous token (layer 0, head 2
# puts nearly all of its weight there). docs/heads.md compares the two point by point.

# %%
special_tokens_figure(roles)

# %% [markdown]
# ## Attention rollout
#
# One layer's attention says how a token mixes the vectors of the layer below, but after six layers the mixtures
# are mixed again, and the residual connections carry every vector through as well. Rollout multiplies the
# layers' head-averaged attention, each half and half with the identity (the residual path). Attention flow asks
# instead how much can flow from a top token to an input token through the layers' graph (a max-flow problem).

# %%
cap = capture(bert, "The cat sat on the mat because it was tired.", tokenizer=bert.tokenizer)
rolled = rollout(cap.attentions)
# where [CLS] gets its information from
print([(t, round(w, 3)) for t, w in zip(cap.tokens, rolled[0].tolist(), strict=True)])
flow = attention_flow(cap.attentions)
rollout_figure(cap.tokens, cap.attentions[-1].mean(dim=0), rolled, flow, layer=cap.num_layers - 1)

# %% [markdown]
# ## Exercise
#
# `weights` holds layer 1's attention weights `(H, T, T)` of the two-layer model on one sequence of `2 · half`
# tokens whose second half repeats the first. Compute every head's prefix-matching score (shape `(H,)`) by hand:
# for each query `i` of the second half, the weight on the token right after the earlier occurrence of token `i`;
# average over the queries. Assign it to `answer`.

# %%
half = config.half
sequence = repeated_halves(1, half, config.vocab_size, torch.Generator().manual_seed(3))
with torch.no_grad():
    weights = two.model(sequence, return_weights=True).attentions[1][0]
weights.shape

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
queries = torch.arange(half, 2 * half)
answer = weights[:, queries, queries - half + 1].mean(dim=-1)

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
assert answer.shape == (config.num_heads,)
assert torch.allclose(answer, prefix_matching_scores([weights[None]], half)[0], atol=1e-6)
print("✓ prefix-matching scores:", [round(float(s), 3) for s in answer])
