"""``attnlab bench``: time, FLOP rate and peak memory of every attention backend on this machine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from attnlab.bench.cases import BACKENDS, FULL_SEQ_LENS, BenchConfig, available_backends
from attnlab.cli.config_options import FieldOption
from attnlab.cli.lang import Command
from attnlab.i18n import N_, tr


def _seq_lens(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if not parts:
        raise click.BadParameter(tr("expected positive integers separated by commas, e.g. 256,1024; got {value!r}",
                                    value=value))
    lens = []
    for p in parts:
        if not p.isdigit() or int(p) < 1:
            raise click.BadParameter(tr("{p!r} is not a positive integer (expected e.g. 256,1024,4096)", p=p))
        lens.append(int(p))
    return tuple(lens)


def _backends(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    names = tuple(p.strip() for p in value.split(",") if p.strip())
    unknown = [n for n in names if n not in BACKENDS]
    if unknown or not names:
        raise click.BadParameter(tr("unknown backend {names}; valid backends: {backends}",
                                    names=', '.join(map(repr, unknown)) or repr(value), backends=', '.join(BACKENDS)))
    return names


@click.command(name="bench", cls=Command,
               help=N_("Measure every attention backend: median time, achieved GFLOP/s as a percent of this machine's "
                       "measured matrix-multiply rate, and peak extra memory, for the texts' shape and a sweep of T."))
@click.option("--quick", is_flag=True, help=N_("A small run (T = 256, 1024; few repeats): well under a minute."))
@click.option("--seq-lens", callback=_seq_lens, metavar="T,T,...", cls=FieldOption,
              values=lambda: {"seq_lens": ",".join(map(str, FULL_SEQ_LENS))},
              help=N_("Sequence lengths of the sweep, comma-separated [default: {seq_lens}]."))
@click.option("--backends", callback=_backends, metavar="NAME,...", cls=FieldOption,
              values=lambda: {"backends": ", ".join(available_backends()), "all": ", ".join(BACKENDS)},
              help=N_("Backends to measure, comma-separated, of {all} [default: those that run here: {backends}]."))
@click.option("--causal/--no-causal", default=None, help=N_("Only causal, or only non-causal [default: both]."))
@click.option("--json", "as_json", is_flag=True, help=N_("Print the results as JSON instead of a table."))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help=N_("Write bench.md, bench.json and the plots (bench_time_vs_T.png, bench_memory_vs_T.png) here."))
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help=N_("The sweep's batch size."))
@click.option("--d-model", type=click.IntRange(min=1), default=512, show_default=True, help=N_("The sweep's width d."))
@click.option("--heads", type=click.IntRange(min=1), default=8, show_default=True, help=N_("The sweep's heads."))
@click.option("--texts-shape/--no-texts-shape", default=True, show_default=True,
              help=N_("Also measure the texts' shape (B=8, T=256, d=512, 8 heads)."))
@click.option("--max-case-seconds", type=click.FloatRange(min=0, min_open=True),
              help=N_("Skip a case predicted to take longer [default: 60, or 5 with --quick]."))
@click.option("--max-memory-gib", type=click.FloatRange(min=0, min_open=True),
              help=N_("Skip a case predicted to need more memory [default: half the machine's RAM]."))
def command(quick: bool, seq_lens, backends, causal, as_json: bool, out_dir: Path | None, batch: int, d_model: int,
            heads: int, texts_shape: bool, max_case_seconds: float | None, max_memory_gib: float | None) -> None:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from attnlab.bench.plots import write_plots
    from attnlab.bench.runner import run_bench
    from attnlab.bench.tables import markdown, rich_table, write_atomic
    from attnlab.files import check_writable_dir

    if d_model % heads:
        raise click.BadParameter(tr("--heads {heads} must divide --d-model {d_model}", heads=heads,
                                    d_model=d_model), param_hint="--heads")
    if out_dir is not None:
        check_writable_dir(out_dir, "--out")  # before minutes of measuring, not after
    overrides: dict[str, Any] = {"batch": batch, "d_model": d_model, "num_heads": heads, "texts_shape": texts_shape}
    for key, value in (("seq_lens", seq_lens), ("backends", backends), ("max_case_seconds", max_case_seconds)):
        if value is not None:
            overrides[key] = value
    if causal is not None:
        overrides["is_causal"] = (causal,)
    if max_memory_gib is not None:
        overrides["max_memory_bytes"] = int(max_memory_gib * 2**30)
    config = BenchConfig.quick(**overrides) if quick else BenchConfig.full(**overrides)

    err = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True) as bar:
        task = bar.add_task(tr("machine limits"), total=len(config.cases()))

        def progress(case, status: str) -> None:
            bar.update(task, advance=1, description=f"{case.backend} T={case.seq_len} {status}")

        result = run_bench(config, progress=progress, status=lambda m: bar.update(task, description=m))
    data = result.as_dict()
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        console = Console()  # a pipe or a file: $COLUMNS, else 80; the table leaves out columns to fit
        console.print(rich_table(result, console.width))
    if out_dir is not None:
        plots = write_plots(result, out_dir)
        write_atomic(out_dir / "bench.json", json.dumps(data, indent=2) + "\n")
        write_atomic(out_dir / "bench.md", markdown(result, plots))
        err.print(tr("wrote {report}, bench.json and {plots}", report=out_dir / "bench.md",
                     plots=", ".join(plots) or tr("no plots")))
