"""``attnlab explain TEXT``: the arithmetic of attention for one query token, every number shown."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from attnlab.cli.lang import Command
from attnlab.cli.model_options import capture_text, model_options
from attnlab.cli.params import refuse_unused
from attnlab.i18n import N_, tr
from attnlab.terminal import titled_table


def fmt_vec(values: list[float], digits: int, max_dims: int = 8) -> str:
    """``[0.1234, -0.5678, …]`` (at most ``max_dims`` numbers, then how many more)."""
    shown = ", ".join(f"{v:.{digits}f}" for v in values[:max_dims])
    more = f", … +{len(values) - max_dims}" if len(values) > max_dims else ""
    return f"[{shown}{more}]"


def _inputs_table(e, digits: int) -> Table:
    if e.query_tokens is not None:  # cross-attention: the keys' side is the source, read through the encoder
        t = titled_table(tr("1. Source tokens and the encoder's output (keys and values are made from it)"))
        t.add_column("#", justify="right")
        t.add_column(tr("source token"), style="bold")
        t.add_column(tr("encoder output (memory)"))
        for j, tok in enumerate(e.tokens):
            t.add_row(str(j), escape(tok), fmt_vec(e.inputs[j].tolist(), digits))
        return t
    t = titled_table(tr("1. Tokens and what the layer reads"))
    t.add_column("#", justify="right")
    t.add_column(tr("token"), style="bold")
    if e.token_embeddings is not None and e.positions is not None:
        t.add_column(tr("embedding"))
        t.add_column(tr("+ position"))
    t.add_column(tr("= input x") if e.positions is not None else tr("input x (hidden state)"))
    for j, tok in enumerate(e.tokens):
        cells = [str(j), escape(tok)]
        if e.token_embeddings is not None and e.positions is not None:
            cells += [fmt_vec(e.token_embeddings[j].tolist(), digits), fmt_vec(e.positions[j].tolist(), digits)]
        style = "reverse" if j == e.query_index else None
        t.add_row(*cells, fmt_vec(e.inputs[j].tolist(), digits), style=style)
    return t


def _kv_table(e, digits: int) -> Table:
    title = tr("2. Query q of {query_token} = {q};  keys and values", query_token=escape(repr(e.query_token)),
               q=fmt_vec(e.query.tolist(), digits))
    t = titled_table(title)
    t.add_column(tr("key token"), style="bold")
    t.add_column("k_j")
    t.add_column("v_j")
    for j, tok in enumerate(e.tokens):
        t.add_row(escape(tok), fmt_vec(e.keys[j].tolist(), digits), fmt_vec(e.values[j].tolist(), digits))
    return t


def _scores_table(e, digits: int) -> Table:
    d_k = e.keys.shape[-1]
    scale_label = tr("× 1 (no scaling)") if e.scale == 1.0 else f"÷ √{d_k} = {e.scale ** -1:.{digits}f}"
    if e.scale != 1.0 and abs(e.scale * d_k**0.5 - 1) > 1e-9:  # Gemma's query_pre_attn_scalar, GPT-2's layer scale
        scale_label = f"× {e.scale:.{digits}f}"
    if e.softcap is not None:  # Gemma 2: the scaled score, capped
        scale_label += f", {e.softcap:g}·tanh(s/{e.softcap:g})"
    t = titled_table(tr("3. Scores, scaling, softmax, and each value's contribution"))
    for name in (tr("key token"), "q · k_j", scale_label, "exp(s - max)", "softmax a_j", "a_j · v_j"):
        t.add_column(name, justify="left" if name in (tr("key token"), "a_j · v_j") else "right")
    for j, tok in enumerate(e.tokens):
        scaled = f"{e.scaled_scores[j]:.{digits}f}" if e.allowed[j] else tr("-inf (masked)")
        t.add_row(escape(tok), f"{e.raw_scores[j]:.{digits}f}", scaled, f"{e.exp_scores[j]:.{digits}f}",
                  f"{e.weights[j]:.{digits}f}", fmt_vec(e.contributions[j].tolist(), digits))
    t.add_section()
    t.add_row(tr("sum"), "", "", f"{e.exp_scores.sum():.{digits}f}", f"{e.weights.sum():.{digits}f}",
              fmt_vec(e.context.tolist(), digits), style="bold")
    return t


def render(console: Console, e, digits: int = 4) -> None:
    """Print an :class:`~attnlab.inspect.Explanation` as rich tables."""
    from attnlab.inspect import shown_name

    where = tr("{model_name} (layer {layer}, head {head})", model_name=escape(shown_name(e.model_name)),
               layer=e.layer, head=e.head)
    console.rule(tr("[bold]Attention of {query_token} in {where}", query_token=escape(repr(e.query_token)),
                    where=where))
    if e.query_tokens is not None:
        console.print(tr("Decoding step {step} wrote {token}; the decoder had written {written} so far. Its query "
                         "comes from the decoder, the keys and values from the source.", step=e.query_index,
                         token=escape(repr(e.query_token)),
                         written=escape(repr("".join(e.query_tokens[: e.query_index])))))
    console.print(_inputs_table(e, digits))
    console.print(_kv_table(e, digits))
    console.print(_scores_table(e, digits))
    console.print(tr("[bold]4. Context vector[/bold] z = Σ a_j v_j = {context}",
                     context=fmt_vec(e.context.tolist(), digits, 16)))
    if e.sink is not None:
        console.print(tr("This head's sink logit {sink:.4f} joins the softmax as one more score with no value: it "
                         "takes the weight {rest:.6f} that the keys do not.", sink=e.sink,
                         rest=1 - float(e.weights.sum())))
    console.print(tr("The weights sum to {sum:.6f}. Checked against the model's own forward pass: max |Δ| weights "
                     "{max_abs_diff_weights:.1e}, context {max_abs_diff_context:.1e}.", sum=e.weights.sum(),
                     max_abs_diff_weights=e.max_abs_diff_weights, max_abs_diff_context=e.max_abs_diff_context))


def explain_translation(checkpoint: str, source: str, query: str | None, layer: int, head: int):
    """The cross-attention explanation for one decoding step of a ``train-seq2seq`` checkpoint's translation."""
    from attnlab.cli.translate import load_translator
    from attnlab.generation.translation import translate
    from attnlab.inspect.encoder_decoder import explain_cross

    model, vocab = load_translator(checkpoint)
    written = translate(model, vocab, [source])[0]
    step: str | int = 0 if query is None else (int(query) if query.isdigit() else query)
    try:
        return explain_cross(model, vocab, source, written.ids, step, layer, head, name=model.name)
    except ValueError as err:
        raise click.UsageError(tr("{error} (the translation is {target!r})", error=err, target=written.target)) from err


