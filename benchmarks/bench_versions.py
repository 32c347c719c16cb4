"""Two versions of attnlab timed against each other, interleaved: did a change make a measured case slower?

    .venv/bin/python benchmarks/bench_versions.py --base main                  # every case, 12 rounds
    .venv/bin/python benchmarks/bench_versions.py --base HEAD~1 --cases mha_block,generate_cache --rounds 20

The base's ``src/`` is taken from git (``git archive``), this tree's from the working copy. Each version runs in
``--workers`` long-lived processes with one torch thread; the versions take turns, round by round (the order
alternating), so a busy machine slows both alike and the ratio new/base holds where the absolute times do not.
Round ``r`` goes to each side's worker ``r mod workers``: a process keeps its own speed for its whole life (where
its memory happened to land), and one worker per side made the same code differ by up to 8 % between runs (the
same commit against itself, ``--base HEAD`` on a clean tree: 0.92 to 1.03), which several workers average out
(four: 0.985 to 1.013). Each call is timed in the worker's CPU seconds (``time.process_time``), so the time it
spends waiting for a busy core is left out.
The cases are the measured figures that ``MultiHeadAttention`` and the decoding loop serve:

* ``mha_block``: benchmarks/results/attention.md, the MHA block (d_model 768, 12 heads, T=1024, eval);
* ``generate_cache``, ``generate_recompute``: encoder.md (c), greedy decoding of a 6-layer GPT with and without
  the KV cache (100 and 30 of its tokens); ``generate_overhead``: a 2-layer, 64-wide GPT, where a step is mostly
  Python, so any overhead in the loop or the forward shows;
* ``gpt_train_step``: train.md A's step (4 layers, 128 wide, block 64, batch 12, AdamW);
* ``seq2seq_train_step``: seq2seq.md B's step (transformer-tiny, batch 64);
* ``beam_search_cached``: seq2seq.md C's cached beam search, scaled down (beam 4 over 64 sources, 12 tokens, the
  decoder's KV cache and the memory's keys/values), where the host's work per step weighs 16 times more;
* ``beam_search_dates``: the same search at the figure's own size (1,000 sources of 8-30 ids, 11 tokens);
  ``beam_search_dates_uncached``: the figure's other row, the search without the decoding caches;
* by name only, where that search's time goes: ``beam_setup`` (encoding 64 sources and setting up the decoder for
  their 256 beams), ``beam_steps`` (the same and 12 decoder steps), ``beam_setup_tiny`` and ``beam_steps_tiny``
  (a 16-wide model, one source: a step there is all host overhead).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the cases, built inside a worker
def mha_block() -> Callable[[], object]:
    import torch

    from attnlab.attention import MultiHeadAttention

    m = MultiHeadAttention(768, 768, num_heads=12, qkv_bias=True, is_causal=False).eval()
    x = torch.randn(1, 1024, 768)
    return torch.inference_mode()(lambda: m(x))


def _generate(num_layers: int, d_model: int, num_heads: int, new: int, use_cache: bool) -> Callable[[], object]:
    import torch

    from attnlab.generation import generate
    from attnlab.models import GPT, GPTConfig

    model = GPT(GPTConfig(vocab_size=256, context_length=512, d_model=d_model, num_layers=num_layers,
                          num_heads=num_heads)).eval()
    prompt = torch.randint(0, 256, (1, 8), generator=torch.Generator().manual_seed(0))
    return lambda: generate(model, prompt, new, 0, use_cache=use_cache)


def _train_step(model, batch: tuple, lr: float = 1e-3) -> Callable[[], object]:
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=lr)

    def step():
        loss = model(*batch[:-1], targets=batch[-1]).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def gpt_train_step() -> Callable[[], object]:
    import torch

    from attnlab.models import GPT, GPTConfig

    g = torch.Generator().manual_seed(0)
    model = GPT(GPTConfig(vocab_size=65, context_length=64, d_model=128, num_layers=4, num_heads=4, dropout=0.0))
    return _train_step(model, (torch.randint(0, 65, (12, 64), generator=g), torch.randint(0, 65, (12, 64),
                                                                                          generator=g)))


def seq2seq_train_step() -> Callable[[], object]:
    import torch

    from attnlab.models import Transformer, TransformerConfig

    g = torch.Generator().manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=256, d_model=64, num_heads=4, num_encoder_layers=2,
                                          num_decoder_layers=2, d_ff=256, dropout=0.0, context_length=40))
    src, tgt = torch.randint(3, 200, (64, 20), generator=g), torch.randint(3, 200, (64, 12), generator=g)
    return _train_step(model, (src, tgt, tgt))


def beam_search_cached() -> Callable[[], object]:
    import torch

    from attnlab.generation.seq2seq import beam_search
    from attnlab.models import Transformer, TransformerConfig

    g = torch.Generator().manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=256, d_model=64, num_heads=4, num_encoder_layers=2,
                                          num_decoder_layers=2, d_ff=256, dropout=0.0, context_length=40)).eval()
    src = torch.randint(3, 200, (64, 20), generator=g)
    return torch.no_grad()(lambda: beam_search(model, src, beam_size=4, max_new_tokens=12, use_cache=True))


def beam_search_dates(use_cache: bool = True) -> Callable[[], object]:
    """seq2seq.md C's beam search at the figure's own size, with the decoding caches or without: beam 4 over 1,000
    sources of 8 to 30 ids (padded), transformer-tiny's shape, 11 new tokens (a date and its eos). Random weights,
    so every search runs all 11 steps."""
    import torch

    from attnlab.generation.seq2seq import beam_search
    from attnlab.models import Transformer, TransformerConfig

    g = torch.Generator().manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=256, d_model=64, num_heads=4, num_encoder_layers=2,
                                          num_decoder_layers=2, d_ff=256, dropout=0.0, context_length=128)).eval()
    src = torch.randint(3, 200, (1000, 30), generator=g)
    src[torch.arange(30) >= torch.randint(8, 31, (1000, 1), generator=g)] = 0  # pad_id
    return torch.no_grad()(lambda: beam_search(model, src, beam_size=4, max_new_tokens=11, use_cache=use_cache))


def beam_decoder(steps: int, d_model: int = 64, sources: int = 64) -> Callable[[], object]:
    """The cached beam search's decoder alone: encode ``sources`` sources, set up the cache for 4 beams each, then
    ``steps`` decoding steps of all the beams (no search around them, no reordering). With ``steps=0`` it is the
    set-up alone, so the difference of the two is the steps' time. The decoder's way in changed with the
    restructuring (``Transformer.incremental_decoder`` before it, ``new_cache`` and ``decode_step`` after), so
    this case asks which the version has."""
    import torch

    from attnlab.models import Transformer, TransformerConfig

    g = torch.Generator().manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=256, d_model=d_model, num_heads=4, num_encoder_layers=2,
                                          num_decoder_layers=2, d_ff=4 * d_model, dropout=0.0,
                                          context_length=40)).eval()
    src = torch.randint(3, 200, (sources, 20), generator=g)
    rows = 4 * sources

    @torch.inference_mode()
    def run() -> None:
        memory = model.encode(src)
        if hasattr(model, "incremental_decoder"):
            step, tokens = model.incremental_decoder(memory, src != 0, 4, 12), torch.ones(rows, dtype=torch.long)
        else:
            cache, tokens = model.new_cache(memory, src != 0, 12, beams=4), torch.ones(rows, 1, dtype=torch.long)

            def step(t):
                return model.decode_step(t, cache)
        for _ in range(steps):
            step(tokens)
    return run


FIGURES: dict[str, Callable[[], Callable[[], object]]] = {
    "mha_block": mha_block,
    "generate_cache": lambda: _generate(6, 384, 6, 100, True),
    "generate_recompute": lambda: _generate(6, 384, 6, 30, False),
    "generate_overhead": lambda: _generate(2, 64, 4, 200, True),
    "gpt_train_step": gpt_train_step,
    "seq2seq_train_step": seq2seq_train_step,
    "beam_search_cached": beam_search_cached,
    "beam_search_dates": beam_search_dates,
    "beam_search_dates_uncached": lambda: beam_search_dates(use_cache=False),
}
# where beam_search_cached's time goes (asked for by name): the decoder's set-up, and its steps at the case's
# size and at a tiny one (d_model 16, one source), where a step is all host overhead
PARTS: dict[str, Callable[[], Callable[[], object]]] = {
    "beam_setup": lambda: beam_decoder(0),
    "beam_steps": lambda: beam_decoder(12),
    "beam_setup_tiny": lambda: beam_decoder(0, d_model=16, sources=1),
    "beam_steps_tiny": lambda: beam_decoder(12, d_model=16, sources=1),
}
CASES = {**FIGURES, **PARTS}


def worker() -> None:
    """Answer ``case reps`` lines on stdin with the seconds of each call, as JSON (a warm-up call first)."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    built: dict[str, Callable[[], object]] = {}
    for line in sys.stdin:
        name, reps = line.split()
        if name not in built:
            built[name] = CASES[name]()
            built[name]()
        times = []
        for _ in range(int(reps)):
            start = time.process_time()
            built[name]()
            times.append(time.process_time() - start)
        print(json.dumps(times), flush=True)


