"""Today's decoder against GPT-2's: the KV cache and decoding speed of grouped-query attention, and training; and
decoding past the context window.

    .venv/bin/python benchmarks/bench_modern.py            # full: A ≈ 3 min; B 2 × 2,000 iterations + 2 × 5 min
    .venv/bin/python benchmarks/bench_modern.py --quick    # a smoke test (under a minute): small shapes, 30 iterations
    .venv/bin/python benchmarks/bench_modern.py --parts c  # part C alone (≈ 3 min; --quick: seconds)

Part A, decoding at context 2048: one ModernDecoder shape (d_model 512, 4 layers, 8 query heads of 64, SwiGLU 1376,
batch 8) with 8 key/value heads (MHA), 2 (GQA) and 1 (MQA). For each: the KV cache's size (allocated, and the
formula 2 · layers · batch · num_kv_heads · context · head_dim · 4 bytes), and decoding tokens/s: a prompt of
2048 − 64 tokens fills the cache, then 64 tokens are decoded one at a time, each attending to ~2000 cached keys.
Repeats are interleaved (MHA, GQA, MQA, MHA, ...) so that a change of load on the machine hits all three alike;
the median is reported. Each model is timed as users run a model they call themselves, accelerated
(``attnlab.fast.accelerate``), and beside it as built ("plain", the book's modules), in the same rounds.

Part B, training on Shakespeare's characters, the GPT "baby" (learned positions, LayerNorm, GELU, MHA) against the
modern "baby" (RoPE, RMSNorm, SwiGLU, 4 query heads over 2 key/value heads), both ≈ 0.81 M parameters (equal to
0.2 %: SwiGLU's d_ff = 392 spends what GQA and the missing position table save), same data, batches, optimizer
and schedule (nanoGPT's CPU baseline: batch 12, block 64, AdamW 1e-3, warm-up 100, cosine to 1e-4). Two
comparisons: (1) equal iterations, 2,000 each, run in interleaved chunks; (2) equal wall time, a 5-minute budget
each, ``max_iters`` calibrated per model from a short probe so that each cosine ends with its budget. Both models
are scored on the same validation batches.

Part C, past the context window (results/modern-long.md): (1) the KV cache of a sliding-window model decoding 8 times
its window, the rolling cache (``window`` positions per layer) against a full one (every position), both asserted
against their formulas; (2) greedy decoding tokens/s past ``max_position_embeddings`` against transformers'
``generate`` on the same random Llama (written with ``save_pretrained``, loaded with ``load_causal_lm``; the tokens
asserted equal); (3) a ragged batch of 8 prompts of different lengths in one call against 8 separate calls
(tokens/s; the rows asserted equal to the separate calls). Repeats are interleaved, medians reported. ``generate``
runs the model's fast twin by itself; the rows "plain" run the book's modules (``GenerationConfig(accelerate=False)``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from attnlab.bench.machine import machine_facts
from attnlab.files import atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results" / "modern.md"
RESULTS_LONG = Path(__file__).resolve().parent / "results" / "modern-long.md"
LONG = dict(d_model=256, num_layers=4, num_heads=8, num_kv_heads=2, d_ff=688, vocab_size=512, window=256,
            context=512, prompt=384, new_tokens=256, ragged_new=64, repeats=3)
LONG_QUICK = dict(d_model=64, num_layers=2, num_heads=4, num_kv_heads=2, d_ff=176, vocab_size=300, window=16,
                  context=32, prompt=24, new_tokens=24, ragged_new=8, repeats=1)
DECODE = dict(d_model=512, num_layers=4, num_heads=8, head_dim=64, d_ff=1376, vocab_size=256, batch=8,
              context=2048, new_tokens=64, repeats=5)
DECODE_QUICK = dict(d_model=128, num_layers=2, num_heads=8, head_dim=16, d_ff=344, vocab_size=256, batch=2,
                    context=256, new_tokens=8, repeats=2)
KV_HEADS = (8, 2, 1)
TRAIN = dict(data="shakespeare", preset="baby", batch_size=12, learning_rate=1e-3, min_lr=1e-4, warmup_iters=100,
             weight_decay=0.1, beta1=0.9, beta2=0.99, grad_clip=1.0, seed=1337)
ITERS, BUDGET_MIN, VAL_ITERS = 2000, 5.0, 200


# ---------------------------------------------------------------- A. the cache and decoding
def decoder(num_kv_heads: int, s: dict):
    from attnlab.models import ModernDecoder, ModernDecoderConfig

    torch.manual_seed(0)
    config = ModernDecoderConfig(vocab_size=s["vocab_size"], context_length=s["context"], d_model=s["d_model"],
                                 num_layers=s["num_layers"], num_heads=s["num_heads"], num_kv_heads=num_kv_heads,
                                 head_dim=s["head_dim"], d_ff=s["d_ff"])
    return ModernDecoder(config).eval()


@torch.no_grad()
def decode_seconds(model, s: dict) -> tuple[float, int]:
    """Seconds to decode ``new_tokens`` tokens after a prompt that fills the cache to ``context``; cache bytes."""
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, s["vocab_size"], (s["batch"], s["context"] - s["new_tokens"]), generator=g)
    cache = model.new_cache(s["batch"])
    logits = model(prompt, kv_cache=cache).logits[:, -1]
    start = time.perf_counter()
    for _ in range(s["new_tokens"]):
        nxt = logits.argmax(-1, keepdim=True)
        logits = model(nxt, kv_cache=cache).logits[:, -1]
    seconds = time.perf_counter() - start
    return seconds, sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)


def part_a(s: dict) -> list[dict]:
    from attnlab.fast import accelerated

    plain = {h: decoder(h, s) for h in KV_HEADS}
    paths = {"fast": {h: accelerated(m) for h, m in plain.items()}, "plain": plain}  # the twin shares the weights
    times: dict[tuple[str, int], list[float]] = {(path, h): [] for path in paths for h in KV_HEADS}
    cache_bytes = {}
    for models in paths.values():
        for model in models.values():
            decode_seconds(model, {**s, "new_tokens": 2})  # warm-up
    for _ in range(s["repeats"]):
        for h in KV_HEADS:
            for path, models in paths.items():
                seconds, cache_bytes[h] = decode_seconds(models[h], s)
                times[path, h].append(seconds)
    rows = []
    for h in KV_HEADS:
        formula = 2 * s["num_layers"] * s["batch"] * h * s["context"] * s["head_dim"] * 4
        assert cache_bytes[h] == formula, (cache_bytes[h], formula)
        median, plain_median = statistics.median(times["fast", h]), statistics.median(times["plain", h])
        rows.append({"num_kv_heads": h, "params": plain[h].num_parameters(), "cache_mib": cache_bytes[h] / 2**20,
                     "tokens_per_s": s["batch"] * s["new_tokens"] / median,
                     "ms_per_step": 1000 * median / s["new_tokens"],
                     "spread": (max(times["fast", h]) - min(times["fast", h])) / median,
                     "plain_tokens_per_s": s["batch"] * s["new_tokens"] / plain_median,
                     "plain_ms_per_step": 1000 * plain_median / s["new_tokens"]})
    for r in rows:
        r["speedup"] = r["tokens_per_s"] / rows[0]["tokens_per_s"]
        r["cache_ratio"] = rows[0]["cache_mib"] / r["cache_mib"]
    return rows


# ---------------------------------------------------------------- C. past the context window
def long_config(s: dict, **overrides):
    from attnlab.models import ModernDecoderConfig

    return ModernDecoderConfig(vocab_size=s["vocab_size"], context_length=s["context"], d_model=s["d_model"],
                               num_layers=s["num_layers"], num_heads=s["num_heads"], num_kv_heads=s["num_kv_heads"],
                               d_ff=s["d_ff"], **overrides)


@torch.no_grad()
def rolling_memory(s: dict) -> list[dict]:
    """Cache bytes of a window-``w`` model decoding to 8·w positions: its rolling cache against a full one."""
    from attnlab.models import KVCache, ModernDecoder

    torch.manual_seed(0)
    model = ModernDecoder(long_config(s, sliding_window=s["window"])).eval()
    c, w = model.config, s["window"]
    caches = {"rolling": model.new_cache(1),
              "full": KVCache(c.num_layers, 1, c.num_kv_heads, None, c.head_dim)}  # every position kept
    rows, token = [], torch.zeros(1, 1, dtype=torch.long)
    per_position = 2 * c.num_layers * c.num_kv_heads * c.head_dim * 4  # keys and values, float32, batch 1
    for length in range(1, 8 * w + 1):
        for cache in caches.values():
            model(token, kv_cache=cache)
        if length in (w // 2, w, 2 * w, 4 * w, 8 * w):
            full_capacity = caches["full"][0].keys.shape[2]
            assert caches["rolling"].nbytes == per_position * w, caches["rolling"].nbytes  # allocated once
            assert caches["full"].nbytes == per_position * full_capacity and full_capacity >= length
            rows.append({"length": length, "rolling": caches["rolling"].nbytes, "full": caches["full"].nbytes,
                         "rolling_formula": per_position * w, "filled": per_position * length})
    return rows


@torch.no_grad()
def order_one(model):
    """Weights of order 1 (matrices N(0, 1/d), gains 1 + N(0, 0.2²)): greedy choices far from ties, so that two
    computations of the same tokens cannot part on a rounding."""
    for p in model.parameters():
        p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5 if p.dim() > 1 else 1 + 0.2 * torch.randn_like(p))
    return model


def timed(fn, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def against_transformers(s: dict, tmp: Path) -> dict | None:
    """Greedy decoding of ``new_tokens`` after ``prompt`` tokens (past ``context``), attnlab against transformers on
    one random Llama; None without transformers."""
    try:
        import transformers
    except ImportError:
        return None
    from attnlab.generation import GenerationConfig, generate
    from attnlab.pretrained import load_causal_lm

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=s["vocab_size"], hidden_size=s["d_model"],
                                      intermediate_size=s["d_ff"], num_hidden_layers=s["num_layers"],
                                      num_attention_heads=s["num_heads"], num_key_value_heads=s["num_kv_heads"],
                                      max_position_embeddings=s["context"], bos_token_id=None, eos_token_id=None,
                                      pad_token_id=None)
    hf = order_one(transformers.LlamaForCausalLM(config).eval())
    hf.save_pretrained(tmp / "llama")
    hf.generation_config.pad_token_id, hf.generation_config.eos_token_id = 0, None
    _write_byte_tokenizer(tmp / "llama" / "tokenizer.json")
    ours, _ = load_causal_lm(tmp / "llama")
    # ids from 1: transformers' generate takes every id equal to pad_token_id (0) in a prompt for padding
    prompt = torch.randint(1, s["vocab_size"], (1, s["prompt"]), generator=torch.Generator().manual_seed(0))
    greedy = GenerationConfig(temperature=0)
    runs = {"attnlab": lambda: generate(ours, prompt, s["new_tokens"], greedy),
            "transformers": lambda: hf.generate(prompt, max_new_tokens=s["new_tokens"], do_sample=False),
            "attnlab plain": lambda: generate(ours, prompt, s["new_tokens"], greedy.replace(accelerate=False))}
    with torch.no_grad():
        want = runs["transformers"]()
        assert all(torch.equal(runs[name](), want) for name in ("attnlab", "attnlab plain")), \
            "greedy tokens differ from transformers'"
        times = {name: [] for name in runs}
        for _ in range(s["repeats"]):
            for name, run in runs.items():  # interleaved
                times[name] += timed(run, 1)
    return {name: s["new_tokens"] / statistics.median(t) for name, t in times.items()}


def _write_byte_tokenizer(path: Path) -> None:
    """A byte-level BPE of 256 bytes and a few merges: ``load_causal_lm`` reads a directory's tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    tok.train_from_iterator(["to be or not to be"], trainers.BpeTrainer(
        vocab_size=260, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok.save(str(path))


