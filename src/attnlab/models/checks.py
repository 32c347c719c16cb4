"""What a model checks at its door, once per forward: token ids, padding masks, targets.

Reading tensor values makes the host wait for the device, so a door reads all it needs in one go
(:func:`read_facts`) and the layers inside read nothing.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab.i18n import tr

INTEGER_DTYPES = (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8)
IGNORE_INDEX = -100  # a target position to leave out of the loss (torch's and Hugging Face's convention)


def check_ids_tensor(idx: Tensor, owner: str, name: str = "idx") -> None:
    """``idx`` must be an integer ``(B, T)`` tensor with ``T >= 1`` (shape and dtype only: no values read)."""
    if not isinstance(idx, Tensor):
        raise TypeError(tr("{owner}: {name} must be a torch.Tensor of token ids, got {idx_type}", owner=owner,
                           name=name, idx_type=type(idx).__name__))
    if idx.dtype not in INTEGER_DTYPES:
        raise TypeError(tr("{owner}: {name} must hold integer token ids, got dtype {dtype}", owner=owner, name=name,
                           dtype=idx.dtype))
    if idx.dim() != 2 or idx.shape[1] == 0:
        raise ValueError(tr("{owner}: {name} must have shape (B, T) with T >= 1, got {shape}", owner=owner, name=name,
                            shape=tuple(idx.shape)))


def check_same_shape(owner: str, name: str, t: Tensor | None, shape: tuple[int, ...], of: str = "input_ids") -> None:
    if t is not None and tuple(t.shape) != tuple(shape):
        raise ValueError(tr("{owner}: {name} must have the shape of {of} {shape}, got {shape_2}", owner=owner,
                            name=name, of=of, shape=tuple(shape), shape_2=tuple(t.shape)))


def read_facts(*facts: Tensor) -> list[int]:
    """Scalar tensors -> Python ints, with one host sync for all of them."""
    return torch.stack([f.reshape(()).to(torch.int64) for f in facts]).tolist()


def id_range_error(owner: str, name: str, lo: int, hi: int, vocab_size: int) -> ValueError | None:
    if lo < 0 or hi >= vocab_size:
        return ValueError(tr("{owner}: {name} must be in [0, vocab_size={vocab_size}), got min {lo}, max {hi}",
                             owner=owner, name=name, vocab_size=vocab_size, lo=lo, hi=hi))
    return None


def check_token_ids(idx: Tensor, vocab_size: int, owner: str) -> None:
    """``idx`` must be an integer ``(B, T)`` tensor with every id in ``[0, vocab_size)`` (one host sync)."""
    check_ids_tensor(idx, owner)
    lo, hi = read_facts(idx.min(), idx.max())
    error = id_range_error(owner, "token ids", lo, hi, vocab_size)
    if error is not None:
        raise error


def mask_values_error(owner: str, attention_mask: Tensor) -> ValueError:
    bad = (attention_mask != 0) & (attention_mask != 1)
    return ValueError(tr("{owner}: attention_mask must contain only 0 and 1, got {values}", owner=owner,
                         values=attention_mask[bad].unique().tolist()))


def check_attention_mask_dtype(owner: str, attention_mask: Tensor | None) -> None:
    if attention_mask is not None and (torch.is_floating_point(attention_mask) or torch.is_complex(attention_mask)):
        raise TypeError(tr("{owner}: attention_mask must be bool or integer 0/1, got dtype {dtype}", owner=owner,
                           dtype=attention_mask.dtype))


def check_decoder_inputs(owner: str, idx: Tensor, targets: Tensor | None, attention_mask: Tensor | None,
                         vocab_size: int, context_length: int | None,
                         offset: int = 0) -> tuple[Tensor | None, Tensor | None]:
    """The door of a decoder (GPT, ModernDecoder): ids, targets and padding mask, all read with one host sync.

    ``context_length``: the most positions a learned position table holds (None: no table, no limit).

    ``attention_mask`` covers every key: ``(B, offset + T)`` with ``offset`` positions already in a KV cache
    (Hugging Face's convention). Returns the key mask ``(B, 1, 1, offset + T)`` and each new token's position
    ``(B, T)``, counted over the real tokens of its row (left padding: a row's first real token is position 0,
    as Hugging Face's ``generate`` counts); both None when there is no padding.
    """
    check_ids_tensor(idx, owner)
    b, t = idx.shape
    if context_length is not None and offset + t > context_length:
        raise ValueError(tr("{owner}: {offset} cached + {t} new tokens exceed context_length={context_length}, the "
                            "size of its learned position table; crop idx to its last {context_length} tokens",
                            owner=owner, offset=offset, t=t, context_length=context_length))
    facts = [idx.min(), idx.max()]
    if targets is not None:
        check_ids_tensor(targets, owner, "targets")
        check_same_shape(owner, "targets", targets, idx.shape, of="idx")
        kept = targets != IGNORE_INDEX
        facts += [(kept & ((targets < 0) | (targets >= vocab_size))).any()]
    if attention_mask is not None:
        if not isinstance(attention_mask, Tensor):
            raise TypeError(tr("{owner}: attention_mask must be a torch.Tensor, got {attention_mask_type}",
                               owner=owner, attention_mask_type=type(attention_mask).__name__))
        check_attention_mask_dtype(owner, attention_mask)
        if tuple(attention_mask.shape) != (b, offset + t):
            raise ValueError(tr("{owner}: attention_mask must have shape (B, cached + T) = {value} ({offset} cached, "
                                "{t} new), got {shape}", owner=owner, value=(b, offset + t), offset=offset, t=t,
                                shape=tuple(attention_mask.shape)))
        facts += [((attention_mask != 0) & (attention_mask != 1)).any(), attention_mask.all()]
    values = read_facts(*facts)
    error = id_range_error(owner, "token ids", values[0], values[1], vocab_size)
    if error is not None:
        raise error
    if targets is not None and values[2]:
        raise ValueError(tr("{owner}: targets must be in [0, vocab_size={vocab_size}) or {ignore_index} (left out of "
                            "the loss)", owner=owner, vocab_size=vocab_size, ignore_index=IGNORE_INDEX))
    if attention_mask is None:
        return None, None
    if values[-2]:
        raise mask_values_error(owner, attention_mask)
    if values[-1]:  # nothing to mask: the fused kernels run unmasked
        return None, None
    attention_mask = attention_mask.to(idx.device)
    positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, offset:]
    return attention_mask.bool()[:, None, None, :], positions
