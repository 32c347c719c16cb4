"""The constants of the checkpoint format (the pointer's name, the format's number, the sharded directory) and the
rule every reader checks: the tokenizer saved with the weights is the one they were trained with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnlab.data.tokenizer import Tokenizer
from attnlab.i18n import tr

POINTER = "checkpoint.json"
FORMAT = 3
#: the directory, inside a checkpoint, of the weights and optimizer state written in pieces by every process
#: (``torch.distributed.checkpoint``, under ``--parallel fsdp`` or ``tp``); its ``state.json`` says ``"sharded"``
SHARDED = "sharded"


def check_vocabulary(tokenizer: Tokenizer, model_config: dict[str, Any], checkpoint: Path) -> None:
    """The tokenizer saved with the weights must be the one they were trained with: as many tokens."""
    expected = model_config.get("vocab_size")
    if expected is not None and tokenizer.vocab_size != expected:
        raise ValueError(tr("checkpoint {checkpoint!r}: tokenizer.json holds {found} tokens but the model was trained "
                            "on {expected}; the tokenizer does not belong to these weights", checkpoint=str(checkpoint),
                            found=tokenizer.vocab_size, expected=expected))
