"""Training throughput and quality: attnlab's trainer against a plain-PyTorch loop, same model, same run.

    .venv/bin/python benchmarks/bench_train.py            # full: 7 × 2,000 iterations + a 10-minute run (≈28 min)
    .venv/bin/python benchmarks/bench_train.py --quick --out /tmp/train.md   # a smoke test: 7 × 30 iterations
    .venv/bin/python benchmarks/bench_train.py --skip-b   # part A alone (the seven loops), to train_loops.md

Part A, the nanoGPT CPU baseline on Shakespeare's characters: 4 layers, 4 heads, 128 dims, block 64,
batch 12, AdamW lr 1e-3 (warm-up 100, cosine to 1e-4, weight decay 0.1 on matrices, clip 1.0), dropout 0,
2,000 iterations. Run seven ways (:data:`LOOPS`), interleaved: by a self-contained plain-PyTorch loop (model,
batches and optimizer written here, no attnlab code) on the same token arrays, in float32 and under bfloat16
autocast; by ``attnlab.training``, eager and with ``compile=True`` (``attnlab train --compile``: inductor's C++
backend on a CPU), each in float32 and with ``dtype="bf16"`` (``--dtype bf16``: autocast, float32 master weights),
the model's modules swapped for their fast twins as the trainer does by default; and by ``attnlab.training`` on the
book's modules (``attnlab train --plain``, ``TrainConfig(accelerate=False)``), eager, in float32. The models
are then scored on the same 200 validation batches, and each mixed-precision loop's training-loss curve is compared
with its float32 twin's, drawn on the same batches from the same weights. Targets: attnlab tokens/s ≥ 1.0× the plain
loop, and ≥ 1.3× with compile=True, with the same loss curve. Every throughput is also given as MFU: model FLOP/s
over the matmul peak of its dtype (``attnlab.bench.machine.matmul_gflops``, what ``attnlab bench`` reports) measured
in the same run. Then 20 more steps of each loop run under torch's profiler, which says how much of a step is
matrix products, the part that compiling leaves to the same BLAS, and so how much time the rest may take.

Part B, the best validation loss in a 10-minute ``time_budget`` with the config in ``BUDGET_CONFIG``
(a wider model, longer blocks, bigger batches and a higher learning rate than the baseline; see
docs/training.md). The trainer's time budget plans the steps so that the cosine schedule ends as the budget
does. Target: val loss ≤ 1.60.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attnlab.bench.machine import machine_facts, matmul_gflops
from attnlab.files import atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results" / "train.md"
BASELINE = dict(preset="baby", max_iters=2000, batch_size=12, learning_rate=1e-3, min_lr=1e-4, warmup_iters=100,
                weight_decay=0.1, beta1=0.9, beta2=0.99, grad_clip=1.0, seed=1337)
BUDGET_CONFIG = dict(preset="baby", model={"d_model": 192, "num_heads": 6, "context_length": 128}, batch_size=24,
                     learning_rate=2e-3, min_lr=2e-4, warmup_iters=200, weight_decay=0.1, beta1=0.9, beta2=0.99,
                     grad_clip=1.0, eval_interval=1000, eval_iters=50, seed=1337)
# the same budget spent on the baby's width: 0.8 M parameters, longer blocks, bigger batches (1.14x its tokens/s)
BUDGET_ALTERNATIVE = dict(preset="baby", model={"context_length": 128}, batch_size=32, learning_rate=2e-3,
                          min_lr=2e-4, warmup_iters=200, weight_decay=0.1, beta1=0.9, beta2=0.99, grad_clip=1.0,
                          eval_interval=1000, eval_iters=50, seed=1337)
VAL_BATCHES = 200


# ---------------------------------------------------------------- the plain-PyTorch reference
class RefBlock(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class RefGPT(nn.Module):
    """nanoGPT's layout: token + learned position embeddings, pre-LN blocks, final LN, tied head."""

    def __init__(self, vocab: int, block: int, d: int, layers: int, heads: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.blocks = nn.ModuleList(RefBlock(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight
        for m in self.modules():
            if isinstance(m, nn.Linear | nn.Embedding):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def ref_lr(step: int, c: dict) -> float:
    if step < c["warmup_iters"]:
        return c["learning_rate"] * (step + 1) / c["warmup_iters"]
    p = (step - c["warmup_iters"]) / (c["max_iters"] - c["warmup_iters"])
    return c["min_lr"] + 0.5 * (1 + math.cos(math.pi * min(p, 1.0))) * (c["learning_rate"] - c["min_lr"])


def ref_batch(data: np.ndarray, block: int, batch: int, rng: np.random.Generator):
    starts = rng.integers(0, len(data) - block, batch)
    w = torch.from_numpy(np.stack([data[s: s + block + 1].astype(np.int64) for s in starts]))
    return w[:, :-1], w[:, 1:]


class RefLoop:
    """The whole reference training loop, one step at a time (so the loops can be interleaved). ``autocast``: the
    forward pass and the loss under ``torch.autocast`` to that dtype, as a user of mixed precision writes it."""

    def __init__(self, train: np.ndarray, vocab: int, c: dict, autocast: torch.dtype | None = None) -> None:
        torch.manual_seed(c["seed"])
        self.model, self.train, self.vocab, self.c = RefGPT(vocab, 64, 128, 4, 4), train, vocab, c
        self.params = list(self.model.parameters())
        decay = [p for p in self.params if p.dim() >= 2]
        no_decay = [p for p in self.params if p.dim() < 2]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": c["weight_decay"]},
                                      {"params": no_decay, "weight_decay": 0.0}],
                                     lr=c["learning_rate"], betas=(c["beta1"], c["beta2"]))
        self.rng, self.step_count, self.autocast = np.random.default_rng(c["seed"]), 0, autocast

    def step(self) -> float:
        self.model.train()
        for g in self.opt.param_groups:
            g["lr"] = ref_lr(self.step_count, self.c)
        x, y = ref_batch(self.train, 64, self.c["batch_size"], self.rng)
        with torch.autocast("cpu", dtype=self.autocast, enabled=self.autocast is not None):
            loss = F.cross_entropy(self.model(x).view(-1, self.vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, self.c["grad_clip"])
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.step_count += 1
        return loss.item()


@torch.no_grad()
def val_loss(model, val: np.ndarray, block: int, batches: int, vocab: int) -> float:
    """Mean loss on ``batches`` fixed validation batches (the same for every model scored)."""
    model.eval()
    rng = np.random.default_rng(0)
    total = 0.0
    for _ in range(batches):
        x, y = ref_batch(val, block, 12, rng)
        out = model(x)
        logits = getattr(out, "logits", out)  # attnlab's CausalLMOutput, or the reference's bare logits
        total += F.cross_entropy(logits.view(-1, vocab), y.reshape(-1)).item()
    return total / batches


# ---------------------------------------------------------------- the runs
#: part A's loops, in the table's order: name -> (what the table calls it, bfloat16 autocast, the float32 loop on the
#: same batches from the same weights whose loss curve it is held to)
LOOPS = {
    "reference": ("plain PyTorch loop", False, None),
    "reference bf16": ("plain PyTorch loop, bf16 autocast", True, "reference"),
    "attnlab": ("attnlab.training", False, None),
    "attnlab --compile": ("attnlab.training, compile=True", False, "attnlab"),
    "attnlab bf16": ("attnlab.training, dtype=bf16", True, "attnlab"),
    "attnlab --compile bf16": ("attnlab.training, compile=True, dtype=bf16", True, "attnlab"),
    "attnlab --plain": ("attnlab.training, --plain (the book's modules, not accelerated)", False, "attnlab"),
}
CURVE_WINDOW = 100  # steps per point of the loss curves compared


def part_a(quick: bool, out_root: Path) -> dict:
    from attnlab.data import CharTokenizer, encode_cached, load_text, train_val_split
    from attnlab.training import TrainConfig, Trainer

    c = {**BASELINE, "max_iters": 30 if quick else BASELINE["max_iters"]}
    text = load_text("shakespeare")
    tokens = encode_cached(text, CharTokenizer.train(text), out_root / "cache")
    train, val = (np.asarray(a) for a in train_val_split(tokens, 0.1))
    vocab = int(tokens.max()) + 1
    refs = {name: RefLoop(train, vocab, c, torch.bfloat16 if bf16 else None)
            for name, (_, bf16, _) in LOOPS.items() if name.startswith("reference")}
    cfg = TrainConfig(data="shakespeare", out=str(out_root / "baseline"), eval_interval=c["max_iters"],
                      eval_iters=10, **{k: v for k, v in c.items() if k != "preset"}, preset="baby")
    trainers = {name: Trainer(dataclasses.replace(cfg, out=str(out_root / name.replace(" ", "_")),
                                                  compile="--compile" in name, dtype="bf16" if bf16 else "fp32",
                                                  accelerate="--plain" not in name),
                              quiet=True) for name, (_, bf16, _) in LOOPS.items() if name.startswith("attnlab")}
    steps = {**{n: r.step for n, r in refs.items()}, **{n: t.train_step for n, t in trainers.items()}}
    losses: dict[str, list[float]] = {name: [] for name in LOOPS}
    compile_s = {}
    for name, trainer in trainers.items():
        if trainer.config.compile:  # the first step compiles (inductor's C++ backend on a CPU): not timed
            t0 = time.perf_counter()
            losses[name].append(trainer.train_step())
            compile_s[name] = time.perf_counter() - t0
    times, walls = interleaved(steps, losses, c["max_iters"])
    models = {**{n: r.model for n, r in refs.items()}, **{n: t.model for n, t in trainers.items()}}
    assert sum(p.numel() for p in models["reference"].parameters()) == trainers["attnlab"].model.num_parameters()
    tokens_per_step = c["batch_size"] * 64
    res = {"iters": c["max_iters"], "params": trainers["attnlab"].model.num_parameters(), "compile_s": compile_s,
           "flops_per_token": training_flops_per_token(trainers["attnlab"].model_config),
           "matmul": matmul_gflops(), "matmul_bf16": matmul_gflops(dtype="bf16")}
    for name, model in models.items():
        t, twin = times[name], LOOPS[name][2]
        res[name] = {"wall_s": walls[name], "train_s": sum(t), "tokens_per_s": tokens_per_step * len(t) / sum(t),
                     "median_ms": 1000 * statistics.median(t[10:] or t), "bf16": LOOPS[name][1],
                     "val_loss": val_loss(model, val, 64, 20 if quick else VAL_BATCHES, vocab),
                     "curve_gap": None if twin is None else curve_gap(losses[name], losses[twin], CURVE_WINDOW)}
    for name, step in steps.items():  # after the scoring: these steps are not part of the runs compared above
        res[name]["profiled_ms"], res[name]["products_ms"] = profiled_step_ms(step)
    return res


def interleaved(steps: dict, losses: dict[str, list[float]], iters: int) -> tuple[dict, dict]:
    """Run every loop's ``step`` ``iters`` times, in chunks of 10 taken in turns, the order rotating every round
    (the second of a round finds the CPU caches full of the first's data), so that a load change on a shared machine
    hits every loop alike. Appends each step's loss to ``losses``; returns each step's seconds, and each loop's wall
    seconds."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    walls = dict.fromkeys(steps, 0.0)
    chunk = 10  # short rounds: this guest's speed swings by ±10 % over seconds
    loops = list(steps.items())
    for i in range(iters // chunk):
        for name, step in loops[i % len(loops):] + loops[: i % len(loops)]:
            w0 = time.perf_counter()
            for _ in range(chunk):
                s = time.perf_counter()
                losses[name].append(step())  # the loop's own step: batch, forward, backward, clip, AdamW, schedule
                times[name].append(time.perf_counter() - s)
            walls[name] += time.perf_counter() - w0
    return times, walls


def curve_gap(losses: list[float], twin: list[float], window: int) -> float:
    """The largest gap between two loss curves drawn on the same batches: the mean training loss of each ``window``
    steps (fewer in a run shorter than that), compared window by window over the shorter run."""
    n = min(len(losses), len(twin))
    window = min(window, n)
    return max(abs(statistics.fmean(losses[i:i + window]) - statistics.fmean(twin[i:i + window]))
               for i in range(0, n - window + 1, window))


def profiled_step_ms(step, steps: int = 20) -> tuple[float, float]:
    """Milliseconds per step over ``steps`` steps under the profiler: the whole step, and its matrix products (the
    self time of aten's ``mm``, ``addmm``, ``bmm`` and ``baddbmm``), the part that no code around them can remove.
    The profiler's own cost falls on the many small calls, not on these."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        wall = time.perf_counter() - t0
    products = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
    mm = sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in products) / 1000
    return 1000 * wall / steps, mm / steps


def training_flops_per_token(config) -> float:
    """Model FLOPs of one training token (nanoGPT's and PaLM's count): 6 per parameter (forward 2, backward 4;
    the embeddings' lookups are not products, the tied head is) plus the attention's scores and weighted sums,
    12 · layers · d_model · T (the causal half counted too, as PaLM does)."""
    c = config
    per_block = 4 * c.d_model * c.d_model + 2 * c.d_model * c.d_ff  # q, k, v, out; the feed-forward
    params = c.num_layers * per_block + c.vocab_size * c.d_model  # the matrices a token is multiplied by
    return 6 * params + 12 * c.num_layers * c.d_model * c.context_length


def mfu(loop: dict, a: dict) -> float:
    """Model FLOP/s over the matmul peak measured in the same run, of the dtype the loop's products run in."""
    peak = a["matmul_bf16" if loop.get("bf16") else "matmul"]
    return loop["tokens_per_s"] * a["flops_per_token"] / (peak.value * 1e9)


def part_b(budget_minutes: float, out_root: Path, quick: bool, base: dict) -> dict:
    """The trainer's own time budget: its planner probes the step time, plans the steps and the schedule, and plans
    again as the machine's speed changes (a plan fixed by a probe of its own would end early, or late, when the
    speed moves: a probe in a slow spell once left 120 s of the 600 unused)."""
    from attnlab.training import TrainConfig, Trainer

    config = {**base, "eval_iters": 4} if quick else base
    cfg = TrainConfig(data="shakespeare", out=str(out_root / "budget"), max_iters=10**6,
                      time_budget=budget_minutes, **config)
    t0 = time.perf_counter()
    trainer = Trainer(cfg, quiet=False)
    result = trainer.train()
    plan = result.plan  # None where the budget was spent before the planner's first plan (a smoke run's seconds)
    return {"config": config, "planned_iters": None if plan is None else plan.steps,
            "plan_step_ms": None if plan is None else 1000 * plan.step_seconds,
            "steps": result.step, "stop_reason": result.stop_reason, "wall_s": time.perf_counter() - t0,
            "tokens_per_s": result.tokens_per_s, "params": trainer.model.num_parameters(),
            "val_loss": result.evals[-1][2], "train_loss": result.evals[-1][1], "budget_min": budget_minutes,
            "flops_per_token": training_flops_per_token(trainer.model_config), "matmul": matmul_gflops()}


def write(a: dict | None, b: dict | None, quick: bool) -> str:
    title = "# Training benchmark" + (" (--quick: a smoke test, not a measurement)" if quick else "")
    head = [title, "", machine_facts().summary(), ""]
    return "\n".join([*head, *(section_a(a, quick) if a else []), *(section_b(b) if b else [])])


def section_a(a: dict, quick: bool) -> list[str]:
    r, k, kb, rb = a["reference"], a["attnlab --compile"], a["attnlab --compile bf16"], a["reference bf16"]
    book = a["attnlab --plain"]
    mm, mm16 = a["matmul"], a["matmul_bf16"]
    compiled = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in a["compile_s"].items())
    return [
        f"## A. nanoGPT CPU baseline: Shakespeare characters, {a['params']:,} parameters, {a['iters']} iterations",
        "", "L4 H4 d128, block 64, batch 12, AdamW 1e-3 (warm-up 100, cosine to 1e-4), dropout 0. "
        f"Val loss: mean over the same {VAL_BATCHES if not quick else 20} validation batches for all. "
        f"MFU: model FLOP/s ({a['flops_per_token'] / 1e6:.2f} MFLOP per token, `training_flops_per_token`) over the "
        f"matmul peak of the dtype the loop's products run in, measured in the same run (the figures `attnlab "
        f"bench` reports): fp32 **{mm.value:.0f} GFLOP/s** ({mm.what}), bf16 **{mm16.value:.0f} GFLOP/s**. "
        f"Compiling took {compiled} (the first step, not timed). \"curve Δ\": the largest gap between the loop's "
        f"training loss, averaged over each {CURVE_WINDOW} steps, and that of its float32 twin (the same batches "
        "from the same weights: the plain loop for the plain loop under autocast, attnlab.training for the rest).",
        "", "| loop | wall s | train s | median ms/iter | tokens/s | × plain loop | MFU | val loss | curve Δ | "
        "profiled ms/iter | of which matrix products |", "|---|---|---|---|---|---|---|---|---|---|---|",
        *(f"| {title} | {x['wall_s']:.1f} | {x['train_s']:.1f} | {x['median_ms']:.1f} | {x['tokens_per_s']:,.0f} | "
          f"{x['tokens_per_s'] / r['tokens_per_s']:.2f}× | {100 * mfu(x, a):.1f} % | {x['val_loss']:.3f} | "
          f"{'–' if x['curve_gap'] is None else format(x['curve_gap'], '.4f')} | {x['profiled_ms']:.1f} | "
          f"{x['products_ms']:.1f} |" for x, title in ((a[name], LOOPS[name][0]) for name in LOOPS)),
        "", f"**attnlab / plain loop tokens/s: {a['attnlab']['tokens_per_s'] / r['tokens_per_s']:.2f}×** (target "
        f"≥ 1.0×); with compile=True **{k['tokens_per_s'] / r['tokens_per_s']:.2f}×** in float32 and "
        f"**{kb['tokens_per_s'] / r['tokens_per_s']:.2f}×** with dtype=bf16 (target ≥ 1.3×, the same loss curve: "
        f"within {kb['curve_gap']:.4f} of float32's, val loss {kb['val_loss']:.3f} against "
        f"{a['attnlab']['val_loss']:.3f}). Against the plain loop under the same autocast, compile=True with bf16 "
        f"runs {kb['tokens_per_s'] / rb['tokens_per_s']:.2f}×. On the book's modules (`--plain`) attnlab.training "
        f"runs {book['tokens_per_s'] / r['tokens_per_s']:.2f}× the plain loop: the fast twins make it "
        f"{a['attnlab']['tokens_per_s'] / book['tokens_per_s']:.2f}× as fast (the same loss curve: within "
        f"{book['curve_gap']:.4f}).", "",
        "Profiled: 20 more steps of each loop after the scoring, one loop after the other, under torch's profiler; "
        "the matrix products are the self time of `mm`, `addmm`, `bmm` and `baddbmm` in them. In float32 both loops "
        "run the same products through the same BLAS. At the plain loop's profiled "
        f"{r['profiled_ms']:.1f} ms, 1.3× would leave the float32 compiled step {r['profiled_ms'] / 1.3:.1f} ms: "
        f"{r['profiled_ms'] / 1.3 - k['products_ms']:.1f} ms besides its {k['products_ms']:.1f} ms of products, "
        f"against {k['profiled_ms'] - k['products_ms']:.1f} ms now.", "",
    ]


def section_b(b: dict) -> list[str]:
    plan = ("the budget was spent before its first plan" if b["planned_iters"] is None else
            f"its last plan {b['planned_iters']:,} steps at {b['plan_step_ms']:.1f} ms a step")
    return [
        f"## B. Best val loss in a {b['budget_min']:g}-minute time budget", "",
        f"Config: `{b['config']}`; {b['params']:,} parameters; the trainer's time budget planned the steps and the "
        f"schedule (`attnlab.training.budget.BudgetPlanner`), {plan}.", "",
        f"MFU over the fp32 matmul peak measured after the run, {b['matmul'].value:.0f} GFLOP/s.", "",
        "| steps | stop | wall s | tokens/s | MFU | train loss | val loss |", "|---|---|---|---|---|---|---|",
        f"| {b['steps']} | {b['stop_reason']} | {b['wall_s']:.0f} | {b['tokens_per_s']:,.0f} | "
        f"{100 * mfu(b, b):.1f} % | "
        f"{b['train_loss']:.3f} | **{b['val_loss']:.3f}** |", "", "Target: val loss ≤ 1.60 (characters).", "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test: 30 iterations, a 10-second budget")
    parser.add_argument("--budget", type=float, default=10.0, help="minutes for part B (default 10)")
    parser.add_argument("--budget-config", choices=["wide", "baby"], default="wide",
                        help="part B's config: BUDGET_CONFIG (wide, default) or BUDGET_ALTERNATIVE (baby)")
    parser.add_argument("--skip-a", action="store_true", help="run part B only")
    parser.add_argument("--skip-b", action="store_true", help="run part A only (the seven loops)")
    parser.add_argument("--out", type=Path, default=None,
                        help="where the report goes (default: results/train.md, train_loops.md with --skip-b, "
                             "train_budget_CONFIG.md with --skip-a)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        a = None if args.skip_a else part_a(args.quick, Path(tmp))
        if a is not None:
            r = a["reference"]["tokens_per_s"]
            print("A: × plain loop, val loss: " + "; ".join(
                f"{name} {a[name]['tokens_per_s'] / r:.2f}×, {a[name]['val_loss']:.3f}" for name in LOOPS))
        base = BUDGET_CONFIG if args.budget_config == "wide" else BUDGET_ALTERNATIVE
        b = None if args.skip_b else part_b(10 / 60 if args.quick else args.budget, Path(tmp), args.quick, base)
        if b is not None:
            print(f"B: {b['steps']} steps, val loss {b['val_loss']:.3f}")
    results = args.out or ((RESULTS if b is not None else RESULTS.with_name("train_loops.md")) if a is not None
                           else RESULTS.with_name(f"train_budget_{args.budget_config}.md"))
    results.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(results, write(a, b, args.quick))
    print(f"wrote {results}")


if __name__ == "__main__":
    main()
