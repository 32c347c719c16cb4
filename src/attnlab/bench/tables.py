"""The results, three ways: a rich table for the terminal, JSON, and a markdown report with the
machine's facts, the counting convention and the targets."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console
from rich.table import Table

from attnlab.bench.cases import QUICK_SEQ_LENS, SKIPPED, BenchConfig
from attnlab.bench.runner import BenchResult, CaseResult
from attnlab.bench.worker import FAILED
from attnlab.files import atomic_write_bytes, atomic_write_text
from attnlab.i18n import N_, _, made_from, tr
from attnlab.terminal import titled_table

FLOP_NOTE = ("FLOPs = QKV projections 2·3·B·T·d² + scores 2·B·h·P·d_h + weighted sum 2·B·h·P·d_h + output "
             "projection 2·B·T·d² (a multiply-add is 2 FLOPs); P = T² query-key pairs, or T(T+1)/2 when causal "
             "(only the pairs a query may attend, about half), so causal GFLOP/s count useful "
             "work. Softmax, masking and biases are not counted.")


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write a file whole or not at all."""
    return atomic_write_text(path, data) if isinstance(data, str) else atomic_write_bytes(path, data)


def _num(value: float | None, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


ONE_CALL = N_("one call")


def _row(r: CaseResult, matmul: float, shown=lambda text: text) -> list[str]:
    """A case's cells, its words passed through ``shown`` (the terminal's table: the reader's language)."""
    c = r.case
    spread = r.spread_s
    g = r.gflops()
    note = _note(r)
    return [f"{c.batch}×{c.seq_len}", c.backend, shown("yes" if c.is_causal else "no"),
            _num(r.median_s and r.median_s * 1e3, ".2f"),
            "–" if spread is None else f"{spread[0] * 1e3:.3g}–{spread[1] * 1e3:.3g}",
            str(len(r.times)) if r.times else "–", _num(g, ".1f"), _num(g and 100 * g / matmul, ".0f"),
            _num(r.peak_extra_bytes and r.peak_extra_bytes / 2**20, ".1f"), shown(note)]


def _note(r: CaseResult) -> str:
    return r.reason if r.status != "ok" else (ONE_CALL if r.plan.single_call else "")


def shown_words(text: str) -> str:
    """A cell of the results in the reader's language: yes or no, a note, why a case was skipped or failed."""
    return made_from(text, (*SKIPPED, *FAILED)) or (_(text) if text else text)


YES_NO = (N_("yes"), N_("no"))
HEADERS = ["B×T", N_("backend"), N_("causal"), N_("median ms"), N_("spread ms"), "n", "GFLOP/s", N_("% matmul"),
           N_("peak MiB"), N_("note")]


def limits_line(result: BenchResult) -> str:
    """The machine's limits in one line: matrix multiply per dtype, memory read and copy bandwidth."""
    parts = [tr("matmul fp32 {gflops:.0f} GFLOP/s", gflops=result.matmul["value"])]
    if result.matmul_bf16:
        parts.append(tr("bf16 {gflops:.0f} GFLOP/s", gflops=result.matmul_bf16["value"]))
    if result.read_bandwidth:
        parts.append(tr("memory read {gbs:.1f} GB/s", gbs=result.read_bandwidth["value"]))
    parts.append(tr("copy {gbs:.1f} GB/s (read + write)", gbs=result.bandwidth["value"]))
    return tr("Limits: {limits}", limits=_("; ").join(parts))


#: the columns a narrow terminal leaves out, in this order, before it would wrap a cell (their numbers are in
#: bench.json and bench.md); the first columns and the note stay
OPTIONAL = (N_("spread ms"), "n", "GFLOP/s", N_("peak MiB"))


def rich_table(result: BenchResult, width: int | None = None) -> Table:
    """The results for the terminal, in the reader's language; wider than ``width`` (the terminal's), it leaves out
    the :data:`OPTIONAL` columns, in order, and says which. A case above 100 % of the matrix-multiply limit gets
    a word why: the limit was measured lower than what the case then reached (a busy machine)."""
    left_out: list[str] = []
    notes = any(r.status != "ok" or r.plan.single_call for r in result.cases)
    while width is not None and len(left_out) < len(OPTIONAL):
        numbers = Console(width=10_000).measure(_rich_table(result, left_out, notes=False)).maximum
        if numbers + (NOTE_ROOM if notes else 0) <= width:
            break
        left_out.append(OPTIONAL[len(left_out)])
    return _rich_table(result, left_out)


#: the terminal cells a column of notes keeps, at the least, before a narrow terminal leaves out a column of numbers
NOTE_ROOM = 30


def _rich_table(result: BenchResult, left_out: list[str], notes: bool = True) -> Table:
    matmul = result.matmul["value"]
    captions = [limits_line(result)]
    if any(r.status == "ok" and r.gflops() and r.gflops() > matmul for r in result.cases):
        captions.append(tr("% matmul above 100: the case ran faster than the limit measured at the start of the "
                           "run, which a busy machine measures low; run again on an idle one for a limit to trust."))
    if left_out:
        captions.append(tr("Left out to fit the terminal: {columns} (in bench.json and bench.md with --out).",
                           columns=", ".join(_(h) for h in left_out)))
    table = titled_table(tr("Multi-head attention forward, d={d_model}, h={num_heads} (matmul limit {matmul:.0f} "
                            "GFLOP/s)", d_model=result.config.d_model, num_heads=result.config.num_heads,
                            matmul=matmul), caption="\n".join(captions), caption_justify="left")
    kept = [k for k, h in enumerate(HEADERS) if h not in left_out]
    for k in kept:
        h = HEADERS[k]
        text = h in ("backend", "note")
        table.add_column(_(h), justify="left" if text else "right", no_wrap=not text, overflow="fold")
    cases = result.cases
    for i, r in enumerate(cases):
        key = (r.case.group, r.case.seq_len, r.case.is_causal)
        last = i + 1 == len(cases) or key != (cases[i + 1].case.group, cases[i + 1].case.seq_len,
                                              cases[i + 1].case.is_causal)
        cells = _row(r, matmul, shown_words)[:-1] + ([shown_words(_note(r))] if notes else [""])
        table.add_row(*(cells[k] for k in kept), style="dim" if r.status != "ok" else None, end_section=last)
    return table


def _ok(result: BenchResult, name: str, is_causal: bool, group: str = "sweep") -> dict[int, CaseResult]:
    return {r.case.seq_len: r for r in result.cases
            if r.status == "ok" and r.case.backend == name and r.case.is_causal == is_causal
            and r.case.group == group}


def _median_s(result: CaseResult) -> float:
    """An "ok" case's median time: it ran, so it has its timed calls."""
    median = result.median_s
    assert median is not None
    return median


def _gflops(result: CaseResult) -> float:
    """An "ok" case's rate (see :func:`_median_s`)."""
    rate = result.gflops()
    assert rate is not None
    return rate


def _slope(points: Mapping[int, float]) -> float | None:
    """Least-squares slope of log(value) against log(T): 2 means ∝ T², 1 means ∝ T."""
    pts = [(math.log(t), math.log(v)) for t, v in points.items() if v and v > 0]
    if len(pts) < 2:
        return None
    mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


def targets(result: BenchResult) -> list[str]:
    """The goals, each with what this run measured (reported, not asserted)."""
    lines = []
    for causal in result.config.is_causal:
        np_math, pt_math = _ok(result, "numpy-math", causal), _ok(result, "math", causal)
        ratios = [f"T={t}: {_median_s(np_math[t]) / _median_s(pt_math[t]):.2f}×"
                  for t in sorted(np_math) if t >= 1024 and t in pt_math]
        if ratios:
            lines.append(f"NumPy math / torch math time ({'causal' if causal else 'non-causal'}; goal ≤ 1.5× at "
                         f"T ≥ 1024): {', '.join(ratios)}")
    at_4096 = [r for r in result.cases if r.status == "ok" and r.case.group == "sweep" and not r.case.is_causal
               and r.case.seq_len == 4096]
    if at_4096:
        best = max(at_4096, key=_gflops)
        pct = 100 * _gflops(best) / result.matmul["value"]
        lines.append(f"Fastest backend at non-causal T=4096 (goal ≥ 70% of matmul): {best.case.backend}, "
                     f"{best.gflops():.0f} GFLOP/s = {pct:.0f}% of {result.matmul['value']:.0f}")
    for backend in result.config.backends:
        # Memory above a fixed floor: only the points where it has clearly left the floor (≥ 16 MiB).
        pts = {t: r.peak_extra_bytes for t, r in _ok(result, backend, False).items()
               if r.peak_extra_bytes and r.peak_extra_bytes >= 16 * 2**20}
        s = _slope(pts)
        if s is not None:
            lines.append(f"Peak memory of {backend} grows as T^{s:.2f} (non-causal, T = {min(pts)}…{max(pts)})")
    return lines


def command_line(cfg: BenchConfig) -> str:
    """The ``attnlab bench`` command that runs ``cfg`` (options that differ from the full run's defaults)."""
    full = BenchConfig.full()
    quick = cfg.is_quick
    args = ["attnlab bench"] + (["--quick"] if quick else [])
    if cfg.seq_lens != (QUICK_SEQ_LENS if quick else full.seq_lens):
        args.append("--seq-lens " + ",".join(map(str, cfg.seq_lens)))
    if cfg.backends != full.backends:
        args.append("--backends " + ",".join(cfg.backends))
    if cfg.is_causal != full.is_causal:
        args.append("--causal" if cfg.is_causal == (True,) else "--no-causal")
    for flag, name in (("--batch", "batch"), ("--d-model", "d_model"), ("--heads", "num_heads")):
        if getattr(cfg, name) != getattr(full, name):
            args.append(f"{flag} {getattr(cfg, name)}")
    if not cfg.texts_shape:
        args.append("--no-texts-shape")
    return " ".join([*args, "--out DIR"])


def _optional_limit(name: str, limit: dict | None) -> list[str]:
    if not limit:
        return []
    return [f"- {name}: **{limit['value']:.1f} {limit['unit']}** ({limit['what']}, best of the repeats; median "
            f"{limit['median']:.1f}, slowest {limit['low']:.1f})"]


def markdown(result: BenchResult, plots: list[str]) -> str:
    m, mm, bw = result.machine, result.matmul, result.bandwidth
    cfg = result.config
    out = ["# attnlab bench: multi-head attention forward on this machine", "",
           f"- CPU: {m['cpu']}, {m['cores']} cores, torch threads {m['torch_threads']}, {m['memory_gib']} GiB RAM",
           f"- Python {m['python']}, torch {m['torch']}, numpy {m['numpy']}",
           f"- Matrix-multiply limit: **{mm['value']:.0f} GFLOP/s** ({mm['what']}, best of the repeats; median "
           f"{mm['median']:.0f}, slowest {mm['low']:.0f})",
           *_optional_limit("Matrix-multiply limit, bf16", result.matmul_bf16),
           *_optional_limit("Memory read bandwidth (what decoding streams its weights at)", result.read_bandwidth),
           f"- Memory bandwidth: **{bw['value']:.1f} GB/s** ({bw['what']}, read + write, best of the repeats; "
           f"median {bw['median']:.1f}, slowest {bw['low']:.1f})",
           f"- Whole run: {result.seconds:.0f} s. Memory limit for a case: {result.memory_limit_bytes / 2**30:.1f} GiB;"
           f" time budget per case: {cfg.max_case_seconds:.0f} s, for the cases together: "
           f"{cfg.max_total_seconds:.0f} s.", "",
           "Each case is a `MultiHeadAttention` (torch, `inference_mode`) or `attnlab.numpy.multi_head_attention` "
           "forward: " + ("the texts' shape B=8, T=256, d=512, 8 heads; " if cfg.texts_shape else "")
           + f"the sweep B={cfg.batch}, d={cfg.d_model}, {cfg.num_heads} heads. Each case runs in a fresh process; "
           "its first call measures the peak extra memory (high-water resident set over the one before the call) "
           "and warms up; after one more warm-up call, the median and spread (interquartile range, or min–max "
           "under 4 calls) are over the `n` timed calls. A call predicted to last longer than "
           f"{cfg.long_call_seconds:.0f} s is timed once: on its first run for the O(T)-memory backends, on a "
           "second run for the math ones (their first call faults in a fresh score matrix).", "", FLOP_NOTE, "",
           "## Targets (reported, not asserted)", ""]
    out += [f"- {line}" for line in targets(result)] or ["- (not enough cases for the targets)"]
    out += ["", "## Results", "", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    out += ["| " + " | ".join(_row(r, mm["value"])) + " |" for r in result.cases]
    if plots:
        out += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    out += ["", f"Reproduce: `{command_line(cfg)}`", ""]
    return "\n".join(out)
