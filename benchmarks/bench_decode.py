"""Decoding speed against the machine's limit: attnlab (eager, compiled, int8, int4) against Hugging Face generate.

    .venv/bin/python benchmarks/bench_decode.py             # the full run (≈ 65 min on a 2-core machine)
    .venv/bin/python benchmarks/bench_decode.py --quick --out /tmp/decode.md   # a smoke test: small models (≈ 4 min)

Two models with the same random weights in both libraries (a Hugging Face model is built, saved, and loaded into
attnlab with ``load_causal_lm``): gpt2-small (124 M parameters, tied head) and a ~100 M-parameter Llama-style
decoder. Greedy decoding of ``--new`` tokens after a ``--prompt``-token prompt, at batch 1 and 8. Each case is
timed ``--repeats`` times after a warm-up run (which compiles, for ``compile=True``); the median is reported.
tokens/s counts the new tokens of every row, prefill included. Every attnlab variant runs ``generate`` as users do,
on the model's fast twin (``attnlab.fast``), and again on the book's plain modules
(``GenerationConfig(accelerate=False)``, the rows "attnlab plain ..."; ``--no-plain`` leaves them out). int4 is
``quantize(model, "int4")`` with group size 128 (``attnlab sample --quantize int4``), timed in the same run as int8.
The products run on attnlab's C++ kernels: the run stops where ``attnlab kernels`` has not built them.

The limit: a decoding step reads every weight once (``attnlab.bench.decoding.bytes_per_step``), so it cannot run
faster than the read bandwidth (``attnlab.bench.machine.read_bandwidth``) over those bytes. On a shared machine the
read rate swings with the neighbours' load (25-63 GB/s within an hour on one 2-core guest), over minutes, so the
bandwidth is read just before and just after every case, and a case's limit is the higher of its two readings:
"of limit" is its steps/s over that, for the variant's own bytes (int8 reads a quarter of fp32's). "of best" puts
the same steps/s over the best reading of the whole run, which may have come in a faster spell than the case's.

Quality of int8 and int4 beside their speed: the perplexity of a small GPT trained on Shakespeare's characters
(here, for ``--train-iters`` steps, or the ``attnlab train`` output given as ``--checkpoint``) and of the loaded
checkpoint, against fp32, and the fraction of 100 prompts whose 30 greedy tokens equal fp32's. The report ends with
the targets: int4 at least as fast as int8 at batch 1, and the trained GPT's int4 perplexity within 1 % of fp32's.
"""

from __future__ import annotations

import os

# before torch's first allocation: 2 MiB pages for large tensors, for HF and attnlab alike (as `attnlab` sets it)
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

import argparse
import copy
import importlib.metadata
import importlib.util
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from attnlab.bench.decoding import bytes_per_step, step_limit
from attnlab.bench.machine import machine_facts, matmul_gflops, read_bandwidth
from attnlab.fast import kernels
from attnlab.files import atomic_write_text
from attnlab.generation import GenerationConfig, generate
from attnlab.generation.quality import greedy_agreement, perplexity, prompts_from
from attnlab.models import quantize

RESULTS = Path(__file__).resolve().parent / "results" / "decode.md"
MODERN_100M = dict(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                   num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=1024,
                   tie_word_embeddings=True)
INT4_GROUP = 128  # quantize's default, what `attnlab sample --quantize int4` runs
#: the targets the report checks: int4 at batch 1 at least this fast against int8, its perplexity within this of fp32
INT4_SPEED_TARGET, INT4_PPL_TARGET = 1.0, 0.01
TRAINED = "GPT baby, trained on Shakespeare"  # the quality row the perplexity target is for


def hf_models(quick: bool) -> dict[str, object]:
    """The Hugging Face models, random weights of order one (seeded), in eval mode."""
    import transformers

    torch.manual_seed(0)
    if quick:
        gpt2 = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=256)
        llama = transformers.LlamaConfig(**{**MODERN_100M, "hidden_size": 128, "intermediate_size": 256,
                                            "num_hidden_layers": 2, "num_attention_heads": 4,
                                            "num_key_value_heads": 2, "vocab_size": 1000})
    else:
        gpt2, llama = transformers.GPT2Config(), transformers.LlamaConfig(**MODERN_100M)
    models = {"gpt2-small" if not quick else "gpt2-quick": transformers.GPT2LMHeadModel(gpt2).eval(),
              "modern-100M" if not quick else "modern-quick": transformers.LlamaForCausalLM(llama).eval()}
    for model in models.values():
        order_one(model)
    return models


