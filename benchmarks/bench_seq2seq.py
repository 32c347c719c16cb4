"""The encoder-decoder, measured: translation accuracy in a time budget, training speed against torch.nn.Transformer,
and beam search with and without the decoding caches.

    .venv/bin/python benchmarks/bench_seq2seq.py                  # full: 3 minutes per task, then the speed parts
    .venv/bin/python benchmarks/bench_seq2seq.py --tasks dates --minutes 1
    .venv/bin/python benchmarks/bench_seq2seq.py --quick --out /tmp/seq2seq.md   # a smoke test, about a minute

A. **Quality.** For each task, ``attnlab.training`` trains the config in ``CONFIGS`` for ``--minutes`` (the
   trainer's ``time_budget``); the cosine's length (``lr_decay_iters``) is calibrated from a short probe to end at
   80 % of the budget, then the rate stays at ``min_lr`` until the budget stops the run. Then exact match on
   1,000 held-out inputs (never in any training stream), greedy and beam 4.
   Targets: ≥ 98 % for each task in 3 minutes.
B. **Training speed.** The same model twice: ``torch.nn.Transformer`` (with ``nn.Embedding``, sinusoidal positions
   and a tied ``nn.Linear``) and attnlab's :class:`Transformer` made from it by ``Transformer.from_torch`` (the
   same weights). Both train on the same batches with the same fused AdamW, in interleaved chunks so that a load
   change on a shared machine hits both alike. Tokens are real (unpadded) source + target tokens.
   Target: attnlab ≥ 1.0× torch.
C. **Decoding caches.** Beam 4 over held-out dates with the caches (decoder self-attention KV cache,
   cross-attention keys/values once per source) and without (the whole prefix every step), interleaved.
   Target: ≥ 3× faster, the same tokens.

Everything is seeded; only the number of steps a time budget allows depends on the machine.
"""

from __future__ import annotations

import argparse
import math
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
COMMON = dict(preset="transformer-tiny", batch_size=64, learning_rate=2e-3, min_lr=1e-4, warmup_iters=100,
              weight_decay=0.01, beta1=0.9, beta2=0.98, grad_clip=1.0, label_smoothing=0.0, eval_iters=5, seed=1337)
MODEL = dict(d_model=64, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=256, dropout=0.0,
             context_length=40)
CONFIGS = {"dates": dict(COMMON, task="dates", model=MODEL), "numbers": dict(COMMON, task="numbers", model=MODEL)}
QUICK_MODEL = dict(MODEL, d_model=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=64)


