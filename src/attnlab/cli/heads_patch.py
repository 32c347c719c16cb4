"""``attnlab heads patch …``: which heads cause an output (docs/heads.md, "Which heads cause it").

* ``induction --out DIR``: the induction models trained again, then activation, path and attribution patching and
  direct logit attribution on repeated sequences, before and after the phase change;
* ``dates --checkpoint DIR``: which cross-attention heads of the dates translator carry the month;
* ``prompt --model M --clean TEXT --corrupt TEXT --right TOKEN --wrong TOKEN``: any decoder, one clean and one
  corrupted prompt, the logit difference of two tokens at the last position.

It also holds what every ``heads`` command shares (the group class, the ``--out`` directory, writing JSON and
figures), which :mod:`attnlab.cli.heads` imports from here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from attnlab.cli.lang import Command, Translated
from attnlab.cli.params import SEED
from attnlab.i18n import N_, _, tr

if TYPE_CHECKING:  # the heads package (torch) loads when a command runs
    from attnlab.heads.patching import Listed


class TranslatedGroup(Translated, click.Group):
    """A group of subcommands (``heads``, ``heads patch``) whose one-line help is in the reader's language too."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        helps = {name: self.commands[name].help for name in self.list_commands(ctx)}
        rows = [(name, _(text).split("\n")[0] if text else "") for name, text in helps.items()]
        with formatter.section(_("Commands")):
            formatter.write_dl(rows)


@click.group(name="patch", cls=TranslatedGroup,
             help=N_("Which heads cause an output: activation, path and attribution patching, direct logit "
                     "attribution."))
def command() -> None:
    """The ``attnlab heads patch`` group."""


def write_figure(fig, path: str) -> None:
    """Save a figure (PNG or SVG by its name) and say so; every ``heads`` command writes its figures so."""
    from attnlab.viz.figures import save_figure

    click.echo(tr("wrote {path}", path=save_figure(fig, path)))


def prepare_out(out: str) -> Path:
    """The ``--out`` directory, made and proven writable before minutes of work."""
    from attnlab.files import check_writable_dir

    check_writable_dir(out, "--out")  # before minutes of work
    return Path(out)


