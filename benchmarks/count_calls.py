"""How many of attnlab's own Python functions a call enters: the walk a reader (or the host) takes per call.

    .venv/bin/python benchmarks/count_calls.py             # both walks, with the functions entered
    .venv/bin/python benchmarks/count_calls.py --quiet     # the two counts alone

Counted with ``sys.setprofile``: every ``call`` event whose code lives in attnlab's package (torch's, NumPy's and
the standard library's frames are not counted; a generator counts once per resume, as Python enters it). A count
is a fact of the code, not of the machine, so ``tests/test_walks.py`` holds them to their bounds:

* ``scaled_dot_product_attention(q, k, v, is_causal=True)``, CPU fp32, (2, 4, 128, 64): the functional door;
* one decoded token of the 4-layer ``baby`` ModernDecoder with its cache, as ``generate`` runs it (the model's fast
  twin, after warm-up); and the same token on the book's path (``GenerationConfig(accelerate=False)``: the model as
  built, "plain").
"""

from __future__ import annotations

import argparse
import collections
import sys
from collections.abc import Callable
from pathlib import Path

import torch

import attnlab

PACKAGE = str(Path(attnlab.__file__).resolve().parent)


def count(call: Callable[[], object]) -> collections.Counter[str]:
    """The attnlab functions ``call()`` enters, ``"module.function"`` -> times entered."""
    entered: collections.Counter[str] = collections.Counter()

    def profile(frame, event, arg) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(PACKAGE):
            module = Path(frame.f_code.co_filename).relative_to(PACKAGE).with_suffix("")
            entered[f"{'.'.join(module.parts)}.{frame.f_code.co_qualname}"] += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return entered


def sdpa_walk() -> collections.Counter[str]:
    """``scaled_dot_product_attention(q, k, v, is_causal=True)``, CPU fp32, (2, 4, 128, 64), after a warm-up."""
    from attnlab.functional import scaled_dot_product_attention

    q, k, v = torch.randn(3, 2, 4, 128, 64).unbind(0)
    scaled_dot_product_attention(q, k, v, is_causal=True)  # the kind's kernel chosen once
    return count(lambda: scaled_dot_product_attention(q, k, v, is_causal=True))


def decode_walk(plain: bool = False) -> collections.Counter[str]:
    """One decoded token of the ``baby`` ModernDecoder with its cache, the way ``generate`` steps it: on the model's
    fast twin, or with ``plain`` on the model as built."""
    from attnlab.fast import accelerated
    from attnlab.generation.loop import Steps
    from attnlab.models import ModernDecoder, ModernDecoderConfig

    torch.manual_seed(0)
    model = ModernDecoder(ModernDecoderConfig.from_preset("baby")).eval()
    model = model if plain else accelerated(model)
    prompt = torch.randint(0, 256, (1, 8))
    with torch.no_grad():
        steps = Steps(model, model.new_cache(1), None)
        steps.prefill(prompt)
        token = prompt[:, -1:]
        for _ in range(3):  # the caches have grown, the kernels are chosen: the steady state
            steps.step(token, None)
        return count(lambda: steps.step(token, None))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", action="store_true", help="print the counts only")
    args = parser.parse_args()
    for name, walk in (("scaled_dot_product_attention(q, k, v, is_causal=True)", sdpa_walk),
                       ("one decoded token of the baby ModernDecoder", decode_walk),
                       ("the same token, plain", lambda: decode_walk(plain=True))):
        entered = walk()
        print(f"{name}: {sum(entered.values())} calls of {len(entered)} functions")
        if not args.quiet:
            for function, times in entered.most_common():
                print(f"  {times:4d}  {function}")


if __name__ == "__main__":
    main()
