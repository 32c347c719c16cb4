"""attnlab on an NVIDIA GPU: attention, training and decoding, every figure a ratio to a reference timed in the
same run, call for call.

    PYTHONPATH=src python benchmarks/bench_gpu.py                 # the full run: writes benchmarks/results/gpu.md
    PYTHONPATH=src python benchmarks/bench_gpu.py --quick         # small sizes: a smoke test of the run on a GPU
    PYTHONPATH=src python benchmarks/bench_gpu.py --dry-run --out /tmp/gpu.md   # no GPU: made-up timings, to check
                                                                                # the report's code (the tests do)
    python benchmarks/bench_gpu.py --from-log run1.log run2.log   # the report of what runs printed (a run stopped
                                                                  # at a time limit prints its figures, no report)

A. Attention, bf16, forward and forward + backward, every backend against torch's
   ``F.scaled_dot_product_attention`` at (4,16,4096,64), (1,16,16384,128), (8,12,1024,64), causal and not, and
   at (4,16,4096,64) with a padding mask (every other sequence a quarter padding), causal and not.
B. Training GPT-2 small (B=8, T=1024, AdamW, clip 1.0) against Hugging Face's ``GPT2LMHeadModel`` with
   ``attn_implementation="sdpa"``, starting from the same weights: dropout 0 and 0.1, fp32 and bf16 autocast.
   attnlab's model is trained as the trainer trains it, its modules swapped for their fast twins
   (``attnlab.fast.swap_modules``), and beside it as built ("plain", the book's modules).
C. Greedy decoding with GPT-2 small in bf16 (the same weights in both), a 32-token prompt and 256 new tokens,
   batch 1 and 8: ``generate`` eager and ``compile=True`` against Hugging Face's ``generate``; and both again on the
   book's modules (``GenerationConfig(accelerate=False)``, "plain").

Timing: all the functions of one comparison are called in turn, the order rotating each round, each call between
two CUDA events, after a warm-up call each; a figure is the median. A ratio is a speed ratio, reference time over
ours: above 1 we are faster. TF32 is allowed for float32 matmuls (as ``attnlab train`` does) for both sides.
Finally the run prints, and writes, the rows of ``attnlab.functional.backends.FLASH_FASTER`` it supports.
"""

from __future__ import annotations

import argparse
import ast
import random
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "gpu.md"
DEVICE = "cuda"
IMPLS = ("flash", "sdpa", "auto", "chunked", "math")


@dataclass(frozen=True)
class Sizes:
    shapes: tuple[tuple[int, int, int, int], ...]  # (B, H, T, D) of the attention cases, causal and not
    padded: tuple[int, int, int, int]              # the padding-masked attention case
    train_batch: int
    train_t: int
    prompt: int
    new_tokens: int
    seconds: float                                 # timing budget per comparison


FULL = Sizes(((4, 16, 4096, 64), (1, 16, 16384, 128), (8, 12, 1024, 64)), (4, 16, 4096, 64), 8, 1024, 32, 256, 3.0)
QUICK = Sizes(((2, 4, 1024, 64),), (2, 4, 1024, 64), 2, 256, 16, 32, 0.5)


@dataclass(frozen=True)
class AttentionCase:
    shape: tuple[int, int, int, int]
    causal: bool
    padding: bool

    @property
    def mask_kind(self) -> str:
        """As :class:`attnlab.functional.CallKind` names it."""
        return "bool" if self.padding else "causal" if self.causal else "none"

    @property
    def label(self) -> str:
        parts = (["padding"] if self.padding else []) + (["causal"] if self.causal else [])
        return " + ".join(parts) or "none"


def attention_cases(sizes: Sizes) -> list[AttentionCase]:
    plain = [AttentionCase(s, causal, False) for s in sizes.shapes for causal in (False, True)]
    return plain + [AttentionCase(sizes.padded, causal, True) for causal in (False, True)]


