"""The encoder-decoder, measured: translation accuracy in a time budget, training speed against torch.nn.Transformer,
and beam search with and without the decoding caches.

    .venv/bin/python benchmarks/bench_seq2seq.py                  # full: 3 minutes per task, then the speed parts
    .venv/bin/python benchmarks/bench_seq2seq.py --tasks dates --minutes 1
    .venv/bin/python benchmarks/bench_seq2seq.py --tasks numbers --steps 2500 --skip-speed   # the same on any machine
    .venv/bin/python benchmarks/bench_seq2seq.py --quick --out /tmp/seq2seq.md   # a smoke test, about a minute

A. **Quality.** For each task, ``attnlab.training`` trains the config in ``CONFIGS`` for ``--minutes`` (the
   trainer's ``time_budget``: its planner, :mod:`attnlab.training.budget`, times the first steps, fits warm-up and
   cosine to reach ``min_lr`` when the budget ends, and re-plans as the machine's speed changes). Then exact match,
   greedy and beam 4, on 1,000 random held-out inputs (never in any training stream) and, for numbers, on the
   1,000 round numbers of ``NumbersTask.round_held_out()`` (every ``n·10^k`` and ``10^k + 1``, then held-out
   numbers with runs of zeros), where a model trained on uniform digits alone fails.
   Targets: numbers ≥ 99 % on both sets after 3 minutes on an idle 2-core machine (≥ 95 % after 2 minutes
   with one core busy); dates ≥ 98 %. ``--steps N`` trains N steps instead (the cosine over all of them, no
   clock): the same figures on any machine, however busy. The bench runs on one thread (``--threads 1``, the
   default): this 0.2 M-parameter model's small matmuls gain little from a second thread on an idle machine, and
   two OpenMP threads that wait for each other at every matmul ran ten times slower than one when the other core
   was busy, so a time budget on a busy machine would buy a tenth of the steps.
B. **Training speed.** The same model twice: ``torch.nn.Transformer`` (with ``nn.Embedding``, sinusoidal positions
   and a tied ``nn.Linear``) and attnlab's :class:`Transformer` made from it by ``Transformer.from_torch`` (the
   same weights). Both train on the same batches with the same fused AdamW, in interleaved chunks so that a load
   change on a shared machine hits both alike. Tokens are real (unpadded) source + target tokens. attnlab's model
   is trained as the trainer trains it, its modules swapped for their fast twins (``attnlab.fast.swap_modules``),
   and beside it, on the same batches, as built ("plain", the book's modules). Target: attnlab ≥ 1.0× torch.
C. **Decoding caches.** Beam 4 over held-out dates with the caches (decoder self-attention KV cache,
   cross-attention keys/values once per source) and without (the whole prefix every step), interleaved; both on
   the model's fast twin (``beam_search``'s default) and on the book's modules (``accelerate=False``, "plain").
   Target: ≥ 3× faster, the same tokens.

Everything is seeded; only the number of steps a time budget allows depends on the machine.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.files import atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results" / "seq2seq.md"
EVAL_SEED, N_EVAL = 2026, 1000
DECODINGS = (("greedy", 1), ("beam4", 4))
COMMON = dict(preset="transformer-tiny", batch_size=64, learning_rate=2e-3, min_lr=1e-4, warmup_iters=100,
              weight_decay=0.01, beta1=0.9, beta2=0.98, grad_clip=1.0, label_smoothing=0.0, eval_iters=5, seed=1337)
MODEL = dict(d_model=64, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=256, dropout=0.0,
             context_length=40)
CONFIGS = {"dates": dict(COMMON, task="dates", model=MODEL), "numbers": dict(COMMON, task="numbers", model=MODEL)}
QUICK_MODEL = dict(MODEL, d_model=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=64)


# ---------------------------------------------------------------- A. quality
def budget_config(task: str, minutes: float, out: Path, quick: bool, steps: int | None = None):
    """The task's config, trained for ``minutes`` (the trainer's time budget plans the steps and the schedule),
    or for exactly ``steps`` steps (the cosine over all of them)."""
    from attnlab.training.config import Seq2SeqTrainConfig

    values = dict(CONFIGS[task], model=QUICK_MODEL, train_pairs=2000, val_pairs=50) if quick else CONFIGS[task]
    if steps is not None:
        return Seq2SeqTrainConfig(**values, out=str(out / task), max_iters=steps, eval_interval=max(1, steps // 4))
    return Seq2SeqTrainConfig(**values, out=str(out / task), max_iters=10**7, time_budget=minutes,
                              eval_interval=50 if quick else 500)


def exact_match(model, vocab, pairs, beam: int, batch: int = 250) -> tuple[float, float, list, int]:
    """``(accuracy, seconds, a few misses, how many inputs)``: ``pairs`` translated with beam ``beam`` (1 = greedy)."""
    from attnlab.generation.translation import translate

    t0, right, misses = time.perf_counter(), 0, []
    for i in range(0, len(pairs), batch):
        chunk = pairs[i: i + batch]
        for pair, out in zip(chunk, translate(model, vocab, [p.source for p in chunk], beam=beam), strict=True):
            right += out.target == pair.target
            if out.target != pair.target and len(misses) < 5:
                misses.append((pair.source, pair.target, out.target))
    return right / len(pairs), time.perf_counter() - t0, misses, len(pairs)


def part_a(task: str, minutes: float, out: Path, quick: bool, steps: int | None = None) -> dict:
    from attnlab.models import load_trained
    from attnlab.training.seq2seq_trainer import train_seq2seq

    config = budget_config(task, minutes, out, quick, steps)
    result = train_seq2seq(config, quiet=True)
    model, vocab = load_trained(result.out, kind="seq2seq")
    planned_s = result.plan.step_seconds if result.plan is not None else None  # None: fixed steps, or spent early
    res = {"task": task, "config": config, "step_ms": None if planned_s is None else 1000 * planned_s,
           "last_lr": result.last_lr, "steps": result.step,
           "stop": result.stop_reason, "train_s": result.train_seconds, "tokens_per_s": result.tokens_per_s,
           "val_loss": result.evals[-1][2], "params": model.num_parameters(), "sets": {}}
    for name, pairs in eval_sets(task, quick).items():
        res["sets"][name] = {decoding: exact_match(model, vocab, pairs, beam) for decoding, beam in DECODINGS}
    return res


def eval_sets(task: str, quick: bool) -> dict[str, list]:
    """The held-out sets a task is scored on: random held-out inputs, and for numbers the round ones too."""
    from attnlab.data import get_task

    sets = {"random": get_task(task).held_out(50 if quick else N_EVAL, EVAL_SEED)}
    if task == "numbers":
        numbers = get_task(task)  # the library's round set: 1,000 numbers, or 80 + 20 for a smoke test
        sets["round"] = numbers.round_held_out(20) if quick else numbers.round_held_out()
    return sets


# ---------------------------------------------------------------- B. training speed
class TorchSeq2Seq(nn.Module):
    """The same model from torch's own modules: ``nn.Transformer`` between an ``nn.Embedding`` (scaled by
    √d_model, plus sinusoidal positions) and an ``nn.Linear`` tied to it. No attnlab code."""

    def __init__(self, vocab: int, d: int, heads: int, n_enc: int, n_dec: int, d_ff: int, context: int) -> None:
        super().__init__()
        self.d, self.vocab = d, vocab
        self.embedding = nn.Embedding(vocab, d)
        self.body = nn.Transformer(d, heads, n_enc, n_dec, d_ff, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embedding.weight
        nn.init.normal_(self.embedding.weight, std=d**-0.5)  # unit variance once scaled by √d, as attnlab's
        pos = torch.arange(context).unsqueeze(1)
        angle = pos * torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe = torch.zeros(context, d)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
        self.register_buffer("pe", pe, persistent=False)

    def embed(self, ids):
        return self.embedding(ids) * math.sqrt(self.d) + self.pe[: ids.shape[1]]

    def forward(self, src, tgt, *, src_mask, tgt_mask, targets):
        t = tgt.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        src_pad, tgt_pad = ~src_mask.bool(), ~tgt_mask.bool()
        h = self.body(self.embed(src), self.embed(tgt), tgt_mask=causal, src_key_padding_mask=src_pad,
                      tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad, tgt_is_causal=True)
        logits = self.head(h)
        return F.cross_entropy(logits.reshape(-1, self.vocab), targets.reshape(-1), ignore_index=0)


def part_b(quick: bool) -> dict:
    from attnlab.data import SPECIALS, CharTokenizer, collate, encode_pairs, get_task
    from attnlab.fast import swap_modules
    from attnlab.models import Transformer
    from attnlab.training import configure_optimizer

    m = QUICK_MODEL if quick else MODEL
    task = get_task("dates")
    vocab = CharTokenizer(task.alphabet(), SPECIALS)
    encoded = encode_pairs(task(4000, 1), vocab, m["context_length"])
    g = torch.Generator().manual_seed(0)
    steps, chunk = (20, 5) if quick else (300, 25)
    batches = [collate([encoded[i] for i in torch.randint(len(encoded), (64,), generator=g).tolist()])
               for _ in range(steps)]
    torch.manual_seed(0)
    ref = TorchSeq2Seq(vocab.vocab_size, m["d_model"], m["num_heads"], m["num_encoder_layers"],
                       m["num_decoder_layers"], m["d_ff"], m["context_length"])
    ours = Transformer.from_torch(ref.body, vocab.vocab_size, context_length=m["context_length"])
    with torch.no_grad():
        ours.embedding.weight.copy_(ref.embedding.weight)
    plain = copy.deepcopy(ours)
    swap_modules(ours)  # as the trainer does
    b = batches[0]
    first = (ours(b.src_ids, b.tgt_in, src_mask=b.src_mask, tgt_mask=b.tgt_mask, targets=b.tgt_out).loss.item(),
             ref(b.src_ids, b.tgt_in, src_mask=b.src_mask, tgt_mask=b.tgt_mask, targets=b.tgt_out).item())
    runs = {}
    for name, model in (("torch", ref), ("attnlab", ours), ("plain", plain)):
        opt = configure_optimizer(model, 1e-3, 0.01, (0.9, 0.98))  # fused AdamW, the same groups for both
        runs[name] = {"model": model, "opt": opt, "times": [], "i": 0}

    def step(run) -> None:
        b = batches[run["i"]]
        out = run["model"](b.src_ids, b.tgt_in, src_mask=b.src_mask, tgt_mask=b.tgt_mask, targets=b.tgt_out)
        getattr(out, "loss", out).backward()
        run["opt"].step()
        run["opt"].zero_grad(set_to_none=True)
        run["i"] += 1

    for _ in range(0, steps, chunk):
        for run in runs.values():
            for _ in range(chunk):
                t0 = time.perf_counter()
                step(run)
                run["times"].append(time.perf_counter() - t0)
    tokens = [int(b.src_mask.sum() + b.tgt_mask.sum()) for b in batches]
    res = {"steps": steps, "params": ours.num_parameters(), "first_loss": first,
           "mean_tokens": statistics.mean(tokens)}
    for name, run in runs.items():
        res[name] = {"tokens_per_s": sum(tokens[3:]) / sum(run["times"][3:]),
                     "median_ms": 1000 * statistics.median(run["times"])}
    res["ratio"] = res["attnlab"]["tokens_per_s"] / res["torch"]["tokens_per_s"]
    res["plain_ratio"] = res["plain"]["tokens_per_s"] / res["torch"]["tokens_per_s"]
    return res


# ---------------------------------------------------------------- C. decoding caches
def part_c(model, vocab, quick: bool) -> dict:
    from attnlab.data import get_task
    from attnlab.generation.seq2seq import beam_search
    from attnlab.generation.translation import encode_sources

    sources = [p.source for p in get_task("dates").held_out(16 if quick else N_EVAL, EVAL_SEED + 1)]
    src, mask = encode_sources(sources, vocab, model.config.context_length)
    ways = [(cached, fast) for fast in (True, False) for cached in (True, False)]  # (the caches, the fast twin)
    times: dict[tuple[bool, bool], list[float]] = {way: [] for way in ways}
    outs = {}
    with torch.no_grad():
        for _ in range(1 if quick else 3):
            for cached, fast in ways:
                t0 = time.perf_counter()
                outs[cached, fast] = beam_search(model, src, src_mask=mask, beam_size=4, use_cache=cached,
                                                 accelerate=fast)
                times[cached, fast].append(time.perf_counter() - t0)
    ref_tokens, ref_scores = outs[True, True]
    same = all(torch.equal(tokens, ref_tokens) for tokens, _ in outs.values())
    diff = max(float((scores - ref_scores).abs().max()) for _, scores in outs.values())
    best = {way: min(t) for way, t in times.items()}
    return {"n": len(sources), "cached_s": best[True, True], "uncached_s": best[False, True],
            "ratio": best[False, True] / best[True, True], "plain_cached_s": best[True, False],
            "plain_uncached_s": best[False, False], "plain_ratio": best[False, False] / best[True, False],
            "same_tokens": same, "max_score_diff": diff}


# ---------------------------------------------------------------- the report
def report(quality: list[dict], speed: dict | None, cache: dict | None, budget: str, quick: bool,
           note: str = "", load: tuple[float, float] | None = None) -> str:
    """The Markdown report; ``budget`` says how long each task trained (``"3 minutes"``, ``"2,500 steps"``)."""
    from attnlab.bench.machine import machine_facts

    f = machine_facts()
    busy = [] if load is None else [f"Load average (1 min) at the start {load[0]:.2f}, at the end {load[1]:.2f} "
                                    f"(the run's own threads count too).", ""]
    lines = ["# Encoder-decoder benchmark", "",
             f"CPU {f.cpu}, {f.cores} logical cores, torch {f.torch} ({f.torch_threads} threads), Python {f.python}"
             + (" — **--quick smoke run, not a measurement**" if quick else ""), "", *busy,
             *([note, ""] if note else []),
             f"## A. Exact match on held-out inputs after {budget} of training", "",
             "| task | params | steps (last lr) | train tok/s | val loss |", "|---|---|---|---|---|"]
    for q in quality:
        lines.append(f"| {q['task']} | {q['params']:,} | {q['steps']} ({q['last_lr']:.2e}) | {q['tokens_per_s']:,.0f} "
                     f"| {q['val_loss']:.4f} |")
    lines += ["", "| task | held-out set | inputs | greedy | beam 4 | greedy s | beam 4 s |",
              "|---|---|---|---|---|---|---|"]
    for q in quality:
        for name, scores in q["sets"].items():
            g, b = scores["greedy"], scores["beam4"]
            lines.append(f"| {q['task']} | {name} | {g[3]} | **{100 * g[0]:.1f} %** | **{100 * b[0]:.1f} %** "
                         f"| {g[1]:.1f} | {b[1]:.1f} |")
    lines += ["", f"random: `task.held_out(n, seed={EVAL_SEED})`; round: `NumbersTask.round_held_out()`, every "
              "`n·10^k` and `10^k + 1` (trained on, as the digits are) then held-out numbers with runs of zeros. "
              "Targets: numbers ≥ 99 % on both sets after 3 minutes on an idle 2-core machine (≥ 95 % after 2 "
              "minutes with one core busy); dates ≥ 98 %.", ""]
    for q in quality:
        c = q["config"]
        lines.append(f"- {q['task']}: preset {c.preset} with {c.model}, batch {c.batch_size}, lr {c.learning_rate} "
                     f"(warm-up {c.warmup_iters}, cosine to {c.min_lr}), label smoothing {c.label_smoothing}, "
                     f"{c.train_pairs:,} training pairs; "
                     + ("" if q["step_ms"] is None else f"last planned at {q['step_ms']:.1f} ms/step; ")
                     + f"{q['train_s']:.0f} s of training, stopped by {q['stop']}.")
        for name, scores in q["sets"].items():
            for src, want, got in scores["greedy"][2][:3]:
                lines.append(f"  - {name}, greedy miss: `{src}` → `{got}` (expected `{want}`)")
    if speed is not None:
        s = speed
        lines += ["", "## B. Training speed: attnlab vs torch.nn.Transformer, the same model and batches", "",
                  f"{s['params']:,} parameters, {s['steps']} steps each in interleaved chunks, batch 64 dates "
                  f"(mean {s['mean_tokens']:.0f} real tokens), fused AdamW. First-batch loss: attnlab "
                  f"{s['first_loss'][0]:.6f}, torch {s['first_loss'][1]:.6f}.", "",
                  "| model | tokens/s | median ms/step |", "|---|---|---|",
                  f"| torch.nn.Transformer | {s['torch']['tokens_per_s']:,.0f} | {s['torch']['median_ms']:.1f} |",
                  f"| attnlab Transformer | {s['attnlab']['tokens_per_s']:,.0f} | {s['attnlab']['median_ms']:.1f} |",
                  f"| attnlab Transformer, plain | {s['plain']['tokens_per_s']:,.0f} | {s['plain']['median_ms']:.1f} |",
                  "", f"**attnlab / torch tokens/s: {s['ratio']:.2f}×** (target ≥ 1.0×); plain (the model as built, "
                  f"not accelerated) / torch: {s['plain_ratio']:.2f}×."]
    if cache is not None:
        c = cache
        lines += ["", "## C. Beam 4 with and without the decoding caches", "",
                  f"{c['n']} held-out dates, the dates model above; best of the interleaved runs.", "",
                  "| decoding | seconds |", "|---|---|", f"| with caches | {c['cached_s']:.3f} |",
                  f"| without | {c['uncached_s']:.3f} |", f"| with caches, plain | {c['plain_cached_s']:.3f} |",
                  f"| without, plain | {c['plain_uncached_s']:.3f} |", "",
                  f"**Speed-up: {c['ratio']:.1f}×** (target ≥ 3×; plain, the book's modules: {c['plain_ratio']:.1f}×); "
                  f"the same tokens, all four: {c['same_tokens']}, max |Δ score| {c['max_score_diff']:.1e}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="training time budget per task")
    parser.add_argument("--steps", type=int, default=None,
                        help="train this many steps per task instead of --minutes (the same on any machine)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: on a busy machine two are many times slower)")
    parser.add_argument("--tasks", default="dates,numbers", help="comma-separated: dates, numbers")
    parser.add_argument("--quick", action="store_true", help="a smoke test: tiny model, seconds, few inputs")
    parser.add_argument("--skip-speed", action="store_true", help="only part A")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the Markdown report")
    parser.add_argument("--note", default="", help="a line for the report on the conditions (load, threads)")
    args = parser.parse_args(argv)
    tasks = [t for t in args.tasks.split(",") if t]
    if not set(tasks) <= set(CONFIGS):
        parser.error(f"--tasks: expected names from {sorted(CONFIGS)}, got {args.tasks!r}")
    for name in ("steps", "threads"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name}: expected a positive integer, got {getattr(args, name)}")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    minutes = 0.1 if args.quick and args.minutes == 3.0 else args.minutes
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        quality = []
        for task in tasks:
            quality.append(part_a(task, minutes, Path(tmp), args.quick, args.steps))
            for name, scores in quality[-1]["sets"].items():
                print(f"{task} {name}: greedy {scores['greedy'][0]:.3f}, beam 4 {scores['beam4'][0]:.3f}", flush=True)
        speed = cache = None
        if not args.skip_speed:
            speed = part_b(args.quick)
            print(f"train tokens/s attnlab/torch: {speed['ratio']:.2f}", flush=True)
            from attnlab.models import load_trained

            if "dates" in tasks:
                model, vocab = load_trained(Path(tmp) / "dates", kind="seq2seq")
                cache = part_c(model, vocab, args.quick)
                print(f"beam 4 cached/uncached speed-up: {cache['ratio']:.1f}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    load = (load_start, os.getloadavg()[0])
    budget = f"{minutes:g} minutes" if args.steps is None else f"{args.steps:,} steps"
    atomic_write_text(args.out, report(quality, speed, cache, budget, args.quick, args.note, load))
    print(f"wrote {args.out}")
    return {"quality": quality, "speed": speed, "cache": cache}


if __name__ == "__main__":
    main()
