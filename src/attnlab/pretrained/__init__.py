"""Real pretrained weights: BERT-family encoders from Hugging Face style directories (offline)."""

from attnlab.pretrained.bert import PretrainedBert, TokenBatch
from attnlab.pretrained.load import load_bert, resolve_model_dir

__all__ = ["PretrainedBert", "TokenBatch", "load_bert", "resolve_model_dir"]