# ---------------------------------------------------------------- timing, on the GPU
def interleaved(fns: dict[str, Callable[[], object]], seconds: float, min_rounds: int = 5,
                max_rounds: int = 200, warmup: int = 1) -> dict[str, float | str]:
    """Median milliseconds of each function, timed call for call in turn; "OOM" or the error where one fails."""
    import torch

    results: dict[str, float | str] = {}
    for name, fn in list(fns.items()):  # the warm-up calls; what fails is dropped, with the reason
        try:
            for _ in range(warmup):
                fn()
        except torch.cuda.OutOfMemoryError:
            results[name] = "OOM"
        except Exception as err:  # a failing case is reported in its cell, the run goes on
            results[name] = f"error: {type(err).__name__}"
        if name in results:
            del fns[name]
            torch.cuda.empty_cache()
    names, times = list(fns), {name: [] for name in fns}
    torch.cuda.synchronize()
    deadline, rounds = time.perf_counter() + seconds, 0
    while names and (rounds < min_rounds or (time.perf_counter() < deadline and rounds < max_rounds)):
        order = names[rounds % len(names):] + names[: rounds % len(names)]
        events = []
        for name in order:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fns[name]()
            end.record()
            events.append((name, start, end))
        torch.cuda.synchronize()
        for name, start, end in events:
            times[name].append(start.elapsed_time(end))
        rounds += 1
    return {**results, **{name: statistics.median(t) for name, t in times.items()}}


