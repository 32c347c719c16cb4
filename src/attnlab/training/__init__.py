"""Training: a GPT on real text, resumable bit for bit, data-parallel under torchrun."""

from attnlab.training.checkpoint import Checkpoint, latest_checkpoint, load_checkpoint, save_checkpoint
from attnlab.training.config import TrainConfig, load_toml
from attnlab.training.optim import configure_optimizer, lr_at
from attnlab.training.trainer import Trainer, TrainResult, build_model_config, train

__all__ = [
    "Checkpoint",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "build_model_config",
    "configure_optimizer",
    "latest_checkpoint",
    "load_checkpoint",
    "load_toml",
    "lr_at",
    "save_checkpoint",
    "train",
]
