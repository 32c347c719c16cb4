"""Today's families against transformers' own implementation of the same configs, on this CPU.

    .venv/bin/python benchmarks/bench_families.py            # results/families.md (a few minutes)
    .venv/bin/python benchmarks/bench_families.py --quick    # a smoke test: tiny shapes, one round

For each family attnlab loads (DiffLlama, SmolLM3, Qwen3.5's hybrid of Gated DeltaNet and gated attention,
Qwen3-Next's with a mixture of experts in every layer, DeepSeek-V3's multi-head latent attention and mixture of
experts, Gemma 4's shared-KV layers and per-layer inputs, Kimi Linear's KDA beside MLA without RoPE:
:func:`configs`), a small random model is written by transformers (``save_pretrained``) and read back by
``load_causal_lm``; then, on one torch thread, in interleaved rounds (so that a change of load hits both alike),
the median of:

* **prefill**: one forward pass over ``T`` tokens (tokens/s);
* **decoding**: greedy decoding of ``new`` tokens after a short prompt, at batch 1 and 8, with each library's cache
  (attnlab's ``generate``; transformers' ``generate``, ``do_sample=False``): tokens/s, the tokens asserted equal;
* **the cache at 4k tokens**: the bytes attnlab's cache holds after a prefill of 4,096 tokens against the formula
  of :mod:`attnlab.models.caches.size`, asserted equal.

And the gated delta rule's chunked form against its recurrence (the same outputs, one token at a time) at T = 512 and
2,048 (batch 1, 8 heads of 64): the ratio of their times. Each call is timed in CPU seconds of this process
(``time.process_time``, one thread), so the time it waits for a busy core is left out.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

from attnlab.bench.machine import machine_facts
from attnlab.files import atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results" / "families.md"
VOCAB = 512
FULL = dict(width=256, layers=4, prefill=512, prompt=16, new=32, rounds=7, delta_lengths=(512, 2048), cache=4096)
QUICK = dict(width=64, layers=4, prefill=32, prompt=4, new=4, rounds=1, delta_lengths=(64,), cache=64)


def configs(width: int, layers: int) -> dict[str, Callable[[], object]]:
    """transformers' config of each family, ``width`` wide and ``layers`` deep (heads of 32 or 64)."""
    import transformers

    common = dict(vocab_size=VOCAB, hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers,
                  max_position_embeddings=8192, bos_token_id=None, eos_token_id=None, pad_token_id=None,
                  attn_implementation="eager")
    heads = max(4, width // 64)
    rope = dict(rope_type="default", rope_theta=10000.0)
    return {
        "DiffLlama": lambda: transformers.DiffLlamaConfig(**common, num_attention_heads=heads,
                                                          num_key_value_heads=heads // 2, rope_parameters=rope),
        "SmolLM3": lambda: transformers.SmolLM3Config(**common, num_attention_heads=heads,
                                                      num_key_value_heads=heads // 2, rope_parameters=rope),
        "Qwen3.5 (DeltaNet 3:1)": lambda: transformers.Qwen3_5TextConfig(
            **common, num_attention_heads=heads, num_key_value_heads=heads // 2, head_dim=width // heads,
            linear_num_key_heads=heads // 2, linear_num_value_heads=heads, linear_key_head_dim=width // heads,
            linear_value_head_dim=width // heads,
            rope_parameters={**rope, "partial_rotary_factor": 0.25, "mrope_section": [1, 1, 0]}),
        "Qwen3-Next (DeltaNet 3:1, MoE)": lambda: transformers.Qwen3NextConfig(
            **common, num_attention_heads=heads, num_key_value_heads=heads // 2, head_dim=width // heads,
            linear_num_key_heads=heads // 2, linear_num_value_heads=heads, linear_key_head_dim=width // heads,
            linear_value_head_dim=width // heads, rope_parameters={**rope, "partial_rotary_factor": 0.25},
            num_experts=8, num_experts_per_tok=2, moe_intermediate_size=width // 2,
            shared_expert_intermediate_size=width),
        "DeepSeek-V3 (MLA, MoE)": lambda: transformers.DeepseekV3Config(
            **common, num_attention_heads=heads, num_key_value_heads=heads, q_lora_rank=width // 2,
            kv_lora_rank=width // 4, qk_nope_head_dim=width // heads, qk_rope_head_dim=width // heads // 2,
            v_head_dim=width // heads, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=width // 2,
            n_group=4, topk_group=2, n_shared_experts=1, first_k_dense_replace=1, rope_parameters=rope),
        # sliding (window 128) and global layers in turn, global heads twice as wide over half the key/value heads
        # with k_eq_v, the last half of the layers reading the keys of the last layer of their kind before them
        "Gemma 4 (shared KV, PLE)": lambda: transformers.Gemma4TextConfig(
            **common, vocab_size_per_layer_input=VOCAB, num_attention_heads=heads, num_key_value_heads=heads // 2,
            head_dim=width // heads, global_head_dim=2 * width // heads, num_global_key_value_heads=heads // 4,
            attention_k_eq_v=True, layer_types=["sliding_attention", "full_attention"] * (layers // 2),
            sliding_window=128, num_kv_shared_layers=layers // 2, hidden_size_per_layer_input=width // 4,
            final_logit_softcapping=30.0),
        "Kimi Linear (KDA 3:1 + MLA, MoE)": lambda: transformers.KimiLinearConfig(
            **common, num_attention_heads=heads, num_key_value_heads=heads, kv_lora_rank=width // 4,
            qk_nope_head_dim=width // heads, qk_rope_head_dim=width // heads // 2, v_head_dim=width // heads,
            linear_num_heads=heads, linear_head_dim=width // heads, num_local_experts=8, num_experts_per_tok=2,
            moe_intermediate_size=width // 2, n_group=4, topk_group=2, n_shared_experts=1,
            layer_types=(["linear_attention"] * 3 + ["full_attention"]) * (layers // 4)),
    }


def write_tokenizer(path: Path) -> None:
    """A byte-level BPE: ``load_causal_lm`` reads a directory's tokenizer.json (the ids here are drawn, not read)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    tok.train_from_iterator(["attention " * 50], trainers.BpeTrainer(
        vocab_size=260, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok.save(str(path))


def order_one(model: torch.nn.Module) -> torch.nn.Module:
    """Weights of order 1, so that greedy choices are far from ties and both libraries' tokens can be compared."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5 if p.dim() > 1 else 1 + 0.2 * torch.randn_like(p))
    return model


def cpu_seconds(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def family_rows(name: str, make_config: Callable[[], object], s: dict, tmp: Path) -> dict:
    """Prefill and decoding tokens/s of both libraries, and the cache's bytes against the formula."""
    import transformers

    from attnlab.fast import accelerated
    from attnlab.generation import GenerationConfig, generate
    from attnlab.pretrained import load_causal_lm

    torch.manual_seed(0)
    hf = order_one(transformers.AutoModelForCausalLM.from_config(make_config()).eval())
    directory = tmp / name.split()[0]
    hf.save_pretrained(directory)
    hf.generation_config.pad_token_id, hf.generation_config.eos_token_id = 0, None
    write_tokenizer(directory / "tokenizer.json")
    ours, _ = load_causal_lm(directory)
    fast = accelerated(ours)  # what generate runs (its logits equal the plain model's: tests/fast)
    gen = torch.Generator().manual_seed(1)
    long = torch.randint(1, VOCAB, (1, s["prefill"]), generator=gen)
    prompts = {b: torch.randint(1, VOCAB, (b, s["prompt"]), generator=gen) for b in (1, 8)}
    greedy = GenerationConfig(temperature=0)
    runs: dict[str, Callable[[], object]] = {
        "prefill attnlab": lambda: fast(long), "prefill transformers": lambda: hf(long)}
    for b, p in prompts.items():
        runs[f"b{b} attnlab"] = lambda p=p: generate(ours, p, s["new"], greedy)
        runs[f"b{b} transformers"] = lambda p=p: hf.generate(p, max_new_tokens=s["new"], do_sample=False)
    with torch.no_grad():
        for b in (1, 8):
            assert torch.equal(runs[f"b{b} attnlab"](), runs[f"b{b} transformers"]()), f"{name}: tokens differ"
        times: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(s["rounds"]):
            for key, run in runs.items():
                times[key].append(cpu_seconds(run))
        cache = ours.new_cache(1)
        ours(torch.randint(1, VOCAB, (1, s["cache"]), generator=gen), kv_cache=cache)
    held, formula = cache.filled_nbytes(), ours.config.cache_bytes(s["cache"], dtype=torch.float32)
    assert held == formula, f"{name}: the cache holds {held} bytes, the formula says {formula}"
    tokens = {"prefill": s["prefill"], "b1": s["new"], "b8": 8 * s["new"]}
    rate = {k: tokens[k.split()[0]] / statistics.median(v) for k, v in times.items()}
    return {"rate": rate, "cache": held}


def delta_rule_rows(s: dict) -> list[tuple[str, int, float, float, float]]:
    """``(decay, T, recurrence s, chunked s, max |difference|)`` of the gated delta rule, batch 1, 8 heads of 64:
    one decay per head and token (Gated DeltaNet) and one per key channel too (KDA)."""
    from attnlab.attention.delta_rule import delta_rule_chunked, delta_rule_recurrent, l2_normalise

    rows = []
    for decay, channels in (("per head", ()), ("per channel", (64,))):
        for t in s["delta_lengths"]:
            gen = torch.Generator().manual_seed(t)
            q, k = (l2_normalise(torch.randn(1, 8, t, 64, generator=gen)) for _ in range(2))
            v = torch.randn(1, 8, t, 64, generator=gen)
            log_decay, beta = -torch.rand(1, 8, t, *channels, generator=gen), torch.rand(1, 8, t, generator=gen)
            inputs = (q, k, v, log_decay, beta)
            loop, chunks = [], []
            for _ in range(s["rounds"]):
                loop.append(cpu_seconds(partial(delta_rule_recurrent, *inputs)))
                chunks.append(cpu_seconds(partial(delta_rule_chunked, *inputs)))
            diff = delta_rule_recurrent(*inputs)[0] - delta_rule_chunked(*inputs)[0]
            rows.append((decay, t, statistics.median(loop), statistics.median(chunks), float(diff.abs().max())))
    return rows


def report(args: argparse.Namespace, s: dict, families: dict[str, dict], delta: list) -> str:
    command = "benchmarks/bench_families.py" + (" --quick" if args.quick else "")
    lines = ["# Today's families against transformers, on this CPU", "", machine_facts().summary(), "",
             f"Command: `{command}`. Random models {s['width']} wide, {s['layers']} layers, vocabulary {VOCAB}, "
             f"written by transformers and loaded by `load_causal_lm`; one torch thread; CPU seconds of the process, "
             f"median of {s['rounds']} interleaved round(s). Prefill: one forward pass over {s['prefill']} tokens "
             "(attnlab's model through `accelerated`, as `generate` runs it). "
             f"Decoding: {s['new']} greedy tokens after {s['prompt']}, each library's `generate` with its cache "
             "(the tokens asserted equal). Ratio: attnlab / transformers (above 1: attnlab faster).", "",
             "| family | prefill tok/s (attnlab / transformers) | ratio | batch 1 tok/s | ratio | batch 8 tok/s "
             f"| ratio | cache at {s['cache']:,} tokens (fp32, = formula) |", "|---|---|---|---|---|---|---|---|"]
    for name, r in families.items():
        cells = []
        for part in ("prefill", "b1", "b8"):
            ours, theirs = r["rate"][f"{part} attnlab"], r["rate"][f"{part} transformers"]
            cells += [f"{ours:,.0f} / {theirs:,.0f}", f"{ours / theirs:.2f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {r['cache']:,} B |")
    lines += ["", "The gated delta rule (batch 1, 8 heads of 64): one token at a time (the recurrence, the textbook) "
              "against 64 at a time (the chunked form), with one decay per head (Gated DeltaNet) and one per key "
              "channel (KDA); the outputs' largest difference beside.", "",
              "| decay | T | recurrence (s) | chunked (s) | chunked speed-up | max difference |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {decay} | {t:,} | {loop:.3f} | {chunk:.3f} | {loop / chunk:.1f}× | {diff:.1e} |"
              for decay, t, loop, chunk, diff in delta]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test: tiny shapes, one round")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the report [benchmarks/results/families.md]")
    args = parser.parse_args()
    s = QUICK if args.quick else FULL
    torch.set_num_threads(1)
    families = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in configs(s["width"], s["layers"]).items():
            print(f"{name} ...", flush=True)
            families[name] = family_rows(name, make, s, Path(tmp))
    delta = delta_rule_rows(s)
    atomic_write_text(args.out, report(args, s, families, delta))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
