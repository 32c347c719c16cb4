"""Run under ``torchrun --nproc_per_node=2``: the parallel layouts train the tiny GPT and modern decoder, and a
checkpoint written by one process is resumed by two. The first process writes what the tests compare as JSON.

    torchrun --nproc_per_node=2 tests/parallel_runs.py CORPUS ROOT RESULTS.json [RESUME_DIR [DDP_RESUME_DIR]]

One pair of processes runs every layout (starting torch costs more than training a tiny model): the runs are the
ones :data:`RUNS` names; each trains 20 steps from the same seed as the single-process reference in the tests.
"""

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from attnlab.training import Seq2SeqTrainConfig, Seq2SeqTrainer, TrainConfig
from attnlab.training.distributed import teardown_distributed
from attnlab.training.parallel import held_bytes
from attnlab.training.trainer import Trainer

LAYOUTS = (("fsdp", None), ("tp", None), ("fsdp+tp", 1), ("fsdp+tp", 2))
#: name -> (arch, parallel, tp_size)
RUNS = {f"{arch}-{mode}{'' if tp is None else f'-{tp}'}": (arch, mode, tp)
        for arch in ("gpt", "modern", "transformer") for mode, tp in LAYOUTS
        if arch != "transformer" or mode in ("fsdp", "tp")}
#: the tiny runs' settings, shared with the tests (dropout 0: the layouts draw dropout masks differently)
SETTINGS = dict(max_iters=20, batch_size=4, grad_accum=2, eval_interval=20, eval_iters=3, warmup_iters=2, seed=3,
                keep_checkpoints=3)
#: the run whose step-10 checkpoint one process resumes (the tests): it also saves at step 10
RESHARDED = "gpt-fsdp"
#: runs that recompute each block's activations in backward (under FSDP and TP at once)
CHECKPOINTED = ("gpt-fsdp+tp-2", "modern-fsdp+tp-2")
DECODER = dict(preset="tiny", model={"context_length": 16, "dropout": 0.0})
TRANSLATION = dict(task="numbers", train_pairs=100, val_pairs=10, max_iters=10, eval_interval=10, model={
    "d_model": 32, "num_heads": 2, "num_encoder_layers": 1, "num_decoder_layers": 1, "d_ff": 64, "context_length": 24,
    "dropout": 0.0})


def config(corpus: str, out: Path, arch: str, **more) -> TrainConfig:
    """A tiny run of ``arch``: a decoder on ``corpus``, or (``transformer``) a translation model on numbers."""
    if arch == "transformer":
        return Seq2SeqTrainConfig(out=str(out), **{**SETTINGS, **TRANSLATION, **more})
    return TrainConfig(data=corpus, out=str(out), arch=arch, **{**SETTINGS, **DECODER, **more})


def trainer(config: TrainConfig, **kwargs) -> Trainer:
    return (Seq2SeqTrainer if isinstance(config, Seq2SeqTrainConfig) else Trainer)(config, quiet=True, **kwargs)


def held_after_backward(run: Trainer) -> dict[str, int]:
    """The bytes this process holds with every gradient there: after one more backward (no step), at its peak."""
    run.train_model.train()
    batch = run.draw_batch("train", torch.Generator().manual_seed(0))
    run.compute_loss(run.train_model, batch).backward()
    return held_bytes(run.model, run.optimizer)


def main(corpus: str, root: str, results: str, resume: str | None = None, whole: str | None = None) -> None:
    torch.set_num_threads(1)
    found = {}
    for name, (arch, mode, tp) in RUNS.items():  # the processes of a TP group see the same batches
        more = {"eval_interval": 10} if name == RESHARDED else {}
        more |= {"activation_checkpointing": True} if name in CHECKPOINTED else {}
        run = trainer(config(corpus, Path(root) / name, arch, parallel=mode, tp_size=tp, **more))
        result = run.train()
        held = [None] * run.dist.world_size
        dist.all_gather_object(held, held_after_backward(run))
        found[name] = {"losses": [loss for _, loss in result.train_losses], "held": held, "out": str(result.out),
                       "evals": result.evals}
    if resume is not None:  # written by one process to step 10: two go on to 20
        run = trainer(config(corpus, Path(resume), "gpt", parallel="fsdp"), resume=True)
        found["resumed-by-2"] = {"losses": [loss for _, loss in run.train().train_losses]}
    if whole is not None:  # written by one process under ddp (whole tensors) to step 10: two shard it and go on
        run = trainer(config(corpus, Path(whole), "gpt", parallel="fsdp"), resume=True)
        found["ddp-resumed-by-2-fsdp"] = {"losses": [loss for _, loss in run.train().train_losses]}
    if dist.get_rank() == 0:
        Path(results).write_text(json.dumps(found), encoding="utf-8")
    teardown_distributed()


if __name__ == "__main__":
    main(*sys.argv[1:])
