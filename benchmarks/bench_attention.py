"""Forward time and peak memory of every attention backend, against torch's own SDPA in the same run.

    .venv/bin/python benchmarks/bench_attention.py            # full run, writes benchmarks/results/attention.md
    .venv/bin/python benchmarks/bench_attention.py --quick    # small shapes only, a few seconds

Each case runs in a fresh subprocess, so its peak extra memory (the ru_maxrss high-water mark over the
first call, minus what the inputs already held) is its own. Times are medians after a warm-up call.
FLOPs: non-causal 4·B·H·T²·D; causal counts the useful half for every implementation.

The MHA block is timed as users run a module they call themselves, accelerated (``attnlab.fast.accelerate``: q, k
and v as one product), and beside it as built (``plain``, the book's three ``nn.Linear`` maps).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from attnlab.bench.machine import machine_facts
from attnlab.files import atomic_write_text

SHAPES = [(8, 8, 256, 64), (1, 12, 1024, 64), (1, 12, 4096, 64), (1, 8, 16384, 64)]
QUICK_SHAPES = [(2, 4, 128, 32), (1, 4, 512, 32)]
IMPLS = ["torch", "auto", "sdpa", "chunked", "math"]
MHA_IMPLS = ["mha_attnlab", "mha_attnlab_plain", "mha_torch", "mha_hand"]
RESULTS = Path(__file__).resolve().parent / "results" / "attention.md"


# ---------------------------------------------------------------- one case, in its own process
def _attention_fn(impl: str, b: int, h: int, t: int, d: int, is_causal: bool):
    import torch
    import torch.nn.functional as F

    from attnlab.functional import scaled_dot_product_attention

    q, k, v = torch.randn(3, b, h, t, d).unbind(0)
    if impl == "torch":
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    return lambda: scaled_dot_product_attention(q, k, v, is_causal=is_causal, backend=impl)


def _mha_fn(impl: str, t: int, d: int = 768, heads: int = 12):
    import torch
    import torch.nn.functional as F

    from attnlab.attention import MultiHeadAttention
    from attnlab.fast import accelerate

    ours = MultiHeadAttention(d, d, num_heads=heads, qkv_bias=True, is_causal=False).eval()
    x = torch.randn(1, t, d)
    if impl == "mha_attnlab_plain":
        return lambda: ours(x)
    if impl == "mha_attnlab":
        fast = accelerate(ours)
        return lambda: fast(x)
    if impl == "mha_torch":
        ref = torch.nn.MultiheadAttention(d, heads, batch_first=True).eval()
        return lambda: ref(x, x, x)  # need_weights=True, its default
    lin = [torch.nn.Linear(d, d) for _ in range(4)]

    def hand():
        q, k, v = (m(x).view(1, t, heads, d // heads).transpose(1, 2) for m in lin[:3])
        return lin[3](F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(1, t, d))

    return hand


def _build(impl: str, spec: dict, t: int):
    if impl.startswith("mha"):
        return _mha_fn(impl, t)
    b, h = (spec["b"], spec["h"]) if t == spec["t"] else (1, 1)
    return _attention_fn(impl, b, h, t, spec["d"], spec["causal"])


def run_case(spec: dict) -> dict:
    """Time one implementation at one shape against its reference; print JSON. Runs inside the subprocess.

    The reference (torch's SDPA, or attnlab's MHA block for the MHA variants) is timed *interleaved*
    with the case, call for call, so both see the same machine: the ratio is robust to a noisy
    neighbour even when the absolute times are not.
    """
    import torch

    torch.manual_seed(0)
    impl, ref_impl = spec["impl"], ("mha_attnlab" if spec["impl"].startswith("mha") else "torch")
    # the modules are built outside inference mode, as a user builds them (a packed fast twin stamps its weights'
    # versions, which tensors made in inference mode lack), and called in it. One-time costs (lazy imports, kernel
    # set-up) are paid at a tiny size first, so the peak is the case's own
    warm = _build(impl, spec, 8)
    with torch.inference_mode():
        warm()
    fn = _build(impl, spec, spec["t"])
    with torch.inference_mode():
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        fn()
        first = time.perf_counter() - start
        peak_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    ref = fn if impl == ref_impl else _build(ref_impl, spec, spec["t"])
    with torch.inference_mode():
        fn(), ref()  # warm-up
        times, ref_times, budget = [], [], time.perf_counter() + spec["seconds"]
        while len(times) < spec["min_reps"] or (time.perf_counter() < budget and len(times) < 40):
            for f, sink in ((fn, times), (ref, ref_times)):
                start = time.perf_counter()
                f()
                sink.append(time.perf_counter() - start)
    q1, _, q3 = statistics.quantiles(times, n=4) if len(times) > 1 else (times[0],) * 3
    ms, ref_ms = statistics.median(times) * 1e3, statistics.median(ref_times) * 1e3
    return {"first_ms": first * 1e3, "ms": ms, "iqr_ms": (q3 - q1) * 1e3, "reps": len(times), "peak_mb": peak_mb,
            "ref": ref_impl, "ref_ms": ref_ms, "vs_ref": ms / ref_ms}


def in_subprocess(spec: dict) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--case", json.dumps(spec)], capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["killed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- the sweep
def math_bytes(b: int, h: int, t: int) -> int:
    # scores and weights: two fp32 (T, T) matrices per head live at once
    return 2 * b * h * t * t * 4


def available_bytes() -> int:
    with open("/proc/meminfo") as f:
        info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f}
    return info.get("MemAvailable", 0)


def sweep(shapes, quick: bool) -> list[dict]:
    rows = []
    for b, h, t, d in shapes:
        for causal in (False, True):
            row = {"shape": (b, h, t, d), "causal": causal, "results": {}}
            for impl in IMPLS:
                if impl == "math" and math_bytes(b, h, t) > 0.6 * available_bytes():
                    gib = math_bytes(b, h, t) / 2**30
                    row["results"][impl] = {"skipped": f"needs ≈{gib:.0f} GiB for the (T, T) scores and weights"}
                    continue
                spec = {"impl": impl, "b": b, "h": h, "t": t, "d": d, "causal": causal,
                        "seconds": 0.5 if quick else 2.0, "min_reps": 3 if t >= 8192 else 5}
                row["results"][impl] = in_subprocess(spec)
                print(f"  {(b, h, t, d)} causal={causal} {impl}: {row['results'][impl]}", flush=True)
            rows.append(row)
    return rows


def mha_sweep(quick: bool) -> dict:
    t = 128 if quick else 1024
    out = {}
    for impl in MHA_IMPLS:
        out[impl] = in_subprocess({"impl": impl, "t": t, "seconds": 0.5 if quick else 3.0, "min_reps": 10})
        print(f"  MHA T={t} {impl}: {out[impl]}", flush=True)
    return {"t": t, "results": out}


# ---------------------------------------------------------------- the report
def machine_lines() -> list[str]:
    return [machine_facts().summary(), f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"]


def gflops(shape, causal, ms):
    b, h, t, d = shape
    return 4 * b * h * t * t * d / (2 if causal else 1) / (ms * 1e-3) / 1e9


def cell(r: dict, key: str = "ms", fmt: str = "{:.1f}") -> str:
    if "skipped" in r:
        return "skipped"
    if "error" in r:
        return "error"
    return fmt.format(r[key])


def ratio(a: dict, b: dict, key: str = "ms") -> float | None:
    return a[key] / b[key] if key in a and key in b and b[key] else None


def vs_torch(a: dict) -> float | None:
    """a's time over torch SDPA's, both timed interleaved in a's process."""
    return a.get("vs_ref")