@torch.no_grad()
def order_one(model) -> None:
    """Matrices N(0, 1/d_model): logits of order one. transformers' own init (std 0.02) makes every logit nearly 0,
    and greedy tokens then hang on rounding (ties), which would make "same tokens" say nothing."""
    d = model.config.hidden_size
    g = torch.Generator().manual_seed(0)
    for p in model.parameters():
        if p.dim() >= 2:
            p.copy_(torch.randn(p.shape, generator=g) / d**0.5)


def as_attnlab(hf, directory: Path):
    """The same weights as an attnlab model: written by transformers, read by attnlab's loader."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from attnlab.pretrained.causal_lm import load_causal_lm

    hf.save_pretrained(directory)
    tok = Tokenizer(models.BPE())  # the loader wants a tokenizer beside the weights; the bench feeds ids
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(["attention"], trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok.save(str(directory / "tokenizer.json"))
    return load_causal_lm(directory)[0]


def timed(run: Callable[[int], torch.Tensor], new: int, repeats: int, budget_s: float) -> tuple[float, int, object]:
    """Median seconds of ``run(n)`` (n new tokens) over ``repeats``, after a warm-up of 4 tokens (which compiles,
    where there is compiling); the n, and the last output. ``n`` is ``new``, or fewer where a probe of 8 tokens
    says ``repeats`` runs of ``new`` would take longer than ``budget_s`` (a slow variant is measured, not waited
    for)."""
    run(4)
    t0 = time.perf_counter()
    run(8)
    per_token = (time.perf_counter() - t0) / 8
    n = new if per_token * new * repeats <= budget_s else max(8, int(budget_s / repeats / per_token))
    n = min(n, new)
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = run(n)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), n, out


def variants(model, plain: bool = True) -> dict[str, tuple[object, dict]]:
    """attnlab's ways to decode ``model``: (the model, ``GenerationConfig``'s options), each on the fast path and,
    with ``plain``, on the book's ("attnlab plain ...")."""
    int8 = quantize(copy.deepcopy(model), "int8")
    fast = {"eager": (model, {}), "compile=True": (model, {"compile": True}),
            "int8": (int8, {}), "int8 compile=True": (int8, {"compile": True})}
    try:
        fast["int4"] = (quantize(copy.deepcopy(model), "int4", group_size=INT4_GROUP), {})
    except ValueError as err:
        print(f"int4 skipped: {err}")
    out = {f"attnlab {name}": case for name, case in fast.items()}
    if plain:
        out.update({f"attnlab plain{'' if name == 'eager' else ' ' + name}": (m, {**opts, "accelerate": False})
                    for name, (m, opts) in fast.items()})
    return out


def torchao_int8(model):
    """torchao's int8 weight-only quantization of the same model, where torchao is installed (the comparison)."""
    try:
        from torchao.quantization import Int8WeightOnlyConfig, quantize_
    except ImportError:
        return None
    m = copy.deepcopy(model)
    quantize_(m, Int8WeightOnlyConfig())
    return m


def torchao_note(args) -> str:
    """Whether the torchao rows are in the table, and if not, why."""
    if not args.torchao:
        return "torchao left out (`--no-torchao`)."
    if importlib.util.find_spec("torchao") is None:
        return "torchao is not installed (the `quant` extra): its rows are left out."
    return f"torchao {importlib.metadata.version('torchao')}."


def bench_model(name: str, hf, model, args, reads: list) -> list[dict]:
    """Every variant at batch 1 and 8, each against HF generate timed just before it; ``reads`` gathers the
    bandwidth readings taken around the cases."""
    candidates = variants(model, args.plain)
    ao = torchao_int8(model) if args.torchao else None
    if ao is not None:
        candidates["torchao int8 (eager)"] = (ao, {})
    rows = []
    for batch in (1, 8):
        idx = torch.randint(0, model.config.vocab_size, (batch, args.prompt),
                            generator=torch.Generator().manual_seed(batch))
        rows += bench_batch(name, hf, candidates, idx, args, reads)
    return rows


