"""Two versions of attnlab timed against each other, interleaved: did a change make a measured case slower?

    .venv/bin/python benchmarks/bench_versions.py --base main                  # every case, 12 rounds
    .venv/bin/python benchmarks/bench_versions.py --base HEAD~1 --cases mha_block,generate_cache --rounds 20
    .venv/bin/python benchmarks/bench_versions.py --base de041e5 --out      # to benchmarks/results/versions.md

The base's ``src/`` is taken from git (``git archive``), this tree's from the working copy. Each version runs in
``--workers`` long-lived processes with one torch thread; the versions take turns, round by round (the order
alternating), so a busy machine slows both alike and the ratio new/base holds where the absolute times do not.
Round ``r`` goes to each side's worker ``r mod workers``: a process keeps its own speed for its whole life (where
its memory happened to land), and one worker per side made the same code differ by up to 8 % between runs (the
same commit against itself, ``--base HEAD`` on a clean tree: 0.92 to 1.03), which several workers average out
(four: 0.985 to 1.013). Each call is timed in the worker's CPU seconds (``time.process_time``), so the time it
spends waiting for a busy core is left out. ``--out`` writes the table, the machine's facts and the command to a
results file (atomically).

The cases are built inside each worker from that worker's own attnlab, so each works on both APIs, the one before
the restructuring into ``attnlab.fast`` (``generate(model, idx, n, temperature, compile=..., use_cache=...)``, the
speed woven into the models) and the one after it (``generate(model, idx, n, GenerationConfig(...))``, the models
plain and sped up by ``attnlab.fast``): :func:`new_api` asks which the worker has, and the same work is timed on
both sides, the way a user runs it (``generate``, ``beam_search`` and the trainer accelerate by themselves; a model
called directly is accelerated first, :func:`as_users_run`). The measured figures:

* ``mha_block``: benchmarks/results/attention.md, the MHA block (d_model 768, 12 heads, T=1024, eval);
  ``attention_auto``, ``attention_sdpa``, ``attention_chunked``, ``attention_math``: the same file's backends at
  (1, 12, 1024, 64), not causal;
* ``encoder_forward``: encoder.md (a), all-MiniLM-L6-v2's forward over 8 × 128 tokens (a quarter of its batch);
* ``generate_cache``, ``generate_recompute``: encoder.md (c), greedy decoding of a 6-layer GPT with and without
  the KV cache (100 and 30 of its tokens); ``generate_overhead``: a 2-layer, 64-wide GPT, where a step is mostly
  Python, so any overhead in the loop or the forward shows;
* ``decode_{gpt2,modern}_b{1,8}_{eager,compiled,int8}``: decode.md's cases, gpt2-small (124 M parameters) and its
  ~100 M Llama-style decoder (12 layers, 768 wide, 12 query heads over 4, SwiGLU 2048, vocabulary 32,000, tied),
  random weights, greedy, a 16-token prompt and 8 new tokens (a round of a few seconds), at batch 1 and 8: eager,
  ``compile=True`` (compiled in the warm-up call, not timed) and int8 weights (``quantize(model, "int8")``);
* ``gpt_train_step``: train.md A's step (4 layers, 128 wide, block 64, batch 12, AdamW); ``train_step``,
  ``train_step_compiled``: train_loops.md's, the baby GPT's step as ``attnlab.training``'s Trainer takes it
  (batch, forward, backward, clip, AdamW, schedule), eager and ``compile=True``;
* ``seq2seq_train_step``: seq2seq.md B's step (transformer-tiny, batch 64);
* ``beam_search_cached``: seq2seq.md C's cached beam search, scaled down (beam 4 over 64 sources, 12 tokens, the
  decoder's KV cache and the memory's keys/values), where the host's work per step weighs 16 times more;
* ``beam_search_dates``: the same search at the figure's own size (1,000 sources of 8-30 ids, 11 tokens);
  ``beam_search_dates_uncached``: the figure's other row, the search without the decoding caches;
* by name only, where that search's time goes: ``beam_setup`` (encoding 64 sources and setting up the decoder for
  their 256 beams), ``beam_steps`` (the same and 12 decoder steps), ``beam_setup_tiny`` and ``beam_steps_tiny``
  (a 16-wide model, one source: a step there is all host overhead);
* by name only (or all of them with ``--plain``), the book's path: ``mha_block_plain``, ``encoder_forward_plain``,
  ``gpt_train_step_plain``, ``seq2seq_train_step_plain`` and ``decode_{gpt2,modern}_b{1,8}_plain`` run this tree's
  model as built, not accelerated (``GenerationConfig(accelerate=False)`` for the decoding); before the
  restructuring a model had one path, so the base runs the same case as without ``_plain``. Their ratio is what
  the plain path costs against the old model.

A worker keeps every case it has built, so that later rounds time the same objects: with the decoding cases (both
models, in fp32 and int8, and this tree's fast twins, whose stacked projections are copies) a worker holds about
2.1 GB, some 17 GB for the default 4 + 4 workers; where the machine has less to spare, ``--workers 2``, or the
``decode_*`` cases in a run of their own.

Decoding on a CPU runs attnlab's C++ kernels: before the restructuring they were built on first use (here in the
warm-up, untimed), after it only by ``attnlab kernels``; where this tree's are buildable but not built, the run
stops and says so, rather than time torch's kernels against the base's own.
"""

