"""Every field of a checkpoint's ``config.json`` is accounted for: read by attnlab, or known to change nothing.

A field neither read nor known (a quantisation, a new attention variant, a typo'd name) is a ValueError naming the
field and its value, never silently ignored: a model that loads and quietly computes something else is the worst
outcome a loader can have. A field set to ``null`` turns nothing on, so it passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnlab.i18n import tr

#: written by transformers into every config, or about generation, training or bookkeeping: what the network
#: computes does not depend on them
UNCHANGING = frozenset((
    "architectures", "model_type", "transformers_version", "torch_dtype", "dtype", "_name_or_path", "name_or_path",
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id", "use_cache",
    "initializer_range", "output_hidden_states", "output_attentions", "return_dict", "chunk_size_feed_forward",
    "is_encoder_decoder", "is_decoder", "id2label", "label2id", "num_labels", "problem_type", "finetuning_task",
    "tokenizer_class", "prefix", "task_specific_params", "torchscript", "use_bfloat16", "tf_legacy_loss",
    "pruned_heads", "tie_encoder_decoder", "cross_attention_hidden_size", "auto_map", "cache_implementation",
    "attention_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop", "pretraining_tp", "max_length", "min_length",
    "do_sample", "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty", "temperature", "top_k",
    "top_p", "typical_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences", "output_scores",
    "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
    "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens", "summary_type",
    "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout", "n_ctx",
    "reorder_and_upcast_attn",  # GPT-2's float32 upcast of the scores: rounding only, attnlab's scores are float32
))

_LLAMA_LIKE = frozenset((
    "vocab_size", "max_position_embeddings", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "intermediate_size", "rms_norm_eps", "hidden_act", "rope_parameters",
    "rope_theta", "rope_scaling", "partial_rotary_factor", "tie_word_embeddings", "sliding_window",
))

#: DeepSeek-V2 and V3 (pretrained/deepseek.py): MLA's sizes, the experts and their router; ``head_dim`` and
#: ``qk_head_dim`` are derived and checked; ``num_nextn_predict_layers`` counts modules outside the causal LM
_DEEPSEEK = frozenset((
    "vocab_size", "max_position_embeddings", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "intermediate_size", "rms_norm_eps", "hidden_act", "rope_parameters",
    "rope_theta", "rope_scaling", "tie_word_embeddings", "attention_bias", "kv_lora_rank", "q_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "qk_head_dim", "v_head_dim", "n_routed_experts", "num_experts_per_tok",
    "moe_intermediate_size", "n_shared_experts", "scoring_func", "topk_method", "n_group", "topk_group",
    "norm_topk_prob", "routed_scaling_factor", "first_k_dense_replace", "moe_layer_freq", "num_nextn_predict_layers",
    # the training's load balancing and expert parallelism: the forward pass does not read them
    "aux_loss_alpha", "seq_aux", "ep_size", "output_router_logits", "router_aux_loss_coef",
))

#: the fields each family's reader looks at (decoder_configs; DeepSeek's: pretrained/deepseek.py)
READ: dict[str, frozenset[str]] = {
    "gpt2": frozenset(("vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner", "activation_function",
                       "layer_norm_epsilon", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
                       "add_cross_attention", "tie_word_embeddings")),
    "llama": _LLAMA_LIKE | {"attention_bias", "mlp_bias"},
    "mistral": _LLAMA_LIKE,
    "qwen2": _LLAMA_LIKE | {"use_sliding_window", "max_window_layers", "layer_types"},
    "qwen3": _LLAMA_LIKE | {"use_sliding_window", "max_window_layers", "layer_types", "attention_bias"},
    "phi3": _LLAMA_LIKE | {"original_max_position_embeddings"},
    "gemma2": _LLAMA_LIKE | {"hidden_activation", "attention_bias", "query_pre_attn_scalar", "layer_types",
                             "attn_logit_softcapping", "final_logit_softcapping", "use_bidirectional_attention"},
    "gemma3": _LLAMA_LIKE | {"hidden_activation", "attention_bias", "query_pre_attn_scalar", "layer_types",
                             "attn_logit_softcapping", "final_logit_softcapping", "use_bidirectional_attention",
                             "sliding_window_pattern", "_sliding_window_pattern", "rope_local_base_freq"},
    "deepseek_v2": _DEEPSEEK | {"mlp_bias"},
    "deepseek_v3": _DEEPSEEK | {"rope_interleave"},
    "deepseek_v32": _DEEPSEEK | {"index_topk", "index_n_heads", "index_head_dim", "layer_types", "mlp_layer_types",
                                 "mlp_bias"},
}


def refuse_unknown_fields(family: str, raw: dict[str, Any], path: Path, read: frozenset[str] | None = None) -> None:
    """A ValueError naming the first field of ``raw`` that ``family``'s reader neither reads (``read``, default
    ``READ[family]``) nor knows to be inert."""
    read = READ[family] if read is None else read
    for field, value in raw.items():
        if value is not None and field not in UNCHANGING and field not in read:
            raise ValueError(tr("{path}: cannot honour {field}={value!r}: attnlab does not implement this field of a "
                                "{family} config (it may change what the model computes)", path=path, field=field,
                                value=value, family=family))