def bracketed(case: Callable[[], dict], reads: list) -> dict:
    """``case()``'s row, with ``read``: the higher of the bandwidth readings just before and just after it (the
    limit it ran under). ``reads`` ends with the reading before it (the run's first, or the previous case's after)."""
    before = reads[-1]
    row = case()
    reads.append(read_bandwidth(repeats=3))
    return {**row, "read": max(before.value, reads[-1].value)}


def bench_batch(name: str, hf, candidates: dict, idx: torch.Tensor, args, reads: list) -> list[dict]:
    batch = idx.shape[0]
    rows = [bracketed(lambda: hf_case(name, hf, idx, args), reads)]
    hf_out, hf_n, hf_tps = rows[0].pop("out"), rows[0]["n"], rows[0]["tps"]
    for variant, (m, opts) in candidates.items():
        try:
            row = bracketed(lambda m=m, opts=opts, variant=variant: variant_case(
                name, variant, m, opts, idx, args), reads)
        except Exception as err:  # a variant that cannot run here is reported, not fatal to the run
            print(f"{name} B={batch} {variant}: failed: {type(err).__name__}: {str(err)[:200]}", flush=True)
            rows.append(dict(model=name, batch=batch, variant=variant, failed=f"{type(err).__name__}"))
            continue
        out = row.pop("out")
        row["ratio"] = row["tps"] / hf_tps
        if "int" not in variant and row["n"] == hf_n:
            row["same"] = bool(torch.equal(out, hf_out))
        rows.append(row)
        frac = row["tps"] / batch / step_limit(row["read"], row["bytes"])
        print(f"{name} B={batch} {variant}: {row['tps']:.1f} tok/s ({row['ratio']:.2f}× HF), {row['n']} tokens, "
              f"{100 * frac:.0f} % of {row['read']:.1f} GB/s", flush=True)
    return rows


def hf_case(name: str, hf, idx: torch.Tensor, args) -> dict:
    """Hugging Face's greedy ``generate`` timed: its row, with its last output as ``out``."""
    def run(n: int):
        with torch.inference_mode():
            return hf.generate(idx, do_sample=False, max_new_tokens=n, min_new_tokens=n, pad_token_id=0,
                               eos_token_id=None, attention_mask=torch.ones_like(idx))

    s, n, out = timed(run, args.new, args.repeats, args.case_budget)
    return dict(model=name, batch=idx.shape[0], variant="HF generate (fp32)", tps=idx.shape[0] * n / s, ratio=1.0,
                n=n, bytes=bytes_per_step(hf), same="–", out=out)


def variant_case(name: str, variant: str, model, opts: dict, idx: torch.Tensor, args) -> dict:
    """One attnlab variant timed: its row, with its last output as ``out``. A compiled variant starts from a fresh
    compiler state, as in a process of its own: the run compiles the step for 16 models and shapes, and dynamo
    fails a ``fullgraph`` function past 8 (its ``recompile_limit``)."""
    config = GenerationConfig(temperature=0, **opts)
    if config.compile:
        torch._dynamo.reset()
    s, n, out = timed(lambda k: generate(model, idx, k, config), args.new, args.repeats, args.case_budget)
    return dict(model=name, batch=idx.shape[0], variant=variant, tps=idx.shape[0] * n / s, n=n,
                bytes=bytes_per_step(model), same="–", out=out)


def trained_gpt(args, directory: Path):
    """A small GPT trained on Shakespeare's characters, and its validation tokens."""
    from attnlab.data import encode_cached, load_text, train_val_split
    from attnlab.models import load_trained
    from attnlab.training import TrainConfig, train

    path = args.checkpoint
    if path is None:
        path = directory / "trained"
        train(TrainConfig(data="shakespeare", out=str(path), preset="baby", max_iters=args.train_iters,
                          eval_interval=args.train_iters, eval_iters=5), quiet=True)
    model, tokenizer = load_trained(path)
    text = load_text("shakespeare")
    val = train_val_split(encode_cached(text, tokenizer, directory / "cache"), 0.1)[1]
    return model, torch.tensor(val[:20_000], dtype=torch.long)  # a copy: the cached tokens are read-only


#: the quality table's schemes: (its name, quantize's scheme, the int4 group size)
QUALITY_SCHEMES = (("int8", "int8", 128), ("int4", "int4", INT4_GROUP), ("int4, group 32", "int4", 32))