# ---------------------------------------------------------------- A. attention
def attention_inputs(case: AttentionCase):
    import torch

    b, h, t, d = case.shape
    q, k, v = (torch.randn(b, h, t, d, device=DEVICE, dtype=torch.bfloat16) for _ in range(3))
    mask = None
    if case.padding:  # every other sequence is a quarter padding
        lengths = torch.tensor([t, t * 3 // 4] * b, device=DEVICE)[:b]
        mask = (torch.arange(t, device=DEVICE)[None, :] < lengths[:, None])[:, None, None, :]
    return q, k, v, mask


def measure_attention(case: AttentionCase, backward: bool, sizes: Sizes) -> dict[str, float | str]:
    """ms of torch's SDPA ("torch") and of every backend, one pass (forward, or forward + backward)."""
    import torch
    import torch.nn.functional as F

    from attnlab.functional import scaled_dot_product_attention

    q, k, v, mask = attention_inputs(case)
    merged = mask  # torch refuses a mask with is_causal: the reference gets the two merged, as our sdpa does
    if mask is not None and case.causal:
        merged = mask & torch.ones(q.shape[2], q.shape[2], dtype=torch.bool, device=DEVICE).tril()
    ops = {"torch": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=merged,
                                                                    is_causal=case.causal and mask is None)}
    for impl in IMPLS:
        ops[impl] = lambda q, k, v, impl=impl: scaled_dot_product_attention(q, k, v, mask, is_causal=case.causal,
                                                                             backend=impl)
    if backward:
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        g = torch.randn_like(q)
        fns = {n: (lambda op=op: torch.autograd.grad(op(q, k, v), (q, k, v), g)) for n, op in ops.items()}
    else:
        fns = {n: (lambda op=op: _no_grad(op, q, k, v)) for n, op in ops.items()}
    return interleaved(fns, sizes.seconds, min_rounds=3)


def _no_grad(op, q, k, v):
    import torch

    with torch.no_grad():
        return op(q, k, v)


# ---------------------------------------------------------------- GPT-2 small, ours and Hugging Face's
def gpt2_pair(dropout: float, context_length: int = 1024):
    """attnlab's GPT and transformers' GPT2LMHeadModel (sdpa) with the same GPT-2-small weights, on the CPU."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from attnlab.models import GPT, GPTConfig

    hf_config = GPT2Config(n_positions=context_length, resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout)
    hf = GPT2LMHeadModel._from_config(hf_config, attn_implementation="sdpa")
    ours = GPT(GPTConfig.from_preset("gpt2-small", context_length=context_length, dropout=dropout))
    copy_gpt2_weights(hf, ours)
    return ours, hf


def copy_gpt2_weights(hf, ours) -> None:
    """Hugging Face GPT-2 -> attnlab GPT. GPT-2's Conv1D stores weights (in, out): transposed for nn.Linear, and
    its fused ``c_attn`` (D, 3·D) splits into the query, key and value projections."""
    import torch

    src = hf.state_dict()
    d = ours.config.d_model
    out = {"tok_emb.weight": src["transformer.wte.weight"], "pos_emb.weight": src["transformer.wpe.weight"],
           "ln_f.weight": src["transformer.ln_f.weight"], "ln_f.bias": src["transformer.ln_f.bias"]}
    for i in range(ours.config.num_layers):
        h, b = f"transformer.h.{i}.", f"blocks.{i}."
        for name in ("weight", "bias"):
            out[b + f"ln1.{name}"], out[b + f"ln2.{name}"] = src[h + f"ln_1.{name}"], src[h + f"ln_2.{name}"]
        for j, part in enumerate(("W_query", "W_key", "W_value")):
            out[b + f"attn.{part}.weight"] = src[h + "attn.c_attn.weight"][:, j * d:(j + 1) * d].T
            out[b + f"attn.{part}.bias"] = src[h + "attn.c_attn.bias"][j * d:(j + 1) * d]
        for theirs, mine in (("attn.c_proj", "attn.out_proj"), ("mlp.c_fc", "ff.linear1"),
                             ("mlp.c_proj", "ff.linear2")):
            out[b + f"{mine}.weight"] = src[h + f"{theirs}.weight"].T
            out[b + f"{mine}.bias"] = src[h + f"{theirs}.bias"]
    with torch.no_grad():
        for name, tensor in ours.state_dict().items():
            if name != "head.weight":  # tied to tok_emb
                tensor.copy_(out[name])


# ---------------------------------------------------------------- B. training
def measure_training(dtype: str, dropout: float, sizes: Sizes) -> dict[str, float | str]:
    """Tokens/s of one optimizer step, ours ("attnlab": the fast twins, as the trainer swaps them in; "plain": the
    model as built) and Hugging Face's ("hf"), from the same weights."""
    import copy

    import torch

    from attnlab.fast import swap_modules
    from attnlab.training.mixed_precision import MixedPrecision
    from attnlab.training.optim import configure_optimizer

    ours, hf = (m.to(DEVICE).train() for m in gpt2_pair(dropout))
    plain = copy.deepcopy(ours)
    swap_modules(ours)
    precision = MixedPrecision(dtype, torch.device(DEVICE))  # the trainer's autocast and TF32
    ids = torch.randint(0, 50257, (sizes.train_batch, sizes.train_t + 1), device=DEVICE)
    x, y = ids[:, :-1], ids[:, 1:]

    def step(model, loss_of):
        optimizer = configure_optimizer(model, 6e-4, 0.1, (0.9, 0.95))

        def run():
            with precision.autocast():
                loss = loss_of(model)
            precision.backward(loss)
            precision.step(optimizer, model.parameters(), 1.0)
            optimizer.zero_grad(set_to_none=True)

        return run

    fns = {"attnlab": step(ours, lambda m: m(x, targets=y).loss),
           "plain": step(plain, lambda m: m(x, targets=y).loss),
           "hf": step(hf, lambda m: m(input_ids=ids[:, :-1], labels=ids[:, :-1]).loss)}  # HF shifts the labels
    ms = interleaved(fns, sizes.seconds * 3, min_rounds=5)
    tokens = sizes.train_batch * sizes.train_t
    return {k: (tokens / (v / 1e3) if isinstance(v, float) else v) for k, v in ms.items()}


# ---------------------------------------------------------------- C. decoding
def measure_decoding(batch: int, sizes: Sizes) -> dict[str, float | str | int]:
    """Tokens/s of greedy decoding: HF generate ("hf"), ours eager ("eager") and compiled ("compiled"), and both on
    the book's modules ("plain", "plain compiled")."""
    import torch

    from attnlab.generation import GenerationConfig, generate

    ours, hf = (m.to(DEVICE, torch.bfloat16).eval() for m in gpt2_pair(0.0))
    ids = torch.randint(0, 50257, (batch, sizes.prompt), device=DEVICE)
    n = sizes.new_tokens
    outputs = {}

    def run(name, fn):
        def call():
            outputs[name] = fn()
        return call

    fns = {"hf": run("hf", lambda: hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                                               min_new_tokens=n, do_sample=False, pad_token_id=0)),
           **{name: run(name, lambda config=config: generate(ours, ids, n, config)) for name, config in (
               ("eager", GenerationConfig(temperature=0)), ("compiled", GenerationConfig(temperature=0, compile=True)),
               ("plain", GenerationConfig(temperature=0, accelerate=False)),
               ("plain compiled", GenerationConfig(temperature=0, compile=True, accelerate=False)))}}
    # warm-up: the first call compiles, the next ones capture the CUDA graphs; none of it is timed
    ms = interleaved(fns, sizes.seconds * 3, min_rounds=3, max_rounds=20, warmup=3)
    result: dict[str, float | str | int] = {k: (batch * n / (v / 1e3) if isinstance(v, float) else v)
                                                   for k, v in ms.items()}
    for other, key in (("compiled", "compiled_agree"), ("hf", "hf_agree")):  # how far the greedy tokens agree
        if "eager" in outputs and other in outputs:
            same = outputs["eager"][:, sizes.prompt:] == outputs[other][:, sizes.prompt:]
            result[key] = int(same.int().cumprod(1).sum(1).min())
    return result


