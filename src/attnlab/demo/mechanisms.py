"""The demo's first step: every step of every mechanism, printed.

The example is the book's: "Your journey starts with one step", six tokens with 3-d embeddings.
"""

from __future__ import annotations

import torch
from rich.console import Console
from rich.table import Table
from torch import Tensor

from attnlab.attention import CausalAttention, MultiHeadAttention, SelfAttentionV1, SimpleSelfAttention
from attnlab.demo.context import Demo
from attnlab.functional import attention_scores, attention_weights, causal_mask
from attnlab.i18n import tr
from attnlab.terminal import titled_table

TOKENS = ["Your", "journey", "starts", "with", "one", "step"]
EMBEDDINGS = torch.tensor(
    [[0.43, 0.15, 0.89],  # Your
     [0.55, 0.87, 0.66],  # journey
     [0.57, 0.85, 0.64],  # starts
     [0.22, 0.58, 0.33],  # with
     [0.77, 0.25, 0.10],  # one
     [0.05, 0.80, 0.55]]  # step
)


def matrix_table(title: str, m: Tensor, rows: list[str], cols: list[str] | None = None) -> Table:
    """A rich table of a 2-D tensor, rows and columns labelled (``-inf`` shown as such)."""
    m = m.detach()
    cols = cols if cols is not None else [f"d{j}" for j in range(m.shape[1])]
    table = titled_table(title, show_edge=False)
    table.add_column("", style="bold")
    for c in cols:
        table.add_column(c, justify="right")
    for name, row in zip(rows, m.tolist(), strict=True):
        table.add_row(name, *("-inf" if v == float("-inf") else f"{v:.4f}" for v in row))
    return table


def simplified(console: Console, x: Tensor) -> None:
    console.rule(tr("[bold]1. Simplified self-attention: softmax(X Xᵀ) X, no weights"))
    console.print(matrix_table(tr("Inputs X (one 3-d embedding per token)"), x, TOKENS))
    console.print(matrix_table(tr("Scores X Xᵀ (query rows, key columns)"), x @ x.T, TOKENS, TOKENS))
    context, weights = SimpleSelfAttention()(x, return_weights=True)
    console.print(matrix_table(tr("Weights softmax(X Xᵀ): each row sums to 1"), weights, TOKENS, TOKENS))
    console.print(matrix_table(tr("Context vectors Z = weights · X"), context, TOKENS))


def scaled(console: Console, x: Tensor, seed: int) -> None:
    console.rule(tr("[bold]2. Scaled dot-product attention with trainable W_q, W_k, W_v"))
    torch.manual_seed(seed)
    sa = SelfAttentionV1(d_in=3, d_out=2)
    q, k, v = sa.project(x)
    for name, t in ((tr("Queries Q = X W_q"), q), (tr("Keys K = X W_k"), k), (tr("Values V = X W_v"), v)):
        console.print(matrix_table(name, t, TOKENS))
    d_k = k.shape[-1]
    console.print(matrix_table(tr("Scores Q Kᵀ"), q @ k.T, TOKENS, TOKENS))
    scores = attention_scores(q, k, d_k**-0.5, None)
    console.print(matrix_table(tr("Scaled scores Q Kᵀ / √d_k  (d_k = {d_k})", d_k=d_k), scores, TOKENS, TOKENS))
    context, weights = sa(x, return_weights=True)
    console.print(matrix_table(tr("Weights softmax(scaled scores)"), weights, TOKENS, TOKENS))
    console.print(matrix_table(tr("Context vectors Z = weights · V"), context, TOKENS))


def causal(console: Console, x: Tensor, seed: int) -> None:
    console.rule(tr("[bold]3. Causal attention: no peeking at later tokens"))
    torch.manual_seed(seed)
    ca = CausalAttention(d_in=3, d_out=2, context_length=6, dropout=0.5).eval()
    q, k, _ = ca.project(x)
    mask = causal_mask(len(TOKENS))
    scores = attention_scores(q, k, k.shape[-1] ** -0.5, mask)
    console.print(matrix_table(tr("Masked scores: -inf above the diagonal"), scores, TOKENS, TOKENS))
    console.print(matrix_table(tr("Weights: each row renormalised over the allowed keys"),
                               attention_weights(scores, mask), TOKENS, TOKENS))
    torch.manual_seed(seed)
    _, dropped = ca.train()(x, return_weights=True)
    console.print(matrix_table(tr("In training, dropout p=0.5 zeroes weights and doubles the rest"),
                               dropped, TOKENS, TOKENS))
    context = ca.eval()(x)
    console.print(matrix_table(tr("Context vectors (eval: no dropout)"), context, TOKENS))


def multihead(console: Console, x: Tensor, seed: int) -> None:
    console.rule(tr("[bold]4. Multi-head attention: two heads, split weights, out_proj"))
    torch.manual_seed(seed)
    mha = MultiHeadAttention(3, 4, context_length=6, dropout=0.0, num_heads=2).eval()  # the book's call
    context, weights = mha(x, return_weights=True)
    for h in range(mha.num_heads):
        console.print(matrix_table(tr("Head {h} weights", h=h), weights[h], TOKENS, TOKENS))
    console.print(matrix_table(tr("Output: heads concatenated, then out_proj"), context, TOKENS))


def mechanisms_step(demo: Demo) -> None:
    """The four mechanisms on the book's sentence, every matrix printed."""
    console, x, seed = demo.console, EMBEDDINGS, demo.seed
    simplified(console, x)
    scaled(console, x, seed)
    causal(console, x, seed)
    multihead(console, x, seed)
