"""The walks a call takes through attnlab's own Python: counted (benchmarks/count_calls.py), never timed.

A count is a fact of the code: the same on any machine, busy or idle. The bounds are the design's: the functional
door checks its arguments and runs the kind's kernel, chosen once; a decoding step runs the blocks unchecked.
"""

from __future__ import annotations

import pytest

from benchmark_scripts import benchmark_script


@pytest.fixture(scope="module")
def walks():
    with benchmark_script("count_calls") as module:
        yield module


def test_the_functional_door_enters_at_most_eight_functions(walks):
    entered = walks.sdpa_walk()
    assert sum(entered.values()) <= 8, entered
    assert "functional.backends.sdpa_kernel" in entered  # the walk reached torch's kernel: it counted the call


def test_one_decoded_token_of_the_baby_modern_decoder_makes_at_most_150_calls(walks):
    entered = walks.decode_walk()
    assert sum(entered.values()) <= 150, entered.most_common(10)
    assert entered["layers.modern_block.ModernBlock.forward"] == 4  # every layer ran: it counted a real step
    # generate checked the prompt once: a step passes no model door (token ids, masks: a host sync each)
    assert "models.language_model.LanguageModel.forward" not in entered
    assert not any(name.startswith("models.checks.") for name in entered), entered