# ---------------------------------------------------------------- the run, real or dry
class DryRun:
    """Made-up, deterministic figures in the real shapes: for checking the report without a GPU."""

    def __init__(self) -> None:
        self.rng = random.Random(0)

    def attention(self, case: AttentionCase, backward: bool, sizes: Sizes) -> dict[str, float | str]:
        b, h, t, d = case.shape
        torch_ms = b * h * t * t * d * (3.0 if backward else 1.0) / (2 if case.causal else 1) / 4e11
        out: dict[str, float | str] = {"torch": torch_ms}
        speed = {"flash": self.rng.uniform(0.7, 1.3), "sdpa": 1.0, "auto": self.rng.uniform(0.97, 1.02),
                 "chunked": 0.01, "math": 0.2}
        out.update({k: torch_ms / s for k, s in speed.items()})
        if t >= 16384:
            out["math"] = "OOM"
        return out

    def training(self, dtype: str, dropout: float, sizes: Sizes) -> dict[str, float | str]:
        hf = 120_000.0 if dtype == "bf16" else 45_000.0
        return {"attnlab": hf * self.rng.uniform(1.0, 1.4), "plain": hf * self.rng.uniform(0.9, 1.3), "hf": hf}

    def decoding(self, batch: int, sizes: Sizes) -> dict[str, float | str | int]:
        hf = 150.0 * batch
        return {"hf": hf, "eager": hf * 1.1, "compiled": hf * 4.0, "plain": hf * 0.9, "plain compiled": hf * 3.5,
                "compiled_agree": sizes.new_tokens, "hf_agree": 17}

    def facts(self) -> list[str]:
        return ["DRY RUN: made-up figures, no GPU was used"]


class GpuRun:
    attention = staticmethod(measure_attention)
    training = staticmethod(measure_training)
    decoding = staticmethod(measure_decoding)

    def __init__(self) -> None:
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("bench_gpu.py needs an NVIDIA GPU (torch.cuda.is_available() is False); "
                             "--dry-run checks the report without one")
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True

    def facts(self) -> list[str]:
        import torch
        import transformers
        import triton

        return [f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
                f"triton {triton.__version__}, transformers {transformers.__version__}"]


# ---------------------------------------------------------------- what the auto rule may learn
def flash_rows(attention: list[tuple[AttentionCase, dict, dict]]) -> dict[tuple[str, str], int]:
    """``FLASH_FASTER`` rows this run supports: per mask kind (bf16), the fewest keys from which flash beat both
    torch and our sdpa backend, forward and forward + backward, in every measured case with at least that many."""
    by_kind: dict[str, list[tuple[int, bool]]] = {}
    for case, fwd, bwd in attention:
        wins = all(isinstance(r.get("flash"), float) and r["flash"] < min(_ms(r, "torch"), _ms(r, "sdpa"))
                   for r in (fwd, bwd))
        by_kind.setdefault(case.mask_kind, []).append((case.shape[2], wins))
    rows = {}
    for kind, results in by_kind.items():
        lengths = sorted({t for t, _ in results})
        since = [t for t in lengths if all(w for u, w in results if u >= t)]
        if since:
            rows[(kind, "bfloat16")] = since[0]
    return rows


def _ms(result: dict, name: str) -> float:
    value = result.get(name)
    return value if isinstance(value, float) else float("inf")


# ---------------------------------------------------------------- the report
def speed(result: dict, name: str, reference: str = "torch") -> str:
    ours, ref = result.get(name), result.get(reference)
    if isinstance(ours, str):
        return ours
    if not isinstance(ours, float) or not isinstance(ref, float):
        return "–"
    return f"{ref / ours:.2f}×"


