"""``attnlab heads …``: what the heads learn, four papers' experiments (see docs/heads.md).

* ``induction --out DIR``: a one-layer and a two-layer attention-only model trained side by side; the two-layer one
  forms induction heads in a phase change (Olsson et al., 2022);
* ``roles``: every head of a pretrained BERT measured over a corpus, as Clark et al. (2019) did;
* ``rollout TEXT``: raw attention, attention rollout and attention flow of any model attnlab can look through;
* ``prune --checkpoint DIR``: each head's importance, its ablation, and the loss as heads are removed (Michel et al.,
  2019);
* ``patch …``: which heads cause an output, by patching them between a clean and a corrupted run
  (:mod:`attnlab.cli.heads_patch`).
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from attnlab.cli.heads_patch import TranslatedGroup, prepare_out, write_figure, write_json
from attnlab.cli.heads_patch import command as patch_command
from attnlab.cli.lang import Command
from attnlab.cli.model_options import capture_text, model_options, say_unknown
from attnlab.cli.params import SEED, refuse_unused
from attnlab.i18n import N_, _, tr
from attnlab.terminal import titled_table


@click.group(name="heads", cls=TranslatedGroup,
             help=N_("What the heads learn: induction heads, BERT's head roles, attention rollout and flow, head "
                     "pruning, and which heads cause an output (patching)."))
def command() -> None:
    """The ``attnlab heads`` group."""


command.add_command(patch_command)


def _check_image_path(path: str) -> None:
    from attnlab.viz.figures import image_format

    try:
        image_format(path)
    except ValueError as err:
        raise click.UsageError(str(err)) from err


@command.command(name="rollout", cls=Command,
                 help=N_("Raw attention, attention rollout and attention flow of TEXT, side by side (Abnar & "
                         "Zuidema, 2020)."))
@click.argument("text")
@click.option("-o", "--output", default="rollout.png", show_default=True, help=N_("Output file (.png or .svg)."))
@model_options(default_mechanism="multihead")
@click.option("--layer", default=-1, show_default=True,
              help=N_("Layer whose raw attention is drawn beside rollout and flow (-1: the last)."))
def rollout_command(text: str, output: str, model_name: str, mechanism: str, seed: int, layer: int) -> None:
    from attnlab.heads import FLOW_MAX_TOKENS, attention_flow, rollout
    from attnlab.inspect.names import shown_name
    from attnlab.viz.rollout_figure import rollout_figure

    _check_image_path(output)
    cap = capture_text(text, model_name, mechanism, seed, qkv=False)
    shown = cap.num_layers + layer if layer < 0 else layer
    try:
        cap.check_layer_head(shown)
    except ValueError as err:
        raise click.UsageError(tr("--layer: {problem}", problem=err)) from err
    raw = cap.attentions[shown].mean(dim=0).double()
    rolled = rollout(cap.attentions)
    flow = attention_flow(cap.attentions) if cap.seq_len <= FLOW_MAX_TOKENS else None
    if flow is None:
        click.echo(tr("attention flow is computed for at most {max_tokens} tokens; this text has {t}: only rollout "
                      "is drawn", max_tokens=FLOW_MAX_TOKENS, t=cap.seq_len))
    # the row a prediction is read from: a decoder's last token, an encoder's first ([CLS])
    row = cap.seq_len - 1 if cap.is_causal else 0
    title = tr("where {token} gets its information from ({model_name})", token=escape(repr(cap.tokens[row])),
               model_name=escape(shown_name(cap.model_name)))
    table = titled_table(title)
    for name in (tr("input token"), tr("raw, layer {layer}", layer=shown), tr("rollout"), tr("flow")):
        table.add_column(name, justify="left" if name == tr("input token") else "right")
    for j, token in enumerate(cap.tokens):
        table.add_row(escape(token), f"{raw[row, j]:.3f}", f"{rolled[row, j]:.3f}",
                      "-" if flow is None else f"{flow[row, j]:.3f}")
    Console(highlight=False).print(table)
    fig = rollout_figure(cap.tokens, raw, rolled, flow, layer=shown, title=shown_name(cap.model_name))
    write_figure(fig, output)


@command.command(name="induction", cls=Command,
                 help=N_("Train a one-layer and a two-layer attention-only model on repeated random tokens and watch "
                         "induction heads form (Olsson et al., 2022). A fixed number of steps: every machine gets the "
                         "same numbers."))
@click.option("--out", "out_dir", default="out/heads", show_default=True, type=click.Path(file_okay=False),
              help=N_("Where induction.json and the figures are written."))
@click.option("--steps", default=None, type=int, help=N_("Training steps of each model [default: 800]."))
@click.option("--seed", default=0, show_default=True, type=SEED, help=N_("Seed of the weights and the data."))
@click.option("--layer", default=None, type=int,
              help=N_("Layer of the head drawn on a repeated sequence [default: the best head's]."))
@click.option("--head", default=None, type=int, help=N_("Head drawn on a repeated sequence [default: the best]."))
def induction_command(out_dir: str, steps: int | None, seed: int, layer: int | None, head: int | None) -> None:
    from attnlab.heads.induction import InductionConfig, results, shown_model, train_induction

    config = InductionConfig(seed=seed) if steps is None else InductionConfig(seed=seed, steps=steps)
    deepest = max(config.layers)
    if (layer is None) != (head is None):
        raise click.UsageError(tr("--layer and --head go together: give both, or neither (the best head is drawn)"))
    if layer is not None and not 0 <= layer < deepest:
        raise click.UsageError(tr("--layer must be in 0..{value} (the {deepest}-layer model), got {layer}",
                                  value=deepest - 1, deepest=deepest, layer=layer))
    if head is not None and not 0 <= head < config.num_heads:
        raise click.UsageError(tr("--head must be in 0..{value}, got {head}", value=config.num_heads - 1, head=head))
    out = prepare_out(out_dir)

    def show(name: str, e) -> None:
        if e.step % 100 == 0 or e.step == config.steps:
            click.echo(tr("{name} step {step:>4}: loss {loss:.3f}, repeated half {repeated:.3f}, ICL {icl:+.3f}, "
                          "best head {best:.2f}", name=shown_model(name), step=e.step, loss=e.loss,
                          repeated=e.repeated_loss, icl=e.icl_score, best=e.best))

    runs = train_induction(config, show)
    result = results(config, runs)
    _induction_table(Console(highlight=False), result)
    write_json(out / "induction.json", result)
    _induction_figures(out, config, runs, result, layer, head)


def _induction_table(console: Console, result: dict) -> None:
    from attnlab.heads.induction import shown_model

    table = titled_table(tr("Induction heads, final scores (head: layer, head; repeated half: its loss; phase change: "
                           "the first step a head scored over 0.5)"))
    for name in (tr("model"), tr("head"), tr("prefix-matching"), tr("ICL score"), tr("repeated half"),
                 tr("phase change")):
        table.add_column(name, justify="left" if name == tr("model") else "right")
    for name, model in result["models"].items():
        layer, head = model["induction_head"]
        step = model["phase_change_step"]
        table.add_row(shown_model(name), f"{layer}, {head}", f"{model['prefix_matching'][layer][head]:.3f}",
                      f"{model['icl_score']:+.3f}", f"{model['repeated_loss']:.3f}",
                      tr("none") if step is None else str(step))
    console.print(table)


def _induction_figures(out: Path, config, runs: dict, result: dict, layer: int | None, head: int | None) -> None:
    from attnlab.data.tokens import stream_generator
    from attnlab.heads.repeated_tokens import repeated_halves
    from attnlab.inspect import capture
    from attnlab.viz.induction_figures import induction_head_figure, induction_training_figure

    write_figure(induction_training_figure(result), str(out / "induction_training.png"))
    name = f"{max(config.layers)}-layer"
    run = runs[name]
    if layer is None:
        layer, head = run.induction_head()
    assert head is not None  # --layer and --head go together (checked above)
    ids = repeated_halves(1, config.half, config.vocab_size, stream_generator(config.seed, "induction", "figure"))[0]
    cap = capture(run.model, ids, tokens=[str(i) for i in ids.tolist()], name=name)
    score = result["models"][name]["prefix_matching"][layer][head]
    write_figure(induction_head_figure(cap.weights(layer, head), cap.tokens, layer, head, score),
                  str(out / "induction_head.png"))


DEFAULT_SENTENCES = 400


@command.command(name="roles", cls=Command,
                 help=N_("Measure what every head of a pretrained BERT looks at ([CLS], [SEP], punctuation, the "
                         "previous, next and same token; entropy) over a corpus, as Clark et al. (2019) did."))
@click.option("--model", "model_name", default="bert", show_default=True,
              help=N_("bert (all-MiniLM-L6-v2), or a directory of a BERT-family model."))
@click.option("--text", "text_path", default=None, type=click.Path(dir_okay=False),
              help=N_("A UTF-8 file, one sentence per line [default: sentences of Shakespeare's Hamlet]."))
@click.option("--sentences", "count", default=DEFAULT_SENTENCES, show_default=True, type=click.IntRange(min=1),
              help=N_("How many of the default sentences to use."))
@click.option("--out", "out_dir", default="out/heads", show_default=True, type=click.Path(file_okay=False),
              help=N_("Where roles.json and the figures are written."))
def roles_command(model_name: str, text_path: str | None, count: int, out_dir: str) -> None:
    from attnlab.data.sentences import read_sentences, shakespeare_sentences
    from attnlab.heads.roles import head_roles

    if text_path is not None:
        refuse_unused(click.get_current_context(), ["count"], tr("with --text, whose every line is used"))
    sentences = read_sentences(text_path) if text_path is not None else shakespeare_sentences(count)
    bert = _load_encoder(model_name)  # a model that cannot be read leaves no --out behind
    say_unknown(bert.tokenizer, sentences, bert.name, N_("a BERT-family model whose vocabulary holds them would read "
                                                          "them (--model DIR; for Chinese, bert-base-chinese)"))
    out = prepare_out(out_dir)
    result = head_roles(bert, sentences)
    _roles_table(Console(highlight=False), result)
    write_json(out / "roles.json", result)
    _roles_figures(out, bert, result, sentences)


def _load_encoder(model_name: str):
    from attnlab.pretrained import load_bert

    net = load_bert("all-MiniLM-L6-v2" if model_name == "bert" else model_name)
    net.name = "all-MiniLM-L6-v2" if model_name == "bert" else Path(model_name).name
    return net


def _roles_table(console: Console, result: dict) -> None:
    from attnlab.heads.roles import ROLE_NAMES, ROLES

    table = titled_table(tr("{model}: what the heads look at, each layer's mean over its heads ({sentences} "
                           "sentences, {queries} query tokens)", model=escape(result["model"]),
                           sentences=result["sentences"], queries=result["queries"]))
    table.add_column(tr("layer"), justify="right")
    for role in ROLES:
        table.add_column(escape(_(ROLE_NAMES[role])), justify="right")
    for layer, heads in enumerate(result["layers"]):
        table.add_row(str(layer), *(f"{sum(h[r] for h in heads) / len(heads):.3f}" for r in ROLES))
    table.add_section()
    table.add_row(tr("even"), *(f"{result['uniform'][r]:.3f}" if r in result["uniform"] else "" for r in ROLES))
    console.print(table)
    for role in ("prev", "next", "cls", "punct"):
        layer, head, value = strongest(result, role)
        click.echo(tr("strongest {role} head: layer {layer}, head {head} ({value:.3f})", role=_(ROLE_NAMES[role]),
                      layer=layer, head=head, value=value))


def strongest(result: dict, role: str) -> tuple[int, int, float]:
    """``(layer, head, value)`` of the head with the highest ``role`` statistic."""
    return max(((layer, head, stats[role]) for layer, heads in enumerate(result["layers"])
                for head, stats in enumerate(heads)), key=lambda x: x[2])


def _roles_figures(out: Path, bert, result: dict, sentences: list[str]) -> None:
    from attnlab.heads.roles import ROLE_NAMES
    from attnlab.inspect import capture
    from attnlab.viz.roles_figures import positional_heads_figure, special_tokens_figure

    write_figure(special_tokens_figure(result), str(out / "roles_special_tokens.png"))
    sentence = max(sentences[:50], key=lambda s: (len(s.split()) <= 16, len(s)))  # a longish one that fits a figure
    cap = capture(bert, sentence, tokenizer=bert.tokenizer, qkv=False)
    panels = []
    for role in ("prev", "next"):
        layer, head, value = strongest(result, role)
        panels.append((cap.weights(layer, head), tr("{role}: layer {layer}, head {head} ({value:.2f} on average)",
                                                     role=_(ROLE_NAMES[role]), layer=layer, head=head, value=value)))
    write_figure(positional_heads_figure(cap.tokens, panels), str(out / "roles_positional_heads.png"))


@command.command(name="prune", cls=Command,
                 help=N_("Rank the heads of a trained GPT by gradient importance, remove each alone, then remove "
                         "more and more of them and plot the loss (Michel et al., 2019)."))
@click.option("--checkpoint", required=True, type=click.Path(exists=True, file_okay=False),
              help=N_("A directory that attnlab train wrote (or one of its checkpoints)."))
@click.option("--data", default=None,
              help=N_("Text to measure the loss on [default: the validation split of the checkpoint's corpus]."))
@click.option("--step", default=0.1, show_default=True, type=float,
              help=N_("Fraction of the heads removed at each point of the curve, in (0, 1)."))
@click.option("--batches", default=20, show_default=True, type=click.IntRange(min=1),
              help=N_("Fixed batches of held-out text every loss is measured on."))
@click.option("--batch-size", default=16, show_default=True, type=click.IntRange(min=1),
              help=N_("Sequences per batch."))
@click.option("--seed", default=0, show_default=True, type=SEED, help=N_("Seed of the batches drawn."))
@click.option("--out", "out_dir", default="out/heads", show_default=True, type=click.Path(file_okay=False),
              help=N_("Where prune.json and the figures are written."))
def prune_command(checkpoint: str, data: str | None, step: float, batches: int, batch_size: int, seed: int,
                  out_dir: str) -> None:
    from attnlab.heads.importance import pruning_fractions
    from attnlab.models import load_trained
    from attnlab.viz.pruning_figures import head_grid_figure, pruning_curve_figure

    pruning_fractions(step)  # a wrong step is reported before anything is loaded
    model, tokenizer = load_trained(checkpoint, "cpu", kind="decoder")
    batches_, source = _held_out(checkpoint, tokenizer, model.config.context_length, data, batches, batch_size, seed)
    out = prepare_out(out_dir)
    result = _measure_heads(model, batches_, step)
    result.update(checkpoint=str(checkpoint), data=source, batches=batches, batch_size=batch_size, seed=seed)
    _prune_report(result)
    write_json(out / "prune.json", result)
    write_figure(pruning_curve_figure(result), str(out / "prune_curve.png"))
    write_figure(head_grid_figure(result), str(out / "prune_heads.png"))


def _held_out(checkpoint: str, tokenizer, context_length: int, data: str | None, count: int, batch_size: int,
              seed: int):
    """The fixed batches every loss is measured on, and where their text came from."""
    from attnlab.data.corpus import load_text
    from attnlab.data.tokens import train_val_split
    from attnlab.heads.importance import held_out_batches
    from attnlab.memory import check_fits
    from attnlab.models.checkpoint import read_state, resolve_checkpoint

    # each batch holds its inputs and targets, (batch_size, context_length) int64 each
    check_fits(16 * count * batch_size * context_length, tr("{count:,} batches of {batch_size:,} × {t:,} tokens",
                                                             count=count, batch_size=batch_size, t=context_length),
               "--batches, --batch-size")

    if data is None:
        train_config = read_state(resolve_checkpoint(checkpoint)).get("train_config", {})
        data = train_config.get("data", "shakespeare")
        tokens = train_val_split(tokenizer.encode(load_text(data)), train_config.get("val_fraction", 0.1))[1]
        source = tr("{source} (validation split)", source=data)
    else:
        source, tokens = data, tokenizer.encode(load_text(data))
    return held_out_batches(tokens, context_length, batch_size, count, seed), source


def _measure_heads(model, batches, step: float) -> dict:
    from attnlab.heads.importance import (
        ablation,
        gradient_importance,
        heads_shape,
        mean_loss,
        pruning_curve,
        pruning_order,
    )

    layers, heads = heads_shape(model)
    base = mean_loss(model, batches)
    importance = gradient_importance(model, batches)
    click.echo(tr("loss with every head: {loss:.4f}; removing each of the {count} heads alone ...", loss=base,
                  count=layers * heads))
    change = ablation(model, batches, base)

    def show(point) -> None:
        click.echo(tr("{pruned:>3} heads removed ({fraction:.0%}): loss {loss:.4f} ({change:+.1%})",
                      pruned=point.pruned, fraction=point.fraction, loss=point.loss,
                      change=point.loss / base - 1))

    curve = pruning_curve(model, batches, importance, step, show)
    return {"num_layers": layers, "num_heads": heads, "base_loss": base,
            "importance": [[round(float(v), 6) for v in row] for row in importance],
            "ablation": [[round(float(v), 6) for v in row] for row in change],
            "order": [list(pair) for pair in pruning_order(importance)],
            "curve": [{"fraction": p.fraction, "pruned": p.pruned, "loss": p.loss} for p in curve]}


def _prune_report(result: dict) -> None:
    base, heads = result["base_loss"], result["num_layers"] * result["num_heads"]
    changes = sorted(((v, layer, head) for layer, row in enumerate(result["ablation"]) for head, v in enumerate(row)),
                     reverse=True)
    small = sum(1 for change in changes if change[0] < 0.01 * base)
    click.echo(tr("{small} of {heads} heads raise the loss by less than 1 per cent when removed alone; the costliest:",
                  small=small, heads=heads))
    for value, layer, head in changes[:3]:
        click.echo(tr("  layer {layer}, head {head}: {change:+.4f} ({relative:+.1%})", layer=layer, head=head,
                      change=value, relative=value / base))
