"""attnlab's C++ CPU kernels for the tests that need them: built once (``attnlab kernels`` does it at install; this is
the same build, for a checkout that skipped it), skipped only where this machine cannot build them at all."""

from __future__ import annotations

import pytest

from attnlab.fast import kernels


def ensure_kernels() -> None:
    """Build (if need be) and load the kernels, or skip with the reason this machine cannot have them."""
    why = kernels.why_not_buildable()
    if why is not None:
        pytest.skip(f"attnlab's CPU kernels cannot run here: {why}")
    kernels.build()
    assert kernels.load() and kernels.ready()


@pytest.fixture(scope="session")
def cpu_kernels() -> None:
    ensure_kernels()