def report(facts: list[str], attention, training, decoding, rows, sizes: Sizes, quick: bool, dry: bool,
           from_log: bool = False) -> str:
    flag = " --dry-run" if dry else " --quick" if quick else " --from-log" if from_log else ""
    lines = [f"# attnlab on a GPU{' (DRY RUN: made-up figures)' if dry else ''}", "",
             f"Written by `benchmarks/bench_gpu.py`{flag}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
             *[f"- {f}" for f in facts], "",
             "Every figure is a speed ratio, reference time over ours, both timed in the same run, call for call in "
             "turn (CUDA events, medians): above 1 is faster than the reference. TF32 is allowed for float32 "
             "matmuls on both sides.", ""]
    if attention:
        lines += ["## Attention, bf16: speed vs torch's `F.scaled_dot_product_attention`", "",
                  "Targets: auto ≥ 0.97× everywhere; flash ≥ 0.8× forward and ≥ 0.7× forward + backward at T ≥ 4096, "
                  "≥ 1.0× with a padding mask.", "",
                  "| (B,H,T,D) | mask | pass | torch ms | " + " | ".join(IMPLS) + " |",
                  "|---|---|---|---|" + "---|" * len(IMPLS)]
        for case, fwd, bwd in attention:
            for name, r in (("fwd", fwd), ("fwd+bwd", bwd)):
                ref = r.get("torch")
                ref_ms = f"{ref:.3f}" if isinstance(ref, float) else str(ref)
                lines.append(f"| {case.shape} | {case.label} | {name} | {ref_ms} | "
                             + " | ".join(speed(r, impl) for impl in IMPLS) + " |")
        lines.append("")
    if training:
        lines += ["## Training GPT-2 small: tokens/s vs Hugging Face `GPT2LMHeadModel` (sdpa)", "",
                  f"B = {sizes.train_batch}, T = {sizes.train_t}, the same weights, AdamW (fused), gradient "
                  f"clipping 1.0, one optimizer step per call. "
                  "Target: bf16 with dropout 0.1 ≥ 1.2×.", "",
                  "attnlab: the fast twins, as the trainer swaps them in; plain: the model as built.", "",
                  "| dtype | dropout | attnlab tok/s | HF tok/s | attnlab / HF | plain tok/s | plain / HF |",
                  "|---|---|---|---|---|---|---|"]
        for (dtype, dropout), r in training:
            tps = [f"{r[k]:,.0f}" if isinstance(r.get(k), float) else str(r.get(k, "–")) for k in
                   ("attnlab", "hf", "plain")]
            lines.append(f"| {dtype} | {dropout} | {tps[0]} | {tps[1]} | {_ratio(r, 'attnlab')} | {tps[2]} | "
                         f"{_ratio(r, 'plain')} |")
        lines.append("")
    if decoding:
        lines += ["## Greedy decoding, GPT-2 small in bf16: tokens/s vs Hugging Face `generate`", "",
                  f"Same weights, a {sizes.prompt}-token prompt, {sizes.new_tokens} new tokens. Target: "
                  f"`compile=True` at batch 1 ≥ 3×, with the eager loop's tokens. The last two columns count the "
                  f"greedy tokens equal to the eager loop's from the first on (the fewest over the rows). The "
                  f"weights are random: their top two logits are often closer than bf16 resolves, so any change in "
                  f"the last bit of the arithmetic may pick the other one; equality is tested in float32 "
                  f"(tests/generation/test_gpu_decoding.py).", "",
                  "| batch | HF tok/s | eager | compile=True | compiled = eager | HF = eager | plain | "
                  "plain compile=True |", "|---|---|---|---|---|---|---|---|"]
        for batch, r in decoding:
            hf = f"{r['hf']:,.0f}" if isinstance(r.get("hf"), float) else str(r.get("hf"))
            ratios = [_ratio(r, k) for k in ("eager", "compiled", "plain", "plain compiled")]
            lines.append(f"| {batch} | {hf} | {ratios[0]} | {ratios[1]} | {r.get('compiled_agree', '–')} of "
                         f"{sizes.new_tokens} | {r.get('hf_agree', '–')} of {sizes.new_tokens} | {ratios[2]} | "
                         f"{ratios[3]} |")
        lines.append("")
    lines += ["## What `auto` may take from this run", "",
              "`attnlab.functional.backends.FLASH_FASTER` rows this run supports (flash faster than torch and than "
              "our sdpa backend, forward and forward + backward, in every case from that many keys on):", "",
              "```python", f"FLASH_FASTER = {rows!r}", "```", ""]
    return "\n".join(lines)


def _ratio(result: dict, name: str) -> str:
    """``name``'s tokens/s over HF's; its error, or "–" where it was not measured."""
    ours, ref = result.get(name), result.get("hf")
    if isinstance(ours, float) and isinstance(ref, float):
        return f"{ours / ref:.2f}×"
    return "–" if ours is None else str(ours)


