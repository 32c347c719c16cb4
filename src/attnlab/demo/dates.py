"""The demo's translation step: the original encoder-decoder Transformer learns to read dates written in seven
languages and write them as ISO 8601; then it translates one held-out day, early in training and at the end, and
shows where it looked.

It trains a fixed number of steps from a fixed seed, so every machine trains the same model and shows the same
translations; a slower machine only takes longer (the progress bar says how long).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from attnlab.data.pairs import Pair
from attnlab.data.tasks import DateItem, get_task
from attnlab.data.tokenizer import CharTokenizer
from attnlab.demo.context import Demo
from attnlab.generation.translation import Translation, translate
from attnlab.i18n import N_, _, language, tr
from attnlab.inspect.encoder_decoder import capture_translation
from attnlab.models import load_trained
from attnlab.models.checkpoint import read_state
from attnlab.terminal import titled_table
from attnlab.training import Seq2SeqTrainConfig, train_seq2seq
from attnlab.viz.alignment import alignment_figure
from attnlab.viz.figures import save_figure

#: a 0.24 M-parameter encoder-decoder (2 + 2 layers, 64 wide), 450 steps, the cosine ending at min_lr with the run.
#: Every checkpoint is kept: the demo shows the early ones' translations too.
DATES_DEMO: dict[str, Any] = dict(
    task="dates", preset="transformer-tiny", model=dict(d_model=64, num_heads=4, num_encoder_layers=2,
                                                        num_decoder_layers=2, d_ff=256, dropout=0.0, context_length=40),
    batch_size=64, learning_rate=2e-3, min_lr=1e-4, warmup_iters=50, max_iters=450, eval_interval=100, eval_iters=5,
    keep_checkpoints=6, train_pairs=30_000, val_pairs=200, seed=1337)
#: the checkpoints shown beside the last one: what the model gets wrong early on
EARLY_STEPS = (100, 200)
#: one day the model never saw, in one format of each language (held out: no locale of it is in training)
DAY = dt.date(2031, 7, 15)
EXAMPLES = (("en_US", "full"), ("en_GB", "long"), ("fr_FR", "long"), ("de_DE", "full"), ("es_ES", "medium"),
            ("zh_CN", "full"), ("ja_JP", "full"))
#: more held-out days (greedy decoding), for the exact-match rate beside the seven examples
HELD_OUT, HELD_OUT_SEED = 200, 2026
ALIGNMENT = "alignment.png"
FIELDS = (N_("year"), N_("month"), N_("day"))


def example_pairs() -> list[Pair]:
    """The examples as pairs (source in each language, the ISO date)."""
    task = get_task("dates")
    return [task.render(DateItem(DAY, locale, fmt)) for locale, fmt in EXAMPLES]


def listed(items: list[str]) -> str:
    """``a, b, and c`` in English, ``a、b和c`` in Chinese (babel's lists, in the reader's language)."""
    from babel.lists import format_list  # babel: the seq2seq extra, which the dates task needs anyway

    return format_list(items, locale=language())


def wrong_fields(got: str, expected: str) -> list[str] | None:
    """The parts of an ISO date (``year``, ``month``, ``day``) that ``got`` has wrong, or None if it is not of the
    form ``YYYY-MM-DD`` at all."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", got):
        return None
    return [name for name, a, b in zip(FIELDS, got.split("-"), expected.split("-"), strict=True) if a != b]


def verdict(got: str, expected: str) -> str:
    """``✓``, or ``✗`` and what is wrong: the month, the day and year, or the whole form."""
    if got == expected:
        return "✓"
    wrong = wrong_fields(got, expected)
    if wrong is None:
        return tr("✗ not a date")
    return tr("✗ {fields}", fields=listed([_(f) for f in wrong]))


@dataclass(frozen=True)
class Snapshot:
    """One checkpoint's translations of the examples and its exact-match rate on more held-out days."""

    step: int
    translations: list[Translation]
    held_out_right: float

    def right(self, pairs: list[Pair]) -> int:
        return sum(t.target == p.target for t, p in zip(self.translations, pairs, strict=True))

    def summary(self, pairs: list[Pair]) -> str:
        """What this checkpoint gets right and wrong, in one sentence."""
        counts = {f: 0 for f in FIELDS}
        malformed = 0
        for t, p in zip(self.translations, pairs, strict=True):
            wrong = wrong_fields(t.target, p.target)
            malformed += wrong is None
            for f in wrong or ():
                counts[f] += 1
        parts = [tr("{n} with the {field} wrong", n=n, field=_(f)) for f, n in counts.items() if n]
        parts += [tr("{n} not a date at all", n=malformed)] if malformed else []
        return tr("after {step} steps: {right}/{total} right{wrong}; {held:.0%} of {n} other held-out days",
                  step=self.step, right=self.right(pairs), total=len(pairs),
                  wrong=f" ({listed(parts)})" if parts else "", held=self.held_out_right, n=HELD_OUT)


def checkpoints(run: Path) -> dict[int, Path]:
    """The checkpoints a run kept, by step."""
    dirs = [d for d in sorted((run / "checkpoints").iterdir()) if d.is_dir() and not d.name.startswith(".")]
    return {read_state(d)["step"]: d for d in dirs}


