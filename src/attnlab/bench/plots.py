"""Log-log plots of the sweep: time and peak memory against T, one line per backend."""

from __future__ import annotations

import io
from pathlib import Path

from attnlab.bench.runner import BenchResult
from attnlab.bench.tables import write_atomic
from attnlab.i18n import tr


def _guides(ax, pts_by_backend: list[list[tuple[int, float]]]) -> None:
    """Grey lines ∝ T and ∝ T² through the lowest first point: what "grows as T" and "as T²" look like."""
    starts = [pts[0] for pts in pts_by_backend if len(pts) > 1]
    if not starts:
        return
    t0, y0 = min(starts)
    t1 = max(pts[-1][0] for pts in pts_by_backend)
    for power, style in ((1, ":"), (2, "-.")):
        ax.plot([t0, t1], [y0, y0 * (t1 / t0) ** power], color="grey", linestyle=style, linewidth=1,
                label=f"∝ T{'²' if power == 2 else ''}")


def _figure(result: BenchResult, value, ylabel: str, title: str, guides: bool = False) -> bytes | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnlab.viz.fonts import setup_fonts

    with matplotlib.rc_context({"font.family": setup_fonts()}):  # a Chinese run's titles in Chinese, not boxes
        return _drawn(plt, result, value, ylabel, title, guides)


def _drawn(plt, result: BenchResult, value, ylabel: str, title: str, guides: bool) -> bytes | None:

    modes = result.config.is_causal
    fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 4.5), squeeze=False, sharey=True)
    drawn = False
    for ax, causal in zip(axes[0], modes, strict=True):
        lines = []
        for backend in result.config.backends:
            pts = sorted((r.case.seq_len, value(r)) for r in result.cases
                         if r.status == "ok" and r.case.group == "sweep" and r.case.backend == backend
                         and r.case.is_causal == causal and value(r))
            if pts:
                drawn = True
                lines.append(pts)
                ax.plot(*zip(*pts, strict=True), marker="o", label=backend,
                        linestyle="--" if backend.startswith("numpy") else "-")
        if guides:
            _guides(ax, lines)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(tr("sequence length T"))
        ax.set_title(tr("{title}, causal", title=title) if causal else tr("{title}, non-causal", title=title))
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # nothing measured (all skipped): no legend to draw
            ax.legend(fontsize=8)
    axes[0][0].set_ylabel(ylabel)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue() if drawn else None


def write_plots(result: BenchResult, out_dir: Path) -> list[str]:
    """Write ``bench_time_vs_T.png`` and ``bench_memory_vs_T.png`` into ``out_dir``; returns the names written."""
    cfg = result.config
    shape = f"B={cfg.batch}, d={cfg.d_model}, h={cfg.num_heads}"
    figures = {
        "bench_time_vs_T.png": _figure(result, lambda r: r.median_s and r.median_s * 1e3,
                                       tr("median time per call (ms)"), tr("Time, {shape}", shape=shape)),
        "bench_memory_vs_T.png": _figure(result, lambda r: r.peak_extra_bytes and r.peak_extra_bytes / 2**20,
                                         tr("peak extra memory (MiB)"), tr("Memory, {shape}", shape=shape),
                                         guides=True),
    }
    written = []
    for name, png in figures.items():
        if png is not None:
            write_atomic(Path(out_dir) / name, png)
            written.append(name)
    return written
