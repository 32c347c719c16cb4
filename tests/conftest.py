import os

import pytest
from hypothesis import HealthCheck, settings

# Property tests: no per-example deadline (a shared 2-core machine is noisy), a modest number of cases.
settings.register_profile(
    "attnlab", deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "attnlab"))


@pytest.fixture(autouse=True)
def _seed():
    import torch

    torch.manual_seed(0)
