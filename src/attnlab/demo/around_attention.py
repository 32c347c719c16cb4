"""The demo's step for the architecture around attention: model sizes, then a real pretrained BERT."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from rich.table import Table

from attnlab.demo.context import Demo
from attnlab.i18n import N_, _, tr
from attnlab.models import GPT, EncoderConfig, GPTConfig, TransformerEncoder
from attnlab.terminal import titled_table

SENTENCES = [
    "To be, or not to be, that is the question.",
    "Whether to live or to die: that is what I ask.",
    "The cat sat on the mat.",
    "学而时习之，不亦说乎？",
]


def sizes_table() -> Table:
    """Parameter counts of the presets, counted on the meta device (nothing allocated)."""
    table = titled_table(tr("Presets: parameters counted on the meta device"))
    for col in (N_("model"), N_("layers × width"), N_("heads"), N_("parameters")):
        table.add_column(_(col), justify="right" if col == "parameters" else "left")
    presets: list[tuple[Callable[[Any], TransformerEncoder | GPT], type[EncoderConfig] | type[GPTConfig], str]] = [
        (TransformerEncoder, EncoderConfig, "bert-base"), (TransformerEncoder, EncoderConfig, "minilm-l6"),
        (GPT, GPTConfig, "gpt2-small"), (GPT, GPTConfig, "gpt2-xl")]
    for model_cls, cfg_cls, name in presets:
        cfg = cfg_cls.from_preset(name)
        with torch.device("meta"):
            n = model_cls(cfg).num_parameters()
        table.add_row(name, f"{cfg.num_layers} × {cfg.d_model}", str(cfg.num_heads), f"{n:,}")
    return table


def around_attention_step(demo: Demo) -> None:
    """Print the presets' sizes, then embed and compare a few sentences with all-MiniLM-L6-v2."""
    console = demo.console
    console.rule(tr("[bold]The Transformer around attention: blocks, models, a real pretrained BERT"))
    console.print(tr("A block = attention + feed-forward, each with a residual and a LayerNorm: post-LN (BERT) "
                     "normalises after the addition, pre-LN (GPT-2) before the sublayer."))
    console.print(sizes_table())
    try:
        from attnlab.pretrained import load_bert

        bert = load_bert()
    except ImportError as e:
        console.print(tr("[yellow]Skipped the pretrained BERT: {e}[/]", e=e))
        return
    emb = bert.encode(SENTENCES)
    sims = emb @ emb.T
    table = titled_table(tr("all-MiniLM-L6-v2 (our encoder, its weights): cosine similarity of sentence embeddings"))
    table.add_column("")
    for i in range(len(SENTENCES)):
        table.add_column(str(i), justify="right")
    for i, s in enumerate(SENTENCES):
        table.add_row(f"{i}: {s}", *(f"{sims[i, j]:.2f}" for j in range(len(SENTENCES))))
    console.print(table)
    batch = bert.tokenize(SENTENCES[:1])
    out = bert(batch.input_ids, batch.attention_mask, return_weights=True)
    w = out.attentions[-1][0].mean(0)  # last layer, averaged over heads: (T, T)
    tokens, last = batch.tokens[0], len(batch.tokens[0]) - 1
    special = (w[1:last, 0] + w[1:last, last]).mean().item()
    words = w[:, 1:last]  # what is left once [CLS] and [SEP] are set aside
    pairs = ", ".join(f"{tokens[i]}→{tokens[1 + int(words[i].argmax())]}" for i in range(1, last))
    console.print(tr("Last layer, heads averaged: {special:.0%} of each word's attention goes to [CLS]/[SEP]; of the "
                     "words, each attends most to: {pairs}", special=special, pairs=pairs))