def snapshots(run: Path, steps: tuple[int, ...] | None = None) -> list[Snapshot]:
    """The examples translated (beam 4) by the checkpoints of ``steps`` (:data:`EARLY_STEPS`) that the run kept,
    and by its last one."""
    kept, steps = checkpoints(run), EARLY_STEPS if steps is None else steps
    last = max(kept)
    held = get_task("dates").held_out(HELD_OUT, HELD_OUT_SEED)
    sources = [p.source for p in example_pairs()]
    shots = []
    for step in [s for s in steps if s in kept and s < last] + [last]:
        model, vocab = load_trained(kept[step], kind="seq2seq")
        assert isinstance(vocab, CharTokenizer)  # a translation model's vocabulary
        greedy = translate(model, vocab, [p.source for p in held])
        right = sum(t.target == p.target for t, p in zip(greedy, held, strict=True)) / len(held)
        shots.append(Snapshot(step, translate(model, vocab, sources, beam=4), right))
    return shots


def translations_table(pairs: list[Pair], shots: list[Snapshot], width: int | None = None) -> Table:
    """Sources down, checkpoints across: each translation and what it gets wrong, in columns that stay aligned
    whatever the script (rich measures each cell's width on the terminal: a CJK character takes two columns).

    No cell is wrapped, so no verdict is broken over two lines (``✗ year`` / ``and day``): where the table is wider
    than ``width`` (the terminal's), the checkpoints after the first are left out, the earliest first, down to the
    first and the last, and the caption says how many; if those two are still too wide, each verdict goes on a line
    of its own under its translation.
    """
    shown = list(shots)
    while True:
        table = _translations(pairs, shown, len(shots) - len(shown))
        if width is None or Console(width=10_000).measure(table).maximum <= width:
            return table
        if len(shown) <= 2:
            return _translations(pairs, shown, len(shots) - len(shown), stacked=True)
        del shown[1]


def _translations(pairs: list[Pair], shots: list[Snapshot], left_out: int, stacked: bool = False) -> Table:
    caption = tr("({n} earlier checkpoint(s) left out, to fit the terminal)", n=left_out) if left_out else None
    table = titled_table(tr("One held-out day ({day}) in seven languages, beam 4", day=DAY.isoformat()),
                         box=None, padding=(0, 1), pad_edge=False, highlight=False, caption=caption,
                         caption_justify="left")
    table.add_column(tr("source"), no_wrap=True)
    for shot in shots:
        table.add_column(tr("after {step} steps", step=shot.step), no_wrap=True)
    for i, pair in enumerate(pairs):
        table.add_row(escape(pair.source), *(translation_cell(s.translations[i].target, pair.target, stacked)
                                             for s in shots))
    return table


def translation_cell(got: str, expected: str, stacked: bool = False) -> str:
    """A translation and its verdict, as rich markup: a green ✓, or a red ✗ and what is wrong (``stacked``: on a
    line of its own)."""
    mark = verdict(got, expected)
    return f"{escape(got)}{chr(10) if stacked else ' '}" + ("[green]✓[/green]" if mark == "✓"
                                                          else f"[red]{escape(mark)}[/red]")


def explanation() -> str:
    """What the early mistakes mean (printed and in the report)."""
    return _("What a ✗ means: the answer has the form of a date, but the model has not yet learnt to read that part "
             "of it in that language. It learns the form first (four digits, two, two), then to put each part of the "
             "source in its place: a year's digits in their order, a day's digits, a month's name in seven languages "
             "and three formats (July, juillet, Juli, julio, 7月…). The day is held out in every language, so a right "
             "answer is read, not remembered; the rate on other held-out days says how often it reads right. The same "
             "seed and the same number of steps give the same model, and these same answers, on every machine.")


def draw_alignment(model, vocab, result: Translation, path: Path) -> Path:
    """The cross-attention (mean of the last layer's heads) of one translation, as a PNG."""
    cap = capture_translation(model, vocab, result.source, result.ids, name=N_("dates model"))
    return save_figure(alignment_figure(cap), path, dpi=100)


def translation_step(demo: Demo) -> None:
    """Train the dates model, translate a held-out day in seven languages early on and at the end, draw one
    alignment."""
    console = demo.console
    console.rule(tr("[bold]The original Transformer: dates in seven languages to ISO 8601, {steps} steps",
                    steps=DATES_DEMO["max_iters"]))
    out = demo.out_dir / "dates"
    try:
        result = train_seq2seq(Seq2SeqTrainConfig(**{**DATES_DEMO, "out": str(out)}), console=console,
                               overwrite=True)
    except ImportError as err:  # babel (the seq2seq extra) is missing
        console.print(tr("[yellow]skipped: {err}", err=err))
        return
    if result.stop_reason == "interrupted":
        raise KeyboardInterrupt
    console.print(tr("{step} steps, val loss {val_loss:.4f} ({tokens_per_s:,.0f} tokens/s on this machine)",
                     step=result.step, val_loss=result.evals[-1][2], tokens_per_s=result.tokens_per_s))
    pairs, shots = example_pairs(), snapshots(out)
    console.print(translations_table(pairs, shots, console.width))
    for shot in shots:
        console.print("  " + shot.summary(pairs), highlight=False)
    console.print(explanation())
    model, vocab = load_trained(out, kind="seq2seq")
    french = shots[-1].translations[2]
    path = draw_alignment(model, vocab, french, out / ALIGNMENT)
    console.print(tr("Where the decoder looked while writing {target!r} from {source!r}: {path}",
                     target=french.target, source=french.source, path=path))