@torch.no_grad()
def ragged_batch(s: dict) -> dict:
    """8 prompts of lengths spread over [prompt / 8, prompt]: one ragged call against 8 calls, tokens/s."""
    from attnlab.generation import GenerationConfig, generate
    from attnlab.models import ModernDecoder

    torch.manual_seed(0)
    model = order_one(ModernDecoder(long_config(s)).eval())
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, s["vocab_size"], (n,), generator=g).tolist()
               for n in torch.linspace(s["prompt"] // 8, s["prompt"], 8).long().tolist()]
    n, greedy = s["ragged_new"], GenerationConfig(temperature=0)
    runs = {"one ragged call": lambda: generate(model, prompts, n, greedy),
            "8 separate calls": lambda: [generate(model, torch.tensor([p]), n, greedy)[0].tolist()
                                         for p in prompts],
            "one ragged call, plain": lambda: generate(model, prompts, n, greedy.replace(accelerate=False))}
    alone = runs["8 separate calls"]()
    assert runs["one ragged call"]() == alone == runs["one ragged call, plain"](), \
        "a ragged row differs from its prompt alone"
    times = {name: [] for name in runs}
    for _ in range(s["repeats"]):
        for name, run in runs.items():
            times[name] += timed(run, 1)
    return {name: 8 * n / statistics.median(t) for name, t in times.items()}


def section_c(memory: list[dict], hf: dict | None, ragged: dict, s: dict) -> list[str]:
    mib = 2**20
    lines = [
        "## C. Past the context window", "",
        f"ModernDecoder d_model {s['d_model']}, {s['num_layers']} layers, {s['num_heads']} query heads over "
        f"{s['num_kv_heads']} key/value heads, SwiGLU {s['d_ff']}, float32, batch 1 unless said.", "",
        f"### KV cache of a sliding-window model (window {s['window']}) decoding {8 * s['window']:,} positions", "",
        "| positions | rolling cache MiB | formula: 2 · layers · kv heads · window · head_dim · 4 | "
        "full cache MiB (allocated) | full, filled part |", "|---|---|---|---|---|",
        *(f"| {r['length']:,} | {r['rolling'] / mib:.3f} | {r['rolling_formula'] / mib:.3f} | {r['full'] / mib:.3f} "
          f"| {r['filled'] / mib:.3f} |" for r in memory),
        "", "Both asserted: the rolling cache equals its formula (bounded by the window), the full one holds every "
        "position (its buffers grow by powers of two).", "",
    ]
    if hf is not None:
        lines += [f"### Greedy decoding past max_position_embeddings ({s['context']}): prompt {s['prompt']}, "
                  f"{s['new_tokens']} new tokens, a random Llama", "",
                  "| | tokens/s |", "|---|---|", *(f"| {k} | {v:,.1f} |" for k, v in hf.items()),
                  f"| attnlab / transformers | {hf['attnlab'] / hf['transformers']:.2f}× |",
                  f"| attnlab plain / transformers | {hf['attnlab plain'] / hf['transformers']:.2f}× |", "",
                  "The three produce the same tokens (asserted).", ""]
    lines += [f"### A ragged batch of 8 prompts ({s['prompt'] // 8}–{s['prompt']} tokens), {s['ragged_new']} new "
              "tokens each", "", "| | tokens/s |", "|---|---|", *(f"| {k} | {v:,.1f} |" for k, v in ragged.items()),
              f"| batch / separate | {ragged['one ragged call'] / ragged['8 separate calls']:.2f}× |", "",
              "Every row equals its prompt generated alone, on both paths (asserted).", ""]
    return lines


def part_c(s: dict) -> list[str]:
    memory = rolling_memory(s)
    with tempfile.TemporaryDirectory() as tmp:
        hf = against_transformers(s, Path(tmp))
    ragged = ragged_batch(s)
    print(f"C: rolling cache {memory[-1]['rolling']:,} B vs full {memory[-1]['full']:,} B at {memory[-1]['length']}; "
          f"transformers {hf}; ragged {ragged}")
    return section_c(memory, hf, ragged, s)


# ---------------------------------------------------------------- B. training, GPT against the modern decoder
def trainer(arch: str, out: Path, quick: bool, **overrides):
    from attnlab.training import TrainConfig, Trainer

    values = {**TRAIN, "arch": arch, "out": str(out / arch), "eval_iters": 10 if quick else VAL_ITERS,
              "max_iters": 30 if quick else ITERS, "eval_interval": 10**6, **overrides}
    return Trainer(TrainConfig(**values), quiet=True)


def equal_iterations(out: Path, quick: bool) -> dict:
    trainers = {arch: trainer(arch, out / "iters", quick) for arch in ("gpt", "modern")}
    seconds = {arch: 0.0 for arch in trainers}
    chunk = 10 if quick else 100
    for _ in range(trainers["gpt"].config.max_iters // chunk):  # interleaved: a load change hits both alike
        for arch, t in trainers.items():
            start = time.perf_counter()
            for _ in range(chunk):
                t.train_step()
            seconds[arch] += time.perf_counter() - start
    res = {}
    for arch, t in trainers.items():
        train_loss, val_loss = t.evaluate()  # the same fixed batches for both: same seed, same data
        res[arch] = {"params": t.model.num_parameters(), "steps": t.step, "seconds": seconds[arch],
                     "tokens_per_s": t.tokens_per_step * t.step / seconds[arch], "train_loss": train_loss,
                     "val_loss": val_loss}
    return res


def equal_time(out: Path, quick: bool, budget_min: float) -> dict:
    res = {}
    for arch in ("gpt", "modern"):
        probe = trainer(arch, out / f"probe-{arch}", quick, max_iters=10**6)
        for _ in range(3 if quick else 10):
            probe.train_step()  # warm-up: the first steps pay for allocations and kernel selection
        times = []
        for _ in range(5 if quick else 40):
            start = time.perf_counter()
            probe.train_step()
            times.append(time.perf_counter() - start)
        step_s = statistics.median(times)  # a median: one step slowed by the machine does not move it
        max_iters = max(30, int(0.9 * budget_min * 60 / step_s))  # the cosine ends just before the budget
        t = trainer(arch, out / f"budget-{arch}", quick, max_iters=max_iters, time_budget=budget_min)
        result = t.train()
        train_loss, val_loss = t.evaluate()
        res[arch] = {"params": t.model.num_parameters(), "planned": max_iters, "steps": result.step,
                     "stop": result.stop_reason, "tokens_per_s": result.tokens_per_s, "train_loss": train_loss,
                     "val_loss": val_loss}
    return res


# ---------------------------------------------------------------- the report
def section_a(rows: list[dict], s: dict) -> list[str]:
    name = {8: "MHA (8 over 8)", 2: "GQA (8 over 2)", 1: "MQA (8 over 1)"}
    return [
        f"## A. KV cache and decoding at context {s['context']:,}", "",
        f"ModernDecoder d_model {s['d_model']}, {s['num_layers']} layers, {s['num_heads']} query heads of "
        f"{s['head_dim']}, SwiGLU {s['d_ff']}, float32, batch {s['batch']}. A prompt of "
        f"{s['context'] - s['new_tokens']:,} tokens fills the cache, then {s['new_tokens']} tokens are decoded one "
        f"at a time; median of {s['repeats']} interleaved repeats (spread: (max − min) / median). The model is "
        "accelerated (`attnlab.fast.accelerated`); \"plain\": the same model as built, in the same rounds.", "",
        "| attention | parameters | KV cache MiB | cache vs MHA | tokens/s | ms per step | vs MHA | spread | "
        "plain tokens/s | plain ms per step |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(f"| {name.get(r['num_kv_heads'], r['num_kv_heads'])} | {r['params']:,} | {r['cache_mib']:.1f} | "
          f"1/{r['cache_ratio']:.0f} | {r['tokens_per_s']:,.0f} | {r['ms_per_step']:.2f} | {r['speedup']:.2f}× | "
          f"{r['spread']:.0%} | {r['plain_tokens_per_s']:,.0f} | {r['plain_ms_per_step']:.2f} |" for r in rows),
        "", "The cache size is the allocated one, asserted equal to 2 · layers · batch · num_kv_heads · context · "
        "head_dim · 4 bytes.", "",
    ]


def section_b(iters: dict, budget: dict, budget_min: float) -> list[str]:
    label = {"gpt": "GPT baby (LayerNorm, learned positions, GELU, MHA)",
             "modern": "modern baby (RMSNorm, RoPE, SwiGLU, GQA 4/2)"}
    return [
        "## B. Training on Shakespeare's characters, equal parameter count", "",
        f"Both: batch 12, block 64, AdamW 1e-3 (warm-up 100, cosine to 1e-4), weight decay 0.1, clip 1.0, "
        f"dropout 0, seed 1337; losses are means over the same {VAL_ITERS if iters['gpt']['steps'] >= 100 else 10} "
        f"fixed batches of each split.", "",
        f"### Equal iterations ({iters['gpt']['steps']:,} each, interleaved chunks)", "",
        "| model | parameters | train s | tokens/s | train loss | val loss |", "|---|---|---|---|---|---|",
        *(f"| {label[a]} | {r['params']:,} | {r['seconds']:.0f} | {r['tokens_per_s']:,.0f} | {r['train_loss']:.3f} | "
          f"**{r['val_loss']:.3f}** |" for a, r in iters.items()),
        "", f"### Equal wall time ({budget_min:g} minutes each)", "",
        "| model | parameters | steps (planned) | stop | tokens/s | train loss | val loss |",
        "|---|---|---|---|---|---|---|",
        *(f"| {label[a]} | {r['params']:,} | {r['steps']:,} ({r['planned']:,}) | {r['stop']} | "
          f"{r['tokens_per_s']:,.0f} | {r['train_loss']:.3f} | **{r['val_loss']:.3f}** |" for a, r in budget.items()),
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test: small shapes, 30 iterations, 10 s")
    parser.add_argument("--budget", type=float, default=BUDGET_MIN, help="minutes per model for the equal-time run")
    parser.add_argument("--skip-b", action="store_true", help="part A only (of A and B)")
    parser.add_argument("--parts", default="abc", help="which parts to run: any of a, b, c (default abc)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results file of parts A and B")
    parser.add_argument("--out-long", type=Path, default=RESULTS_LONG, help="the results file of part C")
    args = parser.parse_args()
    title = " (--quick: a smoke test, not a measurement)" if args.quick else ""
    if "c" in args.parts:
        load = os.getloadavg()  # the other processes on the machine: timings under load are noisy
        lines = [f"# Modern decoder past its context window{title}", "", machine_facts().summary(),
                 f"Load average at the start (1, 5, 15 min): {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}.", "",
                 *part_c(LONG_QUICK if args.quick else LONG)]
        args.out_long.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.out_long, "\n".join(lines))
        print(f"wrote {args.out_long}")
    if "a" not in args.parts:
        return
    shapes = DECODE_QUICK if args.quick else DECODE
    rows = part_a(shapes)
    for r in rows:
        print(f"A: {r['num_kv_heads']} kv heads: cache {r['cache_mib']:.1f} MiB, {r['tokens_per_s']:,.0f} tok/s")
    title = "# Modern decoder benchmark" + (" (--quick: a smoke test, not a measurement)" if args.quick else "")
    lines = [title, "", machine_facts().summary(), "", *section_a(rows, shapes)]
    if not args.skip_b and "b" in args.parts:
        budget = 10 / 60 if args.quick else args.budget
        with tempfile.TemporaryDirectory() as tmp:
            iters = equal_iterations(Path(tmp), args.quick)
            timed = equal_time(Path(tmp), args.quick, budget)
        for a in ("gpt", "modern"):
            print(f"B: {a}: val {iters[a]['val_loss']:.3f} after {iters[a]['steps']} steps; "
                  f"{timed[a]['val_loss']:.3f} in {budget:g} min")
        lines += section_b(iters, timed, budget)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, "\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
