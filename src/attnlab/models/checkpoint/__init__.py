"""The checkpoint format, written and read in one place: everything needed to continue a run exactly, and to load
the model it trained, with no pickle anywhere.

Layout of an output directory::

    OUT/checkpoint.json              {"latest": "checkpoints/step_000500"}  (the pointer)
    OUT/checkpoints/step_000500/
        model.safetensors            the weights
        optimizer.safetensors        AdamW's moment tensors and step counters
        rng.safetensors              each process' torch RNG state
        state.json                   step, configs, loss history, optimizer scalars (lr, betas, ...)
        tokenizer.json               the tokenizer, as saved by attnlab.data
    OUT/loss.png                     the loss curve (drawn by the CLI and the demo, not here)

A checkpoint is written whole into a temporary directory and renamed into place; then the
pointer is replaced atomically (temp file + ``os.replace``). A crash at any moment leaves the
pointer on a complete checkpoint: the new one or the previous one.

Here: the format's constants (``layout``), writing (``write``), reading (``read``), the optimizer's state
(``optimizer``) and the one-file export (``exported``).
"""

from attnlab.models.checkpoint.exported import EXPORTED, export_weights, read_exported
from attnlab.models.checkpoint.layout import FORMAT, POINTER, SHARDED, check_vocabulary
from attnlab.models.checkpoint.optimizer import optimizer_from_tensors, optimizer_to_tensors
from attnlab.models.checkpoint.read import (
    Checkpoint,
    checkpoint_kind,
    latest_checkpoint,
    load_checkpoint,
    load_trained,
    load_weights,
    load_weights_file,
    model_of,
    read_state,
    read_tensors,
    read_tokenizer,
    resolve_checkpoint,
)
from attnlab.models.checkpoint.write import checkpoint_name, publish_checkpoint, save_checkpoint

__all__ = ["EXPORTED", "FORMAT", "POINTER", "SHARDED", "Checkpoint", "check_vocabulary", "checkpoint_kind",
           "checkpoint_name", "export_weights", "latest_checkpoint", "load_checkpoint", "load_trained", "load_weights",
           "load_weights_file", "model_of", "optimizer_from_tensors", "optimizer_to_tensors", "publish_checkpoint",
           "read_exported", "read_state", "read_tensors", "read_tokenizer", "resolve_checkpoint", "save_checkpoint"]