def write_json(path: Path, data: dict) -> None:
    """``data`` as JSON, written whole or not at all."""
    from attnlab.files import atomic_write_text

    atomic_write_text(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    click.echo(tr("wrote {path}", path=path))


def _write(out: Path, name: str, data: dict, figures: dict) -> None:
    write_json(out / name, data)
    for file, fig in figures.items():
        write_figure(fig, str(out / file))


def _top(values: Listed, count: int = 3) -> str:
    """The ``count`` largest cells of a layer × head grid (nested lists, None where not measured), as
    ``L1 H2 0.46``."""
    assert isinstance(values, list)  # a grid, not one number
    cells = sorted(((v, i, j) for i, row in enumerate(values) if isinstance(row, list)
                    for j, v in enumerate(row) if isinstance(v, float)), reverse=True)[:count]
    return ", ".join(tr("L{layer} H{head} {value:.2f}", layer=i, head=j, value=v) for v, i, j in cells)


@command.command(name="induction", cls=Command,
                 help=N_("Train the induction models again and find the circuit: which heads restore the repeat, and "
                         "whether the previous-token head feeds them through their queries, keys or values."))
@click.option("--out", "out_dir", default="out/heads", show_default=True, type=click.Path(file_okay=False),
              help=N_("Where patch_induction.json and the figures are written."))
@click.option("--steps", default=None, type=int, help=N_("Training steps of each model [default: 800]."))
@click.option("--seed", default=0, show_default=True, type=SEED, help=N_("Seed of the weights and the data."))
def induction_command(out_dir: str, steps: int | None, seed: int) -> None:
    from attnlab.heads.induction import InductionConfig, results, train_induction
    from attnlab.heads.induction_circuit import induction_circuit
    from attnlab.viz import patching_figures as pf

    config = InductionConfig(seed=seed) if steps is None else InductionConfig(seed=seed, steps=steps)
    out = prepare_out(out_dir)

    def show(name: str, e) -> None:
        if e.step % 200 == 0 or e.step == config.steps:
            click.echo(tr("{name} step {step:>4}: best prefix-matching score {best:.2f}", name=name, step=e.step,
                          best=e.best))

    runs = train_induction(config, show, snapshots=True)
    trained = results(config, runs)
    circuit = induction_circuit(config, runs)
    circuit["phase_change_step"] = trained["models"]["2-layer"]["phase_change_step"]
    _induction_report(circuit)
    two = circuit["models"]["2-layer"]
    half = circuit["half"]
    tokens = [str(i) for i in range(half)] + [f"{i}′" for i in range(half)]  # the second half repeats the first
    figures = {
        "patch_induction_heads.png": pf.head_grid_figure(
            [(tr("{name}: activation patching", name=name), m["patching"]) for name, m in circuit["models"].items()]
            + [(tr("2-layer: attribution patching"), two["attribution"])],
            tr("the share of the repeat restored by one head's output from the repeated run"), tr("share restored")),
        "patch_induction_positions.png": pf.position_grid_figure(
            two["patching_by_position"], tokens, tr("2-layer: one head at one position"), tr("position")),
        "patch_induction_paths.png": pf.path_grid_figure(
            two["paths_from_layer_0"], tr("path patching: the share of the repeat's advantage lost when a layer-0 "
                                          "head of the re-drawn run reaches a layer-1 head")),
        "patch_induction_training.png": pf.circuit_training_figure(circuit["training"],
                                                                   circuit["phase_change_step"]),
        "patch_induction_logits.png": _logits_figure(two["logit_attribution"],
                                                     tr("2-layer: direct logit attribution of the repeat")),
    }
    _write(out, "patch_induction.json", {"config": trained["config"], **circuit}, figures)


def _logits_figure(dla: dict, title: str):
    from attnlab.viz.patching_figures import logit_attribution_figure

    parts = {k: v for k, v in dla.items() if k not in ("total", "heads")}
    return logit_attribution_figure(dla["heads"], parts, dla["total"], title)


def _induction_report(circuit: dict) -> None:
    table = Table(title=tr("Which heads restore the repeat (activation patching, clean into corrupted; 1 = all of "
                           "it)"), title_justify="left")
    for name in (tr("model"), tr("metric: repeated"), tr("metric: re-drawn"), tr("patching"), tr("attribution")):
        table.add_column(name)
    for name, m in circuit["models"].items():
        table.add_row(name, f"{m['clean_metric']:.3f}", f"{m['corrupt_metric']:.3f}", _top(m["patching"]),
                      _top(m["attribution"]))
    Console(highlight=False).print(table)
    paths = circuit["models"]["2-layer"]["paths_from_layer_0"]
    for sender, sites in paths.items():
        click.echo(tr("layer 0, head {sender} -> layer 1, most lost through the queries {q:.2f}, the keys {k:.2f}, "
                      "the values {v:.2f}", sender=sender, q=max(sites["query"][0]), k=max(sites["key"][0]),
                      v=max(sites["value"][0])))


@command.command(name="dates", cls=Command,
                 help=N_("Which cross-attention heads of the dates translator carry the month: '15 juillet 2031' "
                         "against '15 août 2031', and the same in six other formats."))
@click.option("--checkpoint", required=True, type=click.Path(exists=True),
              help=N_("A dates model: attnlab demo dates' OUT/dates, or attnlab train-seq2seq --task dates' --out."))
@click.option("--out", "out_dir", default="out/heads", show_default=True, type=click.Path(file_okay=False),
              help=N_("Where patch_dates.json and the figures are written."))
def dates_command(checkpoint: str, out_dir: str) -> None:
    from attnlab.heads.month_heads import month_heads
    from attnlab.models import load_trained
    from attnlab.viz import patching_figures as pf

    model, vocab = load_trained(checkpoint, "cpu", kind="seq2seq")
    try:
        result = month_heads(model, vocab)  # before --out is made
    except ValueError as err:  # a model of another task cannot read the dates' characters
        raise ValueError(tr("--checkpoint {path!r} is not a dates model: {problem}", path=str(checkpoint),
                            problem=err)) from err
    out = prepare_out(out_dir)
    french, seven = result["french"], result["seven_formats"]
    table = Table(title=tr("Which cross-attention heads carry the month (logit of 7 minus 8; patching: the share "
                           "restored)"), title_justify="left")
    for name in (tr("pair"), tr("metric: July"), tr("metric: August"), tr("patching"), tr("attribution")):
        table.add_column(name)
    for name, m in ((escape(f"{result['sources'][0]} / {result['corrupted_sources'][0]}"), french),
                    (tr("seven formats"), seven)):
        table.add_row(name, f"{m['clean_metric']:.2f}", f"{m['corrupt_metric']:.2f}", _top(m["patching"]),
                      _top(m["attribution"]))
    Console(highlight=False).print(table)
    source = list(result["sources"][0])
    figures = {
        "patch_dates_heads.png": pf.head_grid_figure(
            [(tr("French: activation patching"), french["patching"]),
             (tr("French: attribution patching"), french["attribution"]),
             (tr("seven formats: activation patching"), seven["patching"])],
            tr("the share of the month restored by one cross-attention head from the July run"),
            tr("share restored")),
        "patch_dates_keys.png": pf.position_grid_figure(
            french["key_by_source_position"], source, tr("one head's key at one source character"),
            tr("source character")),
        "patch_dates_values.png": pf.position_grid_figure(
            french["value_by_source_position"], source, tr("one head's value at one source character"),
            tr("source character")),
    }
    _write(out, "patch_dates.json", {"checkpoint": str(checkpoint), **result}, figures)


def _sender(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    layer, dot, head = value.partition(".")
    if not dot or not layer.strip().lstrip("-").isdigit() or not head.strip().lstrip("-").isdigit():
        raise click.UsageError(tr("--sender: expected LAYER.HEAD, such as 0.3, got {value!r}", value=value))
    return int(layer), int(head)


def _one_token(tokenizer, text: str, option: str) -> int:
    ids = [int(i) for i in tokenizer.encode(text)]
    if len(ids) != 1:
        raise ValueError(tr("{option}: expected one token, got {text!r}, which is {count} tokens", option=option,
                            text=text, count=len(ids)))
    return ids[0]


@command.command(name="prompt", cls=Command,
                 help=N_("Patch every head of a decoder between a clean and a corrupted prompt; the metric is the "
                         "logit of --right minus that of --wrong at the last position."))
@click.option("--model", "model_name", required=True,
              help=N_("A checkpoint directory (attnlab train's) or a Hugging Face model directory."))
@click.option("--clean", required=True, help=N_("The clean prompt."))
@click.option("--corrupt", required=True, help=N_("The corrupted prompt: as many tokens as the clean one."))
@click.option("--right", required=True, help=N_("The token the clean prompt should be followed by."))
@click.option("--wrong", required=True, help=N_("The token the corrupted prompt should be followed by."))
@click.option("--site", type=click.Choice(["output", "query", "key", "value"]), default="output", show_default=True,
              help=N_("What of each head is patched."))
@click.option("--positions", type=click.Choice(["all", "each"]), default="all", show_default=True,
              help=N_("A head at every position at once, or one position at a time."))
@click.option("--sender", default=None,
              help=N_("Path patching from this head (LAYER.HEAD) through each later head's query, key and value."))
@click.option("--out", "out_dir", default="out/heads", show_default=True, type=click.Path(file_okay=False),
              help=N_("Where patch_prompt.json and the figures are written."))
def prompt_command(model_name: str, clean: str, corrupt: str, right: str, wrong: str, site: str, positions: str,
                   sender: str | None, out_dir: str) -> None:
    import torch

    from attnlab.cli.model_options import load_model
    from attnlab.heads import (
        answer_direction,
        attribute_heads,
        baselines,
        logit_attribution,
        patch_heads,
        path_patch,
        recovered,
    )
    from attnlab.heads.patching import listed
    from attnlab.heads.sites import patchable
    from attnlab.viz import patching_figures as pf

    chosen = _sender(sender)
    model, tokenizer = load_model(model_name)
    pm = patchable(model)
    if chosen is not None:
        try:
            pm.check_layer(chosen[0], "sender layer")
            pm.check_head(chosen[1], "output", "sender head")
        except ValueError as err:
            raise click.UsageError(tr("--sender: {problem}", problem=err)) from err
    ids = {}
    for option, text in (("--clean", clean), ("--corrupt", corrupt)):
        ids[option] = [int(i) for i in tokenizer.encode(text)]
        if not ids[option]:
            raise ValueError(tr("{option}: expected at least one token, got {text!r}", option=option, text=text))
    if len(ids["--clean"]) != len(ids["--corrupt"]):
        raise ValueError(tr("--clean and --corrupt must be as many tokens long (patching swaps activations position "
                            "by position), got {a} and {b} tokens", a=len(ids["--clean"]), b=len(ids["--corrupt"])))
    right_id, wrong_id = _one_token(tokenizer, right, "--right"), _one_token(tokenizer, wrong, "--wrong")
    x, y = torch.tensor([ids["--clean"]]), torch.tensor([ids["--corrupt"]])

    def difference(logits):
        return (logits[:, -1, right_id] - logits[:, -1, wrong_id]).mean()

    clean_value, corrupt_value = baselines(model, x, y, difference)
    patched = recovered(patch_heads(model, x, y, difference, positions=positions, site=site), clean_value,
                        corrupt_value)
    estimate = recovered(attribute_heads(model, x, y, difference, site=site, positions=positions) + corrupt_value,
                         clean_value, corrupt_value)
    out = prepare_out(out_dir)
    result: dict[str, Any] = {
        "model": model_name, "clean": clean, "corrupt": corrupt, "right": right, "wrong": wrong, "site": site,
        "positions": positions, "clean_metric": clean_value, "corrupt_metric": corrupt_value,
        "patching": listed(patched), "attribution": listed(estimate)}
    click.echo(tr("logit difference: clean {clean:.3f}, corrupted {corrupt:.3f}", clean=clean_value,
                  corrupt=corrupt_value))
    grid = (lambda t: t) if positions == "all" else (lambda t: t.abs().amax(dim=-1))  # each: the largest position
    click.echo(tr("patching restores the most at {top}", top=_top(listed(grid(patched)))))
    figures = {"patch_prompt.png": pf.head_grid_figure(
        [(tr("activation patching"), listed(grid(patched))), (tr("attribution patching"), listed(grid(estimate)))],
        tr("{site}: the share of the logit difference restored", site=site), tr("share restored"))}
    if positions == "each":
        labels = [tokenizer.decode([i]) for i in ids["--clean"]]
        figures["patch_prompt_positions.png"] = pf.position_grid_figure(listed(patched), labels,
                                                                         tr("one head at one position"),
                                                                         tr("position"))
    try:
        dla = logit_attribution(model, x, answer_direction(pm.vocab_size, [right_id], [wrong_id]))
        result["logit_attribution"] = {"total": listed(dla.total), "heads": listed(dla.heads),
                                       **{k: listed(v) for k, v in dla.parts.items()}}
        figures["patch_prompt_logits.png"] = _logits_figure(result["logit_attribution"],
                                                            tr("direct logit attribution of the clean prompt"))
    except ValueError as err:
        click.echo(tr("no direct logit attribution: {reason}", reason=err))
    if chosen is not None:
        paths = {s: recovered(path_patch(model, x, y, difference, chosen, site=s), clean_value, corrupt_value)
                 for s in ("query", "key", "value")}
        result["paths"] = {"sender": list(chosen), **{s: listed(t) for s, t in paths.items()}}
        figures["patch_prompt_paths.png"] = pf.head_grid_figure(
            [(_(pf.THROUGH[s]), listed(t)) for s, t in paths.items()],
            tr("path patching from layer {layer}, head {head}", layer=chosen[0], head=chosen[1]), tr("share restored"))
    _write(out, "patch_prompt.json", result, figures)