# ---------------------------------------------------------------- A. quality
def calibrated_config(task: str, minutes: float, out: Path, quick: bool):
    """The task's config with the cosine's length set from the probed step time (see the module docstring)."""
    from attnlab.training.config import Seq2SeqTrainConfig
    from attnlab.training.seq2seq_trainer import Seq2SeqTrainer

    values = dict(CONFIGS[task], model=QUICK_MODEL, train_pairs=2000, val_pairs=50) if quick else CONFIGS[task]
    # a step's time does not depend on how many pairs it draws from: the probe draws from a few
    probe_values = dict(values, train_pairs=min(values.get("train_pairs", 100_000), 5000))
    probe = Seq2SeqTrainer(Seq2SeqTrainConfig(**probe_values, out=str(out / f"{task}-probe")), quiet=True)
    for _ in range(3):
        probe.train_step()  # warm-up
    n = 5 if quick else 30
    t0 = time.perf_counter()
    for _ in range(n):
        probe.train_step()
    step_s = (time.perf_counter() - t0) / n
    # The cosine ends at 80 % of the steps the probe expects, then the rate stays at min_lr until the budget is
    # spent: on a shared machine a step can take twice the probe's time, and a schedule cut off half-way (still at
    # a high rate) costs more accuracy than a few hundred steps at the floor.
    decay = max(20, int(0.8 * minutes * 60 / step_s))
    return Seq2SeqTrainConfig(**values, out=str(out / task), max_iters=10 * decay, lr_decay_iters=decay,
                              time_budget=minutes, eval_interval=max(1, decay // 4)), step_s


def exact_match(model, vocab, pairs, beam: int, batch: int = 250) -> tuple[float, float, list]:
    """``(accuracy, seconds, a few misses)`` of translating ``pairs`` with beam width ``beam`` (1 = greedy)."""
    from attnlab.generation.translation import translate

    t0, right, misses = time.perf_counter(), 0, []
    for i in range(0, len(pairs), batch):
        chunk = pairs[i: i + batch]
        for pair, out in zip(chunk, translate(model, vocab, [p.source for p in chunk], beam=beam), strict=True):
            right += out.target == pair.target
            if out.target != pair.target and len(misses) < 5:
                misses.append((pair.source, pair.target, out.target))
    return right / len(pairs), time.perf_counter() - t0, misses


def part_a(task: str, minutes: float, out: Path, quick: bool) -> dict:
    from attnlab.data import get_task
    from attnlab.models import load_trained
    from attnlab.training.seq2seq_trainer import train_seq2seq

    config, step_s = calibrated_config(task, minutes, out, quick)
    result = train_seq2seq(config, quiet=True)
    model, vocab = load_trained(result.out, kind="seq2seq")
    held = get_task(task).held_out(50 if quick else N_EVAL, EVAL_SEED)
    res = {"task": task, "config": config, "probe_ms": 1000 * step_s, "steps": result.step,
           "stop": result.stop_reason, "train_s": result.train_seconds, "tokens_per_s": result.tokens_per_s,
           "val_loss": result.evals[-1][2], "params": model.num_parameters(), "n_eval": len(held)}
    for name, beam in (("greedy", 1), ("beam4", 4)):
        res[name] = exact_match(model, vocab, held, beam)
    return res


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
    b = batches[0]
    first = (ours(b.src_ids, b.tgt_in, src_mask=b.src_mask, tgt_mask=b.tgt_mask, targets=b.tgt_out).loss.item(),
             ref(b.src_ids, b.tgt_in, src_mask=b.src_mask, tgt_mask=b.tgt_mask, targets=b.tgt_out).item())
    runs = {}
    for name, model in (("torch", ref), ("attnlab", ours)):
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
    return res


# ---------------------------------------------------------------- C. decoding caches
def part_c(model, vocab, quick: bool) -> dict:
    from attnlab.data import get_task
    from attnlab.generation.seq2seq import beam_search
    from attnlab.generation.translation import encode_sources

    sources = [p.source for p in get_task("dates").held_out(16 if quick else N_EVAL, EVAL_SEED + 1)]
    src, mask = encode_sources(sources, vocab, model.config.context_length)
    times: dict[bool, list[float]] = {True: [], False: []}
    outs = {}
    with torch.no_grad():
        for _ in range(1 if quick else 3):
            for cached in (True, False):
                t0 = time.perf_counter()
                outs[cached] = beam_search(model, src, src_mask=mask, beam_size=4, use_cache=cached)
                times[cached].append(time.perf_counter() - t0)
    same = torch.equal(outs[True][0], outs[False][0])
    diff = float((outs[True][1] - outs[False][1]).abs().max())
    cached, uncached = min(times[True]), min(times[False])
    return {"n": len(sources), "cached_s": cached, "uncached_s": uncached, "ratio": uncached / cached,
            "same_tokens": same, "max_score_diff": diff}


# ---------------------------------------------------------------- the report
def report(quality: list[dict], speed: dict | None, cache: dict | None, minutes: float, quick: bool,
           note: str = "") -> str:
    from attnlab.bench.machine import machine_facts

    f = machine_facts()
    lines = ["# Encoder-decoder benchmark", "",
             f"CPU {f.cpu}, {f.cores} logical cores, torch {f.torch} ({f.torch_threads} threads), Python {f.python}"
             + (" — **--quick smoke run, not a measurement**" if quick else ""), "", *([note, ""] if note else []),
             f"## A. Exact match on held-out inputs after {minutes:g} minutes of training", "",
             "| task | params | steps (cosine) | train tok/s | val loss | greedy | beam 4 | greedy s | beam 4 s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for q in quality:
        c = q["config"]
        lines.append(f"| {q['task']} | {q['params']:,} | {q['steps']} ({c.lr_decay_iters}) | {q['tokens_per_s']:,.0f} "
                     f"| {q['val_loss']:.4f} | **{100 * q['greedy'][0]:.1f} %** | **{100 * q['beam4'][0]:.1f} %** "
                     f"| {q['greedy'][1]:.1f} | {q['beam4'][1]:.1f} |")
    lines += ["", f"{quality[0]['n_eval'] if quality else N_EVAL} held-out inputs per task "
              f"(`task.held_out(n, seed={EVAL_SEED})`). Target: ≥ 98 % for each task.", ""]
    for q in quality:
        c = q["config"]
        lines.append(f"- {q['task']}: preset {c.preset} with {c.model}, batch {c.batch_size}, lr {c.learning_rate} "
                     f"(warm-up {c.warmup_iters}, cosine to {c.min_lr}), label smoothing {c.label_smoothing}; "
                     f"probe {q['probe_ms']:.1f} ms/step; stopped by {q['stop']}.")
        for src, want, got in q["greedy"][2][:3]:
            lines.append(f"  - greedy miss: `{src}` → `{got}` (expected `{want}`)")
    if speed is not None:
        s = speed
        lines += ["", "## B. Training speed: attnlab vs torch.nn.Transformer, the same model and batches", "",
                  f"{s['params']:,} parameters, {s['steps']} steps each in interleaved chunks, batch 64 dates "
                  f"(mean {s['mean_tokens']:.0f} real tokens), fused AdamW. First-batch loss: attnlab "
                  f"{s['first_loss'][0]:.6f}, torch {s['first_loss'][1]:.6f}.", "",
                  "| model | tokens/s | median ms/step |", "|---|---|---|",
                  f"| torch.nn.Transformer | {s['torch']['tokens_per_s']:,.0f} | {s['torch']['median_ms']:.1f} |",
                  f"| attnlab Transformer | {s['attnlab']['tokens_per_s']:,.0f} | {s['attnlab']['median_ms']:.1f} |",
                  "", f"**attnlab / torch tokens/s: {s['ratio']:.2f}×** (target ≥ 1.0×)"]
    if cache is not None:
        c = cache
        lines += ["", "## C. Beam 4 with and without the decoding caches", "",
                  f"{c['n']} held-out dates, the dates model above; best of the interleaved runs.", "",
                  "| decoding | seconds |", "|---|---|", f"| with caches | {c['cached_s']:.3f} |",
                  f"| without | {c['uncached_s']:.3f} |", "",
                  f"**Speed-up: {c['ratio']:.1f}×** (target ≥ 3×); the same tokens: {c['same_tokens']}, "
                  f"max |Δ score| {c['max_score_diff']:.1e}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="training time budget per task")
    parser.add_argument("--tasks", default="dates,numbers", help="comma-separated: dates, numbers")
    parser.add_argument("--quick", action="store_true", help="a smoke test: tiny model, seconds, few inputs")
    parser.add_argument("--skip-speed", action="store_true", help="only part A")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the Markdown report")
    parser.add_argument("--note", default="", help="a line for the report on the conditions (load, threads)")
    args = parser.parse_args(argv)
    tasks = [t for t in args.tasks.split(",") if t]
    if not set(tasks) <= set(CONFIGS):
        parser.error(f"--tasks: expected names from {sorted(CONFIGS)}, got {args.tasks!r}")
    minutes = 0.1 if args.quick and args.minutes == 3.0 else args.minutes
    with tempfile.TemporaryDirectory() as tmp:
        quality = []
        for task in tasks:
            quality.append(part_a(task, minutes, Path(tmp), args.quick))
            print(f"{task}: greedy {quality[-1]['greedy'][0]:.3f}, beam 4 {quality[-1]['beam4'][0]:.3f}", flush=True)
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
    atomic_write_text(args.out, report(quality, speed, cache, minutes, args.quick, args.note))
    print(f"wrote {args.out}")
    return {"quality": quality, "speed": speed, "cache": cache}


if __name__ == "__main__":
    main()
