"""Weight-only quantization of a trained model, for decoding: ``quantize(model, "int8")``.

Every linear map (the attention's projections, the feed-forward's, the output head) is swapped, in place, for one
that keeps its weight in 8 or 4 bits (:mod:`attnlab.fast.quantized_linear`); embeddings and norms stay as they
are (an embedding reads one row per token, a norm a vector). A decoding step then streams a quarter (int8) or an
eighth (int4) of the bytes of fp32. What it costs in quality is measured, not assumed: docs/decoding.md and
``benchmarks/bench_decode.py``.

A quantized model is for inference: quantizing one in training mode is refused, and so is training it afterwards.
"""

from __future__ import annotations

from torch import nn

from attnlab.fast.quantized_linear import INT4_GROUP_SIZES, Int4Linear, Int8Linear, QuantizedLinear, int4_available
from attnlab.i18n import N_, tr

#: the schemes ``quantize`` (and ``attnlab sample --quantize``) accepts, with what each keeps per weight
SCHEMES: dict[str, str] = {
    "int8": N_("8-bit weights, one scale per output row"),
    "int4": N_("4-bit weights, a scale and an offset per group of inputs (CPU)"),
}


def quantize(model: nn.Module, scheme: str = "int8", *, group_size: int = 128) -> nn.Module:
    """``model`` with every ``nn.Linear`` replaced by its weight-only quantized twin; returns ``model`` (changed in
    place, put in eval mode for good).

    Args:
        model: a model in eval mode (``model.eval()``): quantization is for inference.
        scheme: one of :data:`SCHEMES`: ``"int8"`` or ``"int4"``.
        group_size: int4 only: inputs per scale, one of 32, 64, 128, 256, dividing every layer's inputs.

    Example:
        >>> from attnlab.models import GPT, GPTConfig
        >>> model = quantize(GPT(GPTConfig.from_preset("tiny")).eval(), "int8")
        >>> type(model.blocks[0].attn.W_query).__name__
        'Int8Linear'
    """
    check_quantizable(model, scheme, group_size)
    targets = linears(model)
    if scheme == "int4":
        check_group_size(targets, group_size)
    for _, parent, name, linear in targets:
        q = Int8Linear.from_linear(linear) if scheme == "int8" else Int4Linear.from_linear(linear, group_size)
        setattr(parent, name, q.to(linear.weight.device))
    return model.eval()


Target = tuple[str, nn.Module, str, nn.Linear]  # (qualified name, parent, attribute name, the map)


def linears(model: nn.Module) -> list[Target]:
    """Every ``nn.Linear`` inside ``model``, in the order of the model's modules: ``(qualified name, parent,
    attribute name, the map)``."""
    found = []
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            parent, _, attribute = name.rpartition(".")
            found.append((name, model.get_submodule(parent), attribute, module))
    return found


def is_quantized(model: nn.Module) -> bool:
    """Whether any map of ``model`` is a weight-only quantized one."""
    return any(isinstance(m, QuantizedLinear) for m in model.modules())


def check_quantizable(model: nn.Module, scheme: str, group_size: int) -> None:
    """The scheme is known, the model is in eval mode and not quantized already, int4's kernel is there."""
    if scheme not in SCHEMES:
        raise ValueError(tr("quantize: scheme must be one of {schemes}, got {scheme!r}", schemes=list(SCHEMES),
                            scheme=scheme))
    if not isinstance(model, nn.Module):
        raise TypeError(tr("quantize: model must be a torch nn.Module, got {model_type}",
                           model_type=type(model).__name__))
    if is_quantized(model):
        raise ValueError(tr("quantize: {model_type} is quantized already; quantize the floating-point model",
                            model_type=type(model).__name__))
    if model.training:
        raise ValueError(tr("quantize: {model_type} is in training mode; weight-only quantization is for inference: "
                            "call model.eval() first (and train the floating-point model, not the quantized one)",
                            model_type=type(model).__name__))
    if scheme == "int4" and not int4_available():
        raise ValueError(tr("quantize: this torch build has no CPU int4 kernel (aten._weight_int4pack_mm_for_cpu); "
                            "use 'int8'"))
    if scheme == "int4" and group_size not in INT4_GROUP_SIZES:
        raise ValueError(tr("quantize: group_size must be one of {sizes}, got {group_size!r}",
                            sizes=list(INT4_GROUP_SIZES), group_size=group_size))


def check_group_size(targets: list[Target], group_size: int) -> None:
    """int4 groups ``group_size`` inputs of each row: every layer's inputs must be a multiple of it."""
    for layer, _, _, linear in targets:
        k, n = linear.in_features, linear.out_features
        if k % group_size:
            raise ValueError(tr("quantize: int4 cannot quantize layer {layer}: its weight has shape {shape} "
                                "(out, in), and group_size={group_size} must divide its {k} inputs; choose a "
                                "group_size of {sizes} that divides it, or 'int8'",
                                layer=layer, shape=(n, k), group_size=group_size, k=k,
                                sizes=list(INT4_GROUP_SIZES)))
        if linear.weight.device.type != "cpu":
            raise ValueError(tr("quantize: int4 runs on the CPU only, got layer {layer} on {device}; use 'int8'",
                                layer=layer, device=linear.weight.device))
