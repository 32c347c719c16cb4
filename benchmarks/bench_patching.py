"""How long patching takes in attnlab and in TransformerLens (4.x, ``TransformerBridge``), timed in the same run, and
where attribution patching's linear estimate disagrees with patching.

    PYTHONPATH=src python benchmarks/bench_patching.py            # both sizes; ~20 min on a 2-core CPU
    PYTHONPATH=src python benchmarks/bench_patching.py --quick    # the small model only, T = 16: a smoke test

Each model is a random GPT-2 written by transformers' ``save_pretrained`` and loaded by both (attnlab's
``load_causal_lm``, TransformerLens's ``TransformerBridge.boot_transformers``): one of the induction model's size
(2 layers × 4 heads, width 64, a vocabulary of 64: a GPT-2 has feed-forward layers, which the attention-only
model lacks; TransformerLens does not load that one) and one of gpt2-small's (12 × 12, 768, 50,257). A batch of
B = 4 sequences (gpt2-small: 1) of T = 64 tokens, clean and corrupted (its first half re-drawn), the metric a logit
difference at the last position; one thread (on a shared 2-core machine a second thread spins and makes both sides
many times slower: 450 against 16 ms for the small model's eight patches).
Timed: ``patch_heads`` at every position (``get_act_patch_attn_head_out_all_pos``), one position at a time
(``..._by_pos``; for gpt2-small only layer 0's 12 × 64 patches, on both sides: all 9,216 take an hour each), and
``attribute_heads`` against the same formula through TransformerLens's hooks (its clean run cached, one corrupted
forward with ``retain_grad`` on ``hook_z``, one backward). Each figure is the median of its rounds, the two sides
taking turns; a ratio above 1: attnlab is faster. attnlab's own attention-only model is timed too (no TransformerLens
column: it cannot load it).

Then the induction experiment's two-layer model, trained (800 steps, about 30 s), patched and attributed on its
repeated sequences: each head's share of the repeat restored, by patching and by the linear estimate.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

os.environ.setdefault("TQDM_DISABLE", "1")  # TransformerLens's sweeps draw progress bars

RESULTS = Path(__file__).resolve().parent / "results" / "patching.md"
SIZES = {"induction-sized": dict(n_layer=2, n_head=4, n_embd=64, vocab_size=64),
         "gpt2-small-sized": dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50257)}
BATCH = {"induction-sized": 4, "gpt2-small-sized": 1}  # gpt2-small's 768 one-position patches: ~0.3 s each


def write_gpt2(directory: Path, sizes: dict, seed: int = 0) -> None:
    """A random GPT-2 of ``sizes`` in ``directory`` (transformers' initialisation, ``save_pretrained``), and a
    tokenizer file (attnlab's loader wants one; nothing here tokenizes)."""
    import transformers
    from tokenizers import Tokenizer, models

    torch.manual_seed(seed)
    config = transformers.GPT2Config(n_positions=128, bos_token_id=None, eos_token_id=None, **sizes)
    transformers.GPT2LMHeadModel(config).eval().save_pretrained(directory)
    Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]")).save(str(directory / "tokenizer.json"))


def pair(vocab: int, batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    clean = torch.randint(0, vocab, (batch, length), generator=g)
    corrupt = clean.clone()
    corrupt[:, : length // 2] = torch.randint(0, vocab, (batch, length // 2), generator=g)
    return clean, corrupt


def timed(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median seconds of each function over ``rounds``, the functions taking turns (the order rotating)."""
    names, times = list(fns), {name: [] for name in fns}
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            start = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def tl_attribution(bridge, clean, corrupt, metric) -> torch.Tensor:
    """Σ (clean − corrupted) · ∂metric/∂z per head, through TransformerLens's hooks."""
    _, cache = bridge.run_with_cache(clean)
    seen = {}

    def keep(point):
        def hook(activation, hook):
            activation.retain_grad()
            seen[point] = activation
            return activation
        return hook

    points = [f"blocks.{layer}.attn.hook_z" for layer in range(bridge.cfg.n_layers)]
    metric(bridge.run_with_hooks(corrupt, fwd_hooks=[(p, keep(p)) for p in points])).backward()
    bridge.zero_grad(set_to_none=True)
    return torch.stack([((cache[p] - seen[p].detach()) * seen[p].grad).sum(dim=(0, 1, 3)) for p in points])


def tl_by_pos_layer0(bridge, corrupt, cache, metric):
    """TransformerLens's by-position head patching of layer 0 alone (its generic sweep over an index frame)."""
    import pandas as pd
    from transformer_lens import patching

    rows = [(0, p, h) for p in range(corrupt.shape[1]) for h in range(bridge.cfg.n_heads)]
    index = pd.DataFrame(rows, columns=["layer", "pos", "head_index"])
    setter = patching.layer_pos_head_vector_patch_setter
    return patching.generic_activation_patch(bridge, corrupt, cache, metric, setter, "z", index_df=index)


def compare(name: str, directory: Path, batch: int, length: int, rounds: int) -> list[str]:
    from transformer_lens import patching
    from transformer_lens.model_bridge import TransformerBridge

    from attnlab.heads import attribute_heads, patch_heads
    from attnlab.pretrained import load_causal_lm

    ours, _ = load_causal_lm(directory)
    bridge = TransformerBridge.boot_transformers(str(directory), device="cpu")
    bridge.eval()
    vocab, layers = ours.config.vocab_size, ours.config.num_layers
    clean, corrupt = pair(vocab, batch, length)

    def metric(logits):
        return (logits[:, -1, 1] - logits[:, -1, 2]).mean()

    each_layers = [0] if layers > 2 else None
    _, cache = bridge.run_with_cache(clean)
    fns = {
        "all positions": (lambda: patch_heads(ours, clean, corrupt, metric),
                          lambda: patching.get_act_patch_attn_head_out_all_pos(bridge, corrupt, cache, metric)),
        "each position": (lambda: patch_heads(ours, clean, corrupt, metric, positions="each", layers=each_layers),
                          (lambda: tl_by_pos_layer0(bridge, corrupt, cache, metric)) if each_layers else
                          (lambda: patching.get_act_patch_attn_head_out_by_pos(bridge, corrupt, cache, metric))),
        "attribution": (lambda: attribute_heads(ours, clean, corrupt, metric),
                        lambda: tl_attribution(bridge, clean, corrupt, metric)),
    }
    heads = ours.config.num_heads
    lines = []
    for what, (a, b) in fns.items():
        a(), b()  # warm-up
        seconds = timed({"attnlab": a, "transformer_lens": b}, rounds)
        patches = {"all positions": layers * heads, "each position": (1 if each_layers else layers) * heads * length,
                   "attribution": 1}[what]
        lines.append(f"| {name} | {what} | {patches:,} | {seconds['attnlab']:.3f} | {seconds['transformer_lens']:.3f} "
                     f"| {seconds['transformer_lens'] / seconds['attnlab']:.2f} |")
        print(lines[-1], flush=True)
    return lines


def attention_only_times(length: int, rounds: int) -> list[str]:
    from attnlab.heads import attribute_heads, patch_heads
    from attnlab.heads.attention_only import AttentionOnlyConfig, AttentionOnlyTransformer

    torch.manual_seed(0)
    model = AttentionOnlyTransformer(AttentionOnlyConfig(64, max(64, length), 64, 2, 4)).eval()
    clean, corrupt = pair(64, 4, length)

    def metric(logits):
        return (logits[:, -1, 1] - logits[:, -1, 2]).mean()

    fns = {"all positions": lambda: patch_heads(model, clean, corrupt, metric),
           "each position": lambda: patch_heads(model, clean, corrupt, metric, positions="each"),
           "attribution": lambda: attribute_heads(model, clean, corrupt, metric)}
    seconds = timed(fns, rounds)
    return [f"| attention-only (attnlab's induction model) | {what} | {s:.3f} |" for what, s in seconds.items()]


def agreement() -> list[str]:
    from attnlab.heads import attribute_heads, baselines, patch_heads, recovered
    from attnlab.heads.induction import InductionConfig, train_induction
    from attnlab.heads.induction_circuit import induction_pair, repeat_metric

    config = InductionConfig()
    model = train_induction(config)["2-layer"].model
    clean, corrupt = induction_pair(config)
    metric = repeat_metric(clean, config.half)
    top, bottom = baselines(model, clean, corrupt, metric)
    patched = recovered(patch_heads(model, clean, corrupt, metric), top, bottom)
    estimate = recovered(attribute_heads(model, clean, corrupt, metric) + bottom, top, bottom)
    pearson = float(torch.corrcoef(torch.stack([patched.flatten(), estimate.flatten()]))[0, 1])
    lines = ["| head | patching | attribution | estimate − patching |", "|---|---|---|---|"]
    for layer in range(patched.shape[0]):
        for head in range(patched.shape[1]):
            p, e = float(patched[layer, head]), float(estimate[layer, head])
            lines.append(f"| layer {layer}, head {head} | {p:+.3f} | {e:+.3f} | {e - p:+.3f} |")
    return [f"Metric: the mean log-probability of the repeat's 15 successors; clean {top:.3f}, corrupted "
            f"{bottom:.3f}. Pearson correlation of the 8 heads' two columns: {pearson:.3f}.", "", *lines]


def main(argv: list[str] | None = None) -> list[str]:
    from attnlab.bench.machine import machine_facts

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the small model only, T = 16: a smoke test")
    parser.add_argument("--out", type=Path, default=None, help=f"where the results go [default: {RESULTS}; "
                        "--quick: printed only]")
    parser.add_argument("--threads", type=int, default=1, help="torch threads [default: 1]")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    length, rounds = (16, 1) if args.quick else (64, 3)
    lines = ["# Patching: attnlab and TransformerLens, timed in the same run", "", machine_facts().summary(), "",
             f"Command: `benchmarks/bench_patching.py{' --quick' if args.quick else ''}`. Batches of "
             f"{', '.join(f'{b} ({n})' for n, b in BATCH.items())} × {length} tokens, metric a logit difference; "
             f"seconds, median of {rounds} round(s) (gpt2-small: one); ratio = TransformerLens / attnlab (above 1: "
             "attnlab faster). gpt2-small's one-position-at-a-time row patches layer 0 alone (12 heads × 64 "
             "positions), on both sides.", "",
             "| model | what | patches | attnlab (s) | TransformerLens (s) | ratio |", "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, sizes in SIZES.items():
            if args.quick and name != "induction-sized":
                continue
            directory = Path(tmp) / name
            write_gpt2(directory, sizes)
            lines += compare(name, directory, BATCH[name], length, rounds if name == "induction-sized" else 1)
    lines += ["", "| model | what | attnlab (s) |", "|---|---|---|", *attention_only_times(length, rounds)]
    if not args.quick:
        lines += ["", "## Where the linear estimate disagrees with patching", "",
                  "The induction experiment's two-layer model (trained, 800 steps), on its 64 repeated sequences: "
                  "each head's share of the repeat restored by activation patching and by attribution patching "
                  "(its first-order estimate).", "", *agreement()]
    text = "\n".join(lines) + "\n"
    print(text)
    out = args.out or (None if args.quick else RESULTS)
    if out is not None:
        out.write_text(text, encoding="utf-8")
    return lines


if __name__ == "__main__":
    main()