from __future__ import annotations

import argparse
import atexit
import copy
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "versions.md"


# ---------------------------------------------------------------- the worker's attnlab: which API it has
def new_api(generation: ModuleType | None = None) -> bool:
    """Whether the worker's attnlab (its ``attnlab.generation``, or the one given) is the API after the
    restructuring: generation options in a ``GenerationConfig``, the models plain and sped up by ``attnlab.fast``."""
    if generation is None:
        import attnlab.generation as generation
    return hasattr(generation, "GenerationConfig")


def greedy(generation: ModuleType, model, prompt, new: int, *, use_cache: bool = True, compile: bool = False,
           accelerate: bool = True) -> Callable[[], object]:
    """Greedy ``generate`` of ``new`` tokens in the words of ``generation`` (the worker's ``attnlab.generation``),
    the call made up once: a function of nothing to time. ``accelerate=False`` (the book's path) exists only on
    the new API; the old one has one path."""
    if new_api(generation):
        config = generation.GenerationConfig(temperature=0, use_cache=use_cache, compile=compile,
                                             accelerate=accelerate)
        return lambda: generation.generate(model, prompt, new, config)
    return lambda: generation.generate(model, prompt, new, 0, use_cache=use_cache, compile=compile)


def as_users_run(model, plain: bool = False, fast: ModuleType | None = None, generation: ModuleType | None = None):
    """``model`` as a user's code runs it when it calls the model itself: on the new API its fast twin, swapped in
    place (``fast.accelerate`` in eval mode; in training mode ``fast.swap_modules``, as the trainer does), unless
    ``plain``; on the old API the model as built, its speed woven in."""
    if plain or not new_api(generation):
        return model
    if fast is None:
        import attnlab.fast as fast
    return fast.swap_modules(model) if model.training else fast.accelerate(model)


def kernel_facts() -> dict[str, object]:
    """This worker's attnlab and its CPU kernels: ``{"api", "kernels", "buildable", "status"}``. On the old API this
    loads them, building them the first time (so no timed call does); the new API only loads what
    ``attnlab kernels`` built."""
    if new_api():
        from attnlab.fast import kernels

        ready = kernels.load()
        return {"api": "new", "kernels": ready, "buildable": kernels.why_not_buildable() is None,
                "status": kernels.status()}
    try:
        from attnlab.functional import kernels as old_kernels
    except ImportError:  # a version from before attnlab had kernels of its own
        return {"api": "old", "kernels": False, "buildable": False, "status": "torch's kernels (none of attnlab's)"}
    ready = old_kernels.ensure_cpu_kernels()
    return {"api": "old", "kernels": ready, "buildable": True, "status": old_kernels.cpu_kernels_status()}


# ---------------------------------------------------------------- the cases, built inside a worker
def mha_block(plain: bool = False) -> Callable[[], object]:
    import torch

    from attnlab.attention import MultiHeadAttention

    m = as_users_run(MultiHeadAttention(768, 768, num_heads=12, qkv_bias=True, is_causal=False).eval(), plain)
    x = torch.randn(1, 1024, 768)
    return torch.inference_mode()(lambda: m(x))