@click.command(name="explain", cls=Command,
               help=N_("Show the arithmetic of attention for one token of TEXT: Q·K, ÷√d_k, softmax, Σ weights·V.\n\n"
                       "With --checkpoint (a translation model), TEXT is the source and the query one step of its "
                       "translation: the arithmetic of cross-attention."))
@click.argument("text")
@click.option("--query", "query", default=None,
              help=N_("The query token (its text, or its index). Default: the last; with --checkpoint, the first "
                      "decoding step."))
@click.option("--checkpoint", type=click.Path(exists=True, file_okay=False),
              help=N_("A train-seq2seq checkpoint: explain its cross-attention while it translates TEXT (the query "
                      "is a decoding step, the keys are the source's tokens)."))
@model_options(default_mechanism="scaled")
@click.option("--layer", default=0, show_default=True, help=N_("Layer to explain."))
@click.option("--head", default=0, show_default=True, help=N_("Head to explain."))
@click.option("--digits", default=4, show_default=True, type=click.IntRange(1, 12), help=N_("Decimals shown."))
@click.option("--json", "as_json", is_flag=True, help=N_("Print every number as JSON instead of tables."))
def command(text: str, query: str | None, checkpoint: str | None, mechanism: str, model_name: str, layer: int,
            head: int, seed: int, digits: int, as_json: bool) -> None:
    from attnlab.inspect import explain

    if as_json:
        refuse_unused(click.get_current_context(), ["digits"], tr("with --json, which prints every number whole"))
    if checkpoint is not None:
        refuse_unused(click.get_current_context(), ["model_name", "mechanism", "seed"],
                      tr("with --checkpoint, whose model is explained"))
        e = explain_translation(checkpoint, text, query, layer, head)
        if as_json:
            click.echo(json.dumps(e.to_dict(), ensure_ascii=False, indent=1))
        else:
            render(Console(), e, digits)
        return
    cap = capture_text(text, model_name, mechanism, seed)
    try:
        q: str | int = len(cap.tokens) - 1 if query is None else (int(query) if query.lstrip("-").isdigit()
                                                                 and query not in cap.tokens else query)
        e = explain(cap, q, layer=layer, head=head)
    except (ValueError, TypeError) as err:
        raise click.UsageError(str(err)) from err
    if as_json:
        click.echo(json.dumps(e.to_dict(), ensure_ascii=False, indent=1))
    else:
        render(Console(), e, digits)
