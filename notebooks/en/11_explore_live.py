# %% [markdown]
# # 11. Attention, live: the explorer in a notebook
#
# `attnlab explore` serves a page where every layer and head answers as you type. The same page runs inside a
# notebook cell: `attnlab.explore.show(model, text)` returns a widget (anywidget) whose scripts run in the cell and
# ask the kernel for their numbers, which come from the model's own forward pass. Type in its text box, switch a head
# off, open one head step by step: nothing is drawn that the model did not compute.

# %%
# %matplotlib inline
import torch

from attnlab.explore import show
from attnlab.inspect import capture
from attnlab.pretrained import load_bert
from attnlab.viz.heatmap import head_figure

torch.set_grad_enabled(False)  # forward passes only

# %% [markdown]
# ## The widget
#
# all-MiniLM-L6-v2 (installed with attnlab) reading one sentence. In JupyterLab the cell below shows the explorer:
# all 6 × 12 heads at once, one head's matrix, one head step by step, and the language switch (English / `中文`).

# %%
bert = load_bert()
sentence = "The cat sat on the mat because it was tired."
widget = show(bert, sentence)
widget

# %% [markdown]
# ## The same numbers, in Python
#
# `widget.ask` sends the request the page sends (the API of `docs/explore.md`) and returns its answer. Here the
# attention of every layer and head: equal to what the model returns with `return_weights=True`.

# %%
reading = widget.ask("forward", {"text": sentence})
shown = torch.tensor(reading["attentions"])               # (layers, heads, T, T)
batch = bert.tokenize(sentence)
own = torch.stack([a[0] for a in bert(batch.input_ids, return_weights=True).attentions])
print(reading["tokens"])
print(f"max |page - model| = {(shown - own).abs().max():.1e}")

# %% [markdown]
# The page's head view, as a figure: layer 0, head 5 looks at the previous token.

# %%
head_figure(capture(bert, sentence, tokenizer=bert.tokenizer, name="all-MiniLM-L6-v2"), layer=0, head=5)

# %% [markdown]
# ## One head, step by step
#
# For the query "it" in layer 4, head 10: the scores q·k_j, divided by √d_k, the softmax, and how close the worked
# weights come to the model's own.

# %%
steps = widget.ask("head", {"text": sentence, "layer": 4, "head": 10, "query": reading["tokens"].index("it")})
for token, weight in zip(steps["tokens"], steps["weights"], strict=True):
    print(f"{token:>10}  {weight:.4f}")
print("check:", steps["check"])

# %% [markdown]
# ## Exercise
#
# Switch off head 3 of layer 0 (the `head_mask` the page's switches send: a list of `[layer, head]` pairs) and read
# how far the sentence vector moves: the cosine similarity of the sentence vector with that head off to the one with
# every head on. Assign it to `answer` (a float).

# %% tags=["solution", "hide-input"] jupyter={"source_hidden": true}
answer = widget.ask("forward", {"text": sentence, "head_mask": [[0, 3]]})["baseline"]["embedding_similarity"]

# %% tags=["check", "remove-input"] jupyter={"source_hidden": true}
mask = torch.ones(6, 12)
mask[0, 3] = 0.0
off = bert(batch.input_ids, head_mask=mask).last_hidden_state[0].mean(0)
on = bert(batch.input_ids).last_hidden_state[0].mean(0)
expected = float(torch.nn.functional.cosine_similarity(off, on, dim=0))
assert isinstance(answer, float), f"a float expected, got {type(answer).__name__}"
assert abs(answer - expected) < 1e-5, f"|answer - expected| = {abs(answer - expected):.2e}"
print(f"✓ cosine similarity {answer:.6f}")