def attention(backend: str) -> Callable[[], object]:
    """attention.md's backends at (1, 12, 1024, 64), not causal: the functional door, ``backend=...``."""
    import torch

    from attnlab.functional import scaled_dot_product_attention

    q, k, v = torch.randn(3, 1, 12, 1024, 64, generator=torch.Generator().manual_seed(0)).unbind(0)
    return torch.inference_mode()(lambda: scaled_dot_product_attention(q, k, v, backend=backend))


def encoder_forward(plain: bool = False) -> Callable[[], object]:
    """encoder.md (a)'s forward, all-MiniLM-L6-v2 over 8 × 128 tokens (random ids, no padding)."""
    import torch

    from attnlab.pretrained import load_bert

    bert = as_users_run(load_bert().eval(), plain)
    ids = torch.randint(1000, 20000, (8, 128), generator=torch.Generator().manual_seed(0))
    mask, types = torch.ones_like(ids), torch.zeros_like(ids)
    return torch.inference_mode()(lambda: bert(ids, mask, types))


def _generate(num_layers: int, d_model: int, num_heads: int, new: int, use_cache: bool) -> Callable[[], object]:
    import torch

    import attnlab.generation
    from attnlab.models import GPT, GPTConfig

    model = GPT(GPTConfig(vocab_size=256, context_length=512, d_model=d_model, num_layers=num_layers,
                          num_heads=num_heads)).eval()
    prompt = torch.randint(0, 256, (1, 8), generator=torch.Generator().manual_seed(0))
    return greedy(attnlab.generation, model, prompt, new, use_cache=use_cache)


#: decode.md's two models, as attnlab configs (random weights): gpt2-small and the ~100 M Llama-style decoder
DECODERS = {"gpt2": ("gpt", {}), "modern": ("modern", dict(
    vocab_size=32000, context_length=1024, d_model=768, num_layers=12, num_heads=12, num_kv_heads=4, d_ff=2048,
    tie_weights=True))}
DECODE_PROMPT, DECODE_NEW = 16, 8


@functools.cache
def decoder(name: str, scheme: str | None = None):
    """One of :data:`DECODERS`, built once per worker (its cases share it), in eval mode; quantized to ``scheme``
    (a copy)."""
    import torch

    if scheme is not None:
        from attnlab.models import quantize

        return quantize(copy.deepcopy(decoder(name)), scheme)
    from attnlab.models import GPT, GPTConfig, ModernDecoder, ModernDecoderConfig

    torch.manual_seed(0)
    arch, fields = DECODERS[name]
    if arch == "gpt":
        return GPT(GPTConfig.from_preset("gpt2-small")).eval()
    return ModernDecoder(ModernDecoderConfig(**fields)).eval()


def decode(name: str, batch: int, variant: str) -> Callable[[], object]:
    """decode.md's case: greedy decoding of :data:`DECODE_NEW` tokens after :data:`DECODE_PROMPT`, ``variant`` one
    of ``eager``, ``compiled``, ``int8`` and ``plain`` (this tree's book path; the base's eager)."""
    import torch

    import attnlab.generation

    model = decoder(name, "int8") if variant == "int8" else decoder(name)  # one key per model in the cache
    prompt = torch.randint(0, model.config.vocab_size, (batch, DECODE_PROMPT),
                           generator=torch.Generator().manual_seed(batch))
    return greedy(attnlab.generation, model, prompt, DECODE_NEW, compile=variant == "compiled",
                  accelerate=variant != "plain")


def _train_step(model, batch: tuple, lr: float = 1e-3) -> Callable[[], object]:
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=lr)

    def step():
        loss = model(*batch[:-1], targets=batch[-1]).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def gpt_train_step(plain: bool = False) -> Callable[[], object]:
    import torch

    from attnlab.models import GPT, GPTConfig

    g = torch.Generator().manual_seed(0)
    model = GPT(GPTConfig(vocab_size=65, context_length=64, d_model=128, num_layers=4, num_heads=4, dropout=0.0))
    return _train_step(as_users_run(model, plain), (torch.randint(0, 65, (12, 64), generator=g),
                                                    torch.randint(0, 65, (12, 64), generator=g)))


def trainer_step(compile: bool = False) -> Callable[[], object]:
    """train_loops.md's loop: the baby preset on Shakespeare's characters, batch 12, one ``Trainer.train_step``
    a call (the trainer accelerates on the new API by itself); the first step, compiling, is the warm-up."""
    from attnlab.training import TrainConfig, Trainer

    out = tempfile.mkdtemp(prefix="bench-versions-")  # the trainer's token cache, removed when the worker ends
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    config = TrainConfig(data="shakespeare", out=out, preset="baby", max_iters=10**6, eval_interval=10**6,
                         eval_iters=1, compile=compile, seed=1337)
    return Trainer(config, quiet=True).train_step