# ---------------------------------------------------------------- a report from what runs printed
LOG_LINE = re.compile(r"^(?:facts: (?P<facts>.*)|attention (?P<shape>\([\d, ]+\)) (?P<label>[a-z +]+): (?P<att>.*)"
                      r"|training (?P<dtype>fp32|bf16) dropout (?P<dropout>[\d.]+): (?P<train>.*)"
                      r"|decoding batch (?P<batch>\d+): (?P<dec>.*))$")


def read_logs(paths: list[Path]) -> tuple[list[str], list, list, list]:
    """``(facts, attention, training, decoding)`` from the lines runs printed, in order (a run stopped at a time
    limit prints each figure as it is measured but writes no report); a later line of the same case wins."""
    facts: list[str] = []
    attention: dict = {}
    training: dict = {}
    decoding: dict = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            m = LOG_LINE.match(line.strip())
            if m is None:
                continue
            if m["facts"] is not None:
                facts += [f for f in m["facts"].split("; ") if f not in facts]
            elif m["shape"] is not None:
                case = AttentionCase(ast.literal_eval(m["shape"]), "causal" in m["label"], "padding" in m["label"])
                attention[case] = (case, *ast.literal_eval(m["att"]))
            elif m["dtype"] is not None:
                key = (m["dtype"], float(m["dropout"]))
                training[key] = (key, ast.literal_eval(m["train"]))
            else:
                decoding[int(m["batch"])] = (int(m["batch"]), ast.literal_eval(m["dec"]))
    return facts, list(attention.values()), list(training.values()), list(decoding.values())


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test on a GPU")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: made-up figures, to check the report")
    parser.add_argument("--parts", default="attention,training,decoding",
                        help="comma-separated: attention, training, decoding  [default: all]")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"the report  [default: {RESULTS}]")
    parser.add_argument("--from-log", type=Path, nargs="+", metavar="LOG",
                        help="measure nothing: the report of the figures these runs' printed lines hold")
    args = parser.parse_args(argv)
    from attnlab.files import atomic_write_text

    if args.from_log:
        missing = [str(p) for p in args.from_log if not p.is_file()]
        if missing:
            parser.error(f"--from-log: no such file: {', '.join(missing)}")
        facts, attention, training, decoding = read_logs(args.from_log)
        if not (attention or training or decoding):
            parser.error(f"--from-log: no figure in {[str(p) for p in args.from_log]}")
        facts.append(f"assembled with --from-log from the lines that {len(args.from_log)} run(s) printed; a case "
                     f"missing from a table was not measured")
        rows = flash_rows(attention)
        atomic_write_text(args.out, report(facts, attention, training, decoding, rows, FULL, False, False, True))
        print(f"FLASH_FASTER = {rows!r}\nwrote {args.out}")
        return args.out

    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - {"attention", "training", "decoding"})
    if unknown or not parts:
        parser.error(f"--parts: unknown part(s) {unknown or '(none given)'}; choose from attention, training, "
                     f"decoding")
    sizes = QUICK if args.quick else FULL
    run = DryRun() if args.dry_run else GpuRun()
    print(f"facts: {'; '.join(run.facts())}", flush=True)
    attention, training, decoding = [], [], []
    if "attention" in parts:
        for case in attention_cases(sizes):
            attention.append((case, run.attention(case, False, sizes), run.attention(case, True, sizes)))
            print(f"attention {case.shape} {case.label}: {attention[-1][1:]}", flush=True)
    if "training" in parts:
        for dtype in ("fp32", "bf16"):
            for dropout in (0.0, 0.1):
                training.append(((dtype, dropout), run.training(dtype, dropout, sizes)))
                print(f"training {dtype} dropout {dropout}: {training[-1][1]}", flush=True)
    if "decoding" in parts:
        for batch in (1, 8):
            decoding.append((batch, run.decoding(batch, sizes)))
            print(f"decoding batch {batch}: {decoding[-1][1]}", flush=True)
    rows = flash_rows(attention)
    print(f"FLASH_FASTER = {rows!r}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, report(run.facts(), attention, training, decoding, rows, sizes, args.quick,
                                       args.dry_run))
    print(f"wrote {args.out}")
    return args.out


if __name__ == "__main__":
    main()