def fmt_ratio(x: float | None, target: float | None = None) -> str:
    if x is None:
        return "–"
    mark = "" if target is None else (" ✓" if x <= target else " ✗")
    return f"{x:.2f}{mark}"


def report(rows: list[dict], mha: dict, quick: bool) -> str:
    lines = ["# Attention backends: forward time and peak memory", "",
             "Written by `benchmarks/bench_attention.py`" + (" --quick" if quick else "") + ". fp32, inference mode.",
             "", *[f"- {f}" for f in machine_lines()], "",
             "Times are medians (ms) after a warm-up; `torch` is `torch.nn.functional.scaled_dot_product_attention`.",
             "Ratios are robust to a noisy machine: each case is timed call for call *interleaved* with torch's SDPA",
             "in its own process, and a ratio compares those two medians (chunked/math divides the two cases'",
             "ratios to torch). Peak MB is the extra resident memory of the first call, in a fresh process",
             "(about 10 MB of it is a one-time floor). Causal GFLOP/s count the useful half of the work.", "",
             "| (B,H,T,D) | causal | torch | auto | sdpa | chunked | math | auto/torch (≤1.05) | "
             "chunked/math (≤1.25 at T≥1024) | peak MB torch / auto / chunked / math | chunked mem / math (≤1/8 at "
             "T=4096) | chunked GFLOP/s | auto GFLOP/s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        r = row["results"]
        t = row["shape"][2]
        mem = " / ".join(cell(r[i], "peak_mb", "{:.0f}") for i in ("torch", "auto", "chunked", "math"))
        speed = ratio(r["chunked"], r["math"], "vs_ref")  # each normalised by torch, timed beside it
        memr = ratio(r["chunked"], r["math"], "peak_mb")
        lines.append(
            f"| {row['shape']} | {'y' if row['causal'] else 'n'} | "
            + " | ".join(cell(r[i]) for i in IMPLS)
            + f" | {fmt_ratio(vs_torch(r['auto']), 1.05)}"
            f" | {fmt_ratio(speed, 1.25 if t >= 1024 else None)} | {mem}"
            f" | {fmt_ratio(memr, 0.125 if t == 4096 else None)}"
            f" | {gflops(row['shape'], row['causal'], r['chunked']['ms']) if 'ms' in r['chunked'] else 0:.0f}"
            f" | {gflops(row['shape'], row['causal'], r['auto']['ms']) if 'ms' in r['auto'] else 0:.0f} |"
        )
    skipped = {str(row["shape"]): row["results"]["math"]["skipped"]
               for row in rows if "skipped" in row["results"]["math"]}
    for shape, why in skipped.items():
        lines.append(f"\n`math` at {shape} was not run: it {why}, more than this machine can spare.")
    m = mha["results"]
    lines += ["", f"## Multi-head attention block (d_model 768, 12 heads, B=1, T={mha['t']}, eval, no grad)", "",
              "| module | median ms | IQR ms | peak MB | speed-up of attnlab |", "|---|---|---|---|---|"]
    names = {"mha_attnlab": "attnlab `MultiHeadAttention` (auto backend)",
             "mha_attnlab_plain": "attnlab `MultiHeadAttention`, plain (as built, not accelerated)",
             "mha_torch": "`torch.nn.MultiheadAttention` (need_weights=True, its default)",
             "mha_hand": "hand-written 4×Linear + `F.scaled_dot_product_attention`"}
    for impl in MHA_IMPLS:
        sp = m[impl].get("vs_ref")  # its time over attnlab's, timed interleaved
        target = {"mha_torch": "target ≥ 1.3", "mha_hand": "target ≥ 1/1.05 = 0.95"}.get(impl, "")
        lines.append(f"| {names[impl]} | {cell(m[impl])} | {cell(m[impl], 'iqr_ms')} | "
                     f"{cell(m[impl], 'peak_mb', '{:.0f}')} | {fmt_ratio(sp)} {target} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small shapes only (a few seconds)")
    parser.add_argument("--out", type=Path, default=None, help=f"markdown report (default {RESULTS})")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(json.loads(args.case))))
        return
    rows = sweep(QUICK_SHAPES if args.quick else SHAPES, args.quick)
    text = report(rows, mha_sweep(args.quick), args.quick)
    out = args.out or (RESULTS.with_name("attention-quick.md") if args.quick else RESULTS)
    atomic_write_text(out, text)
    print(text)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