def seq2seq_train_step(plain: bool = False) -> Callable[[], object]:
    import torch

    from attnlab.models import Transformer, TransformerConfig

    g = torch.Generator().manual_seed(0)
    model = Transformer(TransformerConfig(vocab_size=256, d_model=64, num_heads=4, num_encoder_layers=2,
                                          num_decoder_layers=2, d_ff=256, dropout=0.0, context_length=40))
    src, tgt = torch.randint(3, 200, (64, 20), generator=g), torch.randint(3, 200, (64, 12), generator=g)
    return _train_step(as_users_run(model, plain), (src, tgt, tgt))


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
    model = as_users_run(Transformer(TransformerConfig(vocab_size=256, d_model=d_model, num_heads=4,
                                                       num_encoder_layers=2, num_decoder_layers=2, d_ff=4 * d_model,
                                                       dropout=0.0, context_length=40)).eval())
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


DECODE_CASES: dict[str, Callable[[], Callable[[], object]]] = {
    f"decode_{name}_b{batch}_{variant}": functools.partial(decode, name, batch, variant)
    for name in DECODERS for batch in (1, 8) for variant in ("eager", "compiled", "int8")}
FIGURES: dict[str, Callable[[], Callable[[], object]]] = {
    "mha_block": mha_block,
    **{f"attention_{backend}": functools.partial(attention, backend) for backend in ("auto", "sdpa", "chunked",
                                                                                      "math")},
    "encoder_forward": encoder_forward,
    "generate_cache": lambda: _generate(6, 384, 6, 100, True),
    "generate_recompute": lambda: _generate(6, 384, 6, 30, False),
    "generate_overhead": lambda: _generate(2, 64, 4, 200, True),
    **DECODE_CASES,
    "gpt_train_step": gpt_train_step,
    "train_step": trainer_step,
    "train_step_compiled": lambda: trainer_step(compile=True),
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
# this tree's book path, the model as built (by name, or all with --plain); the base has one path, its own
PLAIN: dict[str, Callable[[], Callable[[], object]]] = {
    "mha_block_plain": lambda: mha_block(plain=True),
    "encoder_forward_plain": lambda: encoder_forward(plain=True),
    "gpt_train_step_plain": lambda: gpt_train_step(plain=True),
    "seq2seq_train_step_plain": lambda: seq2seq_train_step(plain=True),
    **{f"decode_{name}_b{batch}_plain": functools.partial(decode, name, batch, "plain")
       for name in DECODERS for batch in (1, 8)},
}
CASES = {**FIGURES, **PARTS, **PLAIN}


def needs_kernels(case: str) -> bool:
    """Whether ``case`` decodes on a CPU (attnlab's kernels run its products)."""
    return case.startswith(("decode_", "generate_"))


def worker() -> None:
    """Answer ``case reps`` lines on stdin with the seconds of each call, as JSON (a warm-up call first); and a
    ``facts`` line with :func:`kernel_facts`."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    built: dict[str, Callable[[], object]] = {}
    for line in sys.stdin:
        if line.strip() == "facts":
            print(json.dumps(kernel_facts()), flush=True)
            continue
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


def ask(proc: subprocess.Popen, line: str):
    """One request to a worker, and its answer (JSON)."""
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    answer = proc.stdout.readline()
    if not answer:
        raise RuntimeError(f"a worker stopped on {line!r} (exit code {proc.wait()}); its error is above")
    return json.loads(answer)


def compare(base_src: Path, cases: list[str], rounds: int, reps: int, workers: int = 1,
            facts: dict[str, dict] | None = None) -> dict[str, dict[str, list[float]]]:
    """Each side's seconds per call of every case; ``facts`` (if given) gets each side's :func:`kernel_facts`,
    asked of every worker before any case is timed. Stops, saying why, where this tree's kernels are buildable
    but not built and a case decodes."""
    procs = {"base": [spawn(base_src) for _ in range(workers)], "new": [spawn(ROOT / "src") for _ in range(workers)]}
    times: dict[str, dict[str, list[float]]] = {c: {"base": [], "new": []} for c in cases}
    try:
        seen = {side: [ask(proc, "facts") for proc in procs[side]] for side in procs}
        if facts is not None:
            facts.update({side: answers[0] for side, answers in seen.items()})
        unbuilt = [f for f in seen["new"] if f["buildable"] and not f["kernels"]]
        if unbuilt and any(map(needs_kernels, cases)):
            raise SystemExit(f"this tree's CPU kernels are not in use: {unbuilt[0]['status']}. Run `attnlab kernels` "
                             "(once) first: the base builds its own on first use, and its decoding would be timed "
                             "against torch's kernels")
        for r in range(rounds):
            for case in cases:
                for side in ("base", "new") if r % 2 == 0 else ("new", "base"):
                    times[case][side] += ask(procs[side][r % workers], f"{case} {reps}")
    finally:
        for proc in procs["base"] + procs["new"]:
            proc.stdin.close()
            proc.wait()
    return times


def table(times: dict[str, dict[str, list[float]]], base: str) -> list[str]:
    """The results table: each case's median ms on each side and their ratio."""
    lines = [f"| case | {base} ms | this tree ms | this / {base} |", "|---|---|---|---|"]
    for case, sides in times.items():
        old, new = statistics.median(sides["base"]), statistics.median(sides["new"])
        lines.append(f"| {case} | {old * 1e3:.2f} | {new * 1e3:.2f} | {new / old:.3f} |")
    return lines


def report(lines: list[str], args: argparse.Namespace, facts: dict[str, dict], load: tuple[float, ...]) -> str:
    """versions.md: what was run, where, and the table."""
    from attnlab.bench.machine import machine_facts

    sides = "; ".join(f"{args.base if side == 'base' else 'this tree'}: the {f['api']} API, decoding on "
                      f"{f['status']}" for side, f in facts.items())
    return "\n".join([
        f"# This tree against {args.base}", "", machine_facts().summary(),
        f"Load average at the start (1, 5, 15 min): {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}. {sides}.", "",
        f"Command: `{command(args)}`. Per version {args.workers} worker process(es) of one torch thread, "
        f"{args.rounds} interleaved round(s) of {args.reps} timed call(s) after a warm-up call; a figure is the median "
        "of the calls' CPU seconds (`time.process_time`), the ratio this tree's over the base's (below 1: faster "
        "now).", "", *lines, ""])


def command(args: argparse.Namespace) -> str:
    """The command line of this run: the options that differ from their defaults."""
    parts = ["python benchmarks/bench_versions.py", f"--base {args.base}"]
    if args.cases != ",".join(FIGURES):
        parts.append(f"--cases {args.cases}")
    parts += [f"--{name} {getattr(args, name)}" for name, default in (("rounds", 12), ("reps", 3), ("workers", 4))
              if getattr(args, name) != default]
    out = [] if args.out is None else ["--out"] if args.out == RESULTS else [f"--out {args.out}"]
    return " ".join(parts + (["--plain"] if args.plain else []) + out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="the git revision to compare against [main]")
    parser.add_argument("--cases", default=",".join(FIGURES),
                        help=f"comma-separated, of: {', '.join(CASES)} [the measured figures: {', '.join(FIGURES)}]")
    parser.add_argument("--plain", action="store_true", help="add every case of this tree's book path (*_plain)")
    parser.add_argument("--rounds", type=int, default=12, help="turns each version takes per case [12]")
    parser.add_argument("--reps", type=int, default=3, help="timed calls per turn [3]")
    parser.add_argument("--workers", type=int, default=4, help="processes per version, taking rounds in turn [4]")
    parser.add_argument("--out", type=Path, nargs="?", const=RESULTS, default=None,
                        help=f"also write the table, the machine and the command to a results file "
                             f"[given alone: {RESULTS.relative_to(ROOT)}]")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker()
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"unknown cases {unknown}; choose from {', '.join(CASES)}")
    cases += [c for c in PLAIN if args.plain and c not in cases]
    load, facts = os.getloadavg(), {}
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base, "src"], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        times = compare(Path(tmp) / "src", cases, args.rounds, args.reps, args.workers, facts)
    lines = table(times, args.base)
    print("\n".join(lines))
    if args.out is not None:
        from attnlab.files import atomic_write_text

        atomic_write_text(args.out, report(lines, args, facts, load))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