def quality(name: str, model, tokens: torch.Tensor) -> list[dict]:
    """Perplexity against fp32, and greedy agreement over 100 prompts of 30 tokens."""
    fp32 = perplexity(model, tokens)
    prompts = prompts_from(tokens, 100, 16)
    rows = []
    for label, scheme, group_size in QUALITY_SCHEMES:
        try:
            q = quantize(copy.deepcopy(model), scheme, group_size=group_size)
        except ValueError as err:
            rows.append(dict(model=name, scheme=label, note=str(err)))
            continue
        ppl = perplexity(q, tokens)
        rows.append(dict(model=name, scheme=label, fp32=fp32, ppl=ppl, change=100 * (ppl / fp32 - 1),
                         agree=greedy_agreement(model, q, prompts, 30), note=""))
    return rows


def write(args, facts, matmul, reads: list, speed: list[dict], qual: list[dict], load: str) -> str:
    values = sorted(r.value for r in reads)
    best = values[-1]
    lines = ["# Decoding benchmark" + (" (--quick: a smoke test, not a measurement)" if args.quick else ""), "",
             facts.summary(), "",
             f"- Limits measured in this run: memory read ({reads[0].what}, each reading the best of its repeats) "
             f"before and after every case, {len(reads)} readings from {values[0]:.1f} to {values[-1]:.1f} GB/s "
             f"(median {statistics.median(values):.1f}, best **{best:.1f}**); fp32 matmul "
             f"**{matmul.value:.0f} GFLOP/s**.",
             f"- Load when the run started: `{load}`. Threads: {torch.get_num_threads()}. int8 and few-row fp32 "
             f"products: {kernels.status()}. `THP_MEM_ALLOC_ENABLE={os.environ.get('THP_MEM_ALLOC_ENABLE', '')}` "
             "(2 MiB pages for large tensors, in both libraries). " + torchao_note(args),
             f"- Greedy decoding, prompt {args.prompt} tokens, {args.new} new tokens (fewer where {args.repeats} runs "
             f"would take over {args.case_budget:.0f} s: \"new tokens\"); median of {args.repeats} runs after a "
             "warm-up. \"of limit\": steps/s over the case's limit, the read bandwidth (the higher of the readings "
             "just before and just after the case, \"GB/s\") over the bytes of weights the variant reads per step; "
             "\"of best\": the same over the run's best reading. \"same tokens\": equal to HF generate's, token for "
             "token.", "",
             "| model | batch | variant | new tokens | tok/s | × HF | GB/s | of limit | of best | same tokens |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in speed:
        if "failed" in r:
            lines.append(f"| {r['model']} | {r['batch']} | {r['variant']} | – | failed: {r['failed']} | – | – | – | – "
                         "| – |")
            continue
        steps = r["tps"] / r["batch"]
        lines.append(f"| {r['model']} | {r['batch']} | {r['variant']} | {r['n']} | {r['tps']:.1f} | "
                     f"{r['ratio']:.2f}× | {r['read']:.1f} | {100 * steps / step_limit(r['read'], r['bytes']):.0f} % | "
                     f"{100 * steps / step_limit(best, r['bytes']):.0f} % | {r['same']} |")
    lines += ["", "## Quality of the quantized weights", "",
              "Perplexity on held-out tokens (consecutive windows of the context length) against fp32; agreement: "
              "the fraction of 100 prompts whose 30 greedy tokens equal fp32's, all of them. int4: group size "
              f"{INT4_GROUP}, as timed above; \"int4, group 32\": four times the scales.",
              "", "| model | scheme | fp32 ppl | quantized ppl | change | greedy agreement |",
              "|---|---|---|---|---|---|"]
    for r in qual:
        if r["note"]:
            lines.append(f"| {r['model']} | {r['scheme']} | – | – | – | {r['note']} |")
        else:
            lines.append(f"| {r['model']} | {r['scheme']} | {r['fp32']:.3f} | {r['ppl']:.3f} | {r['change']:+.2f} % "
                         f"| {r['agree']:.2f} |")
    lines += targets(speed, qual)
    lines += ["", f"Reproduce: `{command(args)}`", ""]
    return "\n".join(lines)


def targets(speed: list[dict], qual: list[dict]) -> list[str]:
    """The int4 targets, checked against this run's rows: int4's tok/s over int8's at batch 1 (each model, the fast
    path), and the trained GPT's int4 perplexity against fp32's."""
    lines = ["", "## Targets", "", "| target | model | measured | met |", "|---|---|---|---|"]
    rows = {(r["model"], r["batch"], r["variant"]): r for r in speed if "failed" not in r}
    for model in dict.fromkeys(r["model"] for r in speed):
        int4, int8 = rows.get((model, 1, "attnlab int4")), rows.get((model, 1, "attnlab int8"))
        if int4 is None or int8 is None:
            lines.append(f"| int4 ≥ {INT4_SPEED_TARGET:g}× int8's tok/s at batch 1 | {model} | not measured | – |")
            continue
        ratio = int4["tps"] / int8["tps"]
        lines.append(f"| int4 ≥ {INT4_SPEED_TARGET:g}× int8's tok/s at batch 1 | {model} | {ratio:.2f}× "
                     f"({int4['tps']:.1f} against {int8['tps']:.1f}) | {'✓' if ratio >= INT4_SPEED_TARGET else '✗'} |")
    for r in qual:
        if r["model"] == TRAINED and r["scheme"] == "int4":
            met = "–" if r["note"] else "✓" if abs(r["change"]) <= 100 * INT4_PPL_TARGET else "✗"
            measured = r["note"] or f"{r['change']:+.2f} % ({r['ppl']:.3f} against {r['fp32']:.3f})"
            lines.append(f"| int4 perplexity within {100 * INT4_PPL_TARGET:g} % of fp32's | {r['model']} | "
                         f"{measured} | {met} |")
    return lines


def command(args) -> str:
    """The command line of this run: the options that differ from their defaults."""
    parts = ["python benchmarks/bench_decode.py"] + (["--quick"] if args.quick else [])
    parts += [] if args.plain else ["--no-plain"]
    defaults = {"prompt": 32, "new": 96, "repeats": 3, "case_budget": 60.0, "threads": None, "train_iters": 1000}
    for name, default in defaults.items():
        value = getattr(args, name)
        if not args.quick and value != default:
            parts.append(f"--{name.replace('_', '-')} {value:g}" if isinstance(value, float) else
                         f"--{name.replace('_', '-')} {value}")
    return " ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small models, few tokens: a smoke test")
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--new", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--case-budget", type=float, default=60.0, help="seconds a case's timed runs may take")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--train-iters", type=int, default=1000, help="steps of the GPT trained for the quality")
    parser.add_argument("--checkpoint", type=Path, default=None, help="an `attnlab train` output to use instead")
    parser.add_argument("--no-torchao", dest="torchao", action="store_false", help="leave out torchao's int8")
    parser.add_argument("--no-plain", dest="plain", action="store_false",
                        help="leave out the book's path (GenerationConfig(accelerate=False))")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the tables go (default: %(default)s)")
    args = parser.parse_args()
    if args.quick:
        args.new, args.repeats, args.train_iters = 16, 1, 50
    if args.threads:
        torch.set_num_threads(args.threads)
    if not kernels.load():  # int8 and the few-row fp32 products: torch's kernels would be timed instead
        raise SystemExit(f"bench_decode.py times attnlab's CPU kernels, which are not in use here: "
                         f"{kernels.status()}. Build them with `attnlab kernels` (once, about a minute).")
    load = os.popen("uptime").read().strip()
    read, matmul = read_bandwidth(), matmul_gflops()
    reads = [read]
    print(f"read {read.value:.1f} GB/s, matmul {matmul.value:.0f} GFLOP/s; {load}", flush=True)
    speed, qual = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name, hf in hf_models(args.quick).items():
            model = as_attnlab(hf, Path(tmp) / name)
            speed += bench_model(name, hf, model, args, reads)
            tokens = torch.randint(0, model.config.vocab_size, (4096,), generator=torch.Generator().manual_seed(0))
            qual += quality(f"{name} (loaded, random weights)", model, tokens)
            del hf, model
        trained, val = trained_gpt(args, Path(tmp))
        qual += quality(TRAINED, trained, val)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, write(args, machine_facts(), matmul, reads, speed, qual, load))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
