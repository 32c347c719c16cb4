"""Training: a GPT on real text, or an encoder-decoder on translation pairs; resumable bit for bit, data-parallel
under torchrun."""

from attnlab.models.checkpoint import Checkpoint, latest_checkpoint, load_checkpoint, save_checkpoint
from attnlab.training.config import Seq2SeqTrainConfig, TrainConfig, load_toml
from attnlab.training.model_config import build_model_config
from attnlab.training.optim import configure_optimizer, lr_at
from attnlab.training.seq2seq_trainer import Seq2SeqTrainer, train_seq2seq
from attnlab.training.trainer import Trainer, TrainResult, train

__all__ = [
    "Checkpoint",
    "Seq2SeqTrainConfig",
    "Seq2SeqTrainer",
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
    "train_seq2seq",
]