# ---------------------------------------------------------------- the two versions, taking turns
def spawn(src: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env, cwd=tempfile.gettempdir())


def compare(base_src: Path, cases: list[str], rounds: int, reps: int,
            workers: int = 1) -> dict[str, dict[str, list[float]]]:
    procs = {"base": [spawn(base_src) for _ in range(workers)], "new": [spawn(ROOT / "src") for _ in range(workers)]}
    times: dict[str, dict[str, list[float]]] = {c: {"base": [], "new": []} for c in cases}
    try:
        for r in range(rounds):
            for case in cases:
                for side in ("base", "new") if r % 2 == 0 else ("new", "base"):
                    proc = procs[side][r % workers]
                    proc.stdin.write(f"{case} {reps}\n")
                    proc.stdin.flush()
                    times[case][side] += json.loads(proc.stdout.readline())
    finally:
        for proc in procs["base"] + procs["new"]:
            proc.stdin.close()
            proc.wait()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="the git revision to compare against [main]")
    parser.add_argument("--cases", default=",".join(FIGURES),
                        help=f"comma-separated, of: {', '.join(CASES)} [the measured figures: {', '.join(FIGURES)}]")
    parser.add_argument("--rounds", type=int, default=12, help="turns each version takes per case [12]")
    parser.add_argument("--reps", type=int, default=3, help="timed calls per turn [3]")
    parser.add_argument("--workers", type=int, default=4, help="processes per version, taking rounds in turn [4]")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker()
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"unknown cases {unknown}; choose from {', '.join(CASES)}")
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base, "src"], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        times = compare(Path(tmp) / "src", cases, args.rounds, args.reps, args.workers)
    print(f"| case | {args.base} ms | this tree ms | this / {args.base} |\n|---|---|---|---|")
    for case, sides in times.items():
        base, new = statistics.median(sides["base"]), statistics.median(sides["new"])
        print(f"| {case} | {base * 1e3:.2f} | {new * 1e3:.2f} | {new / base:.3f} |")


if __name__ == "__main__":
    main()
