"""The demo's translation step: the original encoder-decoder Transformer learns to read dates written in seven
languages and write them as ISO 8601, in about a minute; then it translates a few and shows where it looked."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from attnlab.data.pairs import Pair
from attnlab.data.tasks import DateItem, get_task
from attnlab.demo.context import Demo
from attnlab.generation.translation import Translation, translate
from attnlab.i18n import N_, tr
from attnlab.inspect.encoder_decoder import capture_translation
from attnlab.models import load_trained
from attnlab.training import Seq2SeqTrainConfig, train_seq2seq
from attnlab.viz.alignment import alignment_figure
from attnlab.viz.figures import save_figure

#: ≈1 minute on 2 CPU cores: a 0.24 M-parameter encoder-decoder (2 + 2 layers, 64 wide), stopped by time
DATES_DEMO = dict(task="dates", preset="transformer-tiny", model=dict(d_model=64, num_heads=4, num_encoder_layers=2,
                  num_decoder_layers=2, d_ff=256, dropout=0.0, context_length=40), batch_size=64,
                  learning_rate=2e-3, min_lr=1e-4, warmup_iters=100, max_iters=900, eval_interval=300, eval_iters=5,
                  train_pairs=30_000, val_pairs=200, time_budget=1.0, seed=1337)
#: one day the model never saw, in one format of each language (held out: no locale of it is in training)
DAY = dt.date(2031, 7, 15)
EXAMPLES = (("en_US", "full"), ("en_GB", "long"), ("fr_FR", "long"), ("de_DE", "full"), ("es_ES", "medium"),
            ("zh_CN", "full"), ("ja_JP", "full"))
ALIGNMENT = "alignment.png"


def example_pairs():
    """The examples as pairs (source in each language, the ISO date)."""
    task = get_task("dates")
    return [task.render(DateItem(DAY, locale, fmt)) for locale, fmt in EXAMPLES]


def translations_table(pairs: list[Pair], results: list[Translation]) -> Table:
    """Source, translation and a mark per row, in columns that stay aligned whatever the script (rich measures
    each cell's width on the terminal: a CJK character takes two columns)."""
    table = Table(box=None, padding=(0, 1), highlight=False)
    for header in (tr("source"), "", tr("translation (beam 4)"), ""):
        table.add_column(header, no_wrap=True)
    for pair, got in zip(pairs, results, strict=True):
        mark = "[green]✓[/green]" if got.target == pair.target else tr("[red]✗ (expected {target})[/red]",
                                                                       target=escape(pair.target))
        table.add_row(escape(pair.source), "->", escape(got.target), mark)
    return table


def draw_alignment(model, vocab, result: Translation, path: Path) -> Path:
    """The cross-attention (mean of the last layer's heads) of one translation, as a PNG."""
    cap = capture_translation(model, vocab, result.source, result.ids, name=N_("dates model"))
    return save_figure(alignment_figure(cap), path, dpi=100)


def translation_step(demo: Demo) -> None:
    """Train the dates model for about a minute, translate a held-out day in seven languages, draw one alignment."""
    console = demo.console
    console.rule(tr("[bold]The original Transformer: dates in seven languages to ISO 8601, about a minute"))
    out = demo.out_dir / "dates"
    try:
        result = train_seq2seq(Seq2SeqTrainConfig(**{**DATES_DEMO, "out": str(out)}), console=console,
                               overwrite=True)
    except ImportError as err:  # babel (the seq2seq extra) is missing
        console.print(tr("[yellow]skipped: {err}", err=err))
        return
    if result.stop_reason == "interrupted":
        raise KeyboardInterrupt
    console.print(tr("{step} steps, {tokens_per_s:,.0f} tokens/s, val loss {evals:.4f}", step=result.step,
                     tokens_per_s=result.tokens_per_s, evals=result.evals[-1][2]))
    model, vocab = load_trained(out, kind="seq2seq")
    pairs = example_pairs()
    results = translate(model, vocab, [p.source for p in pairs], beam=4)
    console.print(translations_table(pairs, results))
    path = draw_alignment(model, vocab, results[2], out / ALIGNMENT)
    console.print(tr("Where the decoder looked while writing {target!r} from {source!r}: {path}",
                     target=results[2].target, source=results[2].source, path=path))
