"""StreamingLLM's point on a small model trained here: perplexity over a stream far longer than the training
context, with the window alone against attention sinks plus the window (Xiao et al., 2023, arXiv:2309.17453).

    .venv/bin/python -m attnlab train --data shakespeare --arch modern --preset baby --context-length 128 \\
        --batch-size 16 --max-iters 1000 --device cpu --out out/sinks          # a few minutes on a CPU
    .venv/bin/python benchmarks/bench_sinks.py --run out/sinks                 # ≈ 1 min

The stream is the end of the corpus (the validation split: text the model was not trained on), fed one token at a
time. Three caches, the same model and tokens: ``full`` keeps everything (RoPE past its training length);
``window`` keeps the last ``--window`` positions (``sink_tokens=0``); ``sinks`` keeps the first ``--sinks`` and
the last ``--window − --sinks`` (the same memory). Both bounded caches turn the keys to their places in the cache
(:class:`attnlab.models.SinkKVCache`). Perplexity is reported over the stream's stretches: before the window
slides, and in bands after. Deterministic: no sampling, no timing.

At this scale the paper's point does not show (docs/modern.md): the baby forms no sink (its first position gets
less than a uniform share of attention), and 4 sinks or none, the bounded caches stay at the same perplexity
(≈ 5.9 past 512 tokens), where the full cache, past its 128 trained positions, climbs to ≈ 12.9.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F

from attnlab.data.corpus import load_text
from attnlab.models import SinkKVCache, load_trained


def stream_nll(model, ids: torch.Tensor, cache) -> torch.Tensor:
    """Each token's negative log-likelihood ``(T − 1,)`` given the ones before it, fed one at a time into
    ``cache`` (made for ``model`` and one row)."""
    out = []
    with torch.no_grad():
        for t in range(ids.shape[0] - 1):
            logits = model(ids[None, t : t + 1], kv_cache=cache).logits[0, -1]
            out.append(F.cross_entropy(logits[None], ids[None, t + 1]))
    return torch.stack(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, help="an attnlab train output directory of a modern (RoPE) model")
    parser.add_argument("--data", default="shakespeare", help="the corpus it was trained on (default: shakespeare)")
    parser.add_argument("--length", type=int, default=2048, help="tokens in the stream")
    parser.add_argument("--window", type=int, default=64, help="positions each bounded cache keeps")
    parser.add_argument("--sinks", type=int, default=4, help="of those, the first positions kept for ever")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, tokenizer = load_trained(args.run)
    text = load_text(args.data)
    ids = torch.tensor(tokenizer.encode(text[-args.length * 4 :]))[-args.length :]
    caches = {"full": model.new_cache(1),
              "window": SinkKVCache.for_model(model, 1, sink_tokens=0, sliding_window=args.window),
              "sinks": SinkKVCache.for_model(model, 1, sink_tokens=args.sinks, sliding_window=args.window - args.sinks)}
    results = {name: stream_nll(model, ids, cache) for name, cache in caches.items()}
    context = model.config.context_length
    bands = [(0, args.window), (args.window, context), (context, 4 * context), (4 * context, args.length - 1)]
    print(f"model: {args.run} (trained on {context} positions); stream of {args.length} tokens; bounded caches of "
          f"{args.window} positions ({args.sinks} sinks)")
    print(f"| tokens | {' | '.join(results)} |")
    print("|---|" + "---|" * len(results))
    for lo, hi in bands:
        if hi > lo:
            cells = " | ".join(f"{math.exp(float(nll[lo:hi].mean())):.2f}" for nll in results.values())
            print(f"| {lo}–{hi} | {cells} |")


if __name__ == "__main__":
    main()
