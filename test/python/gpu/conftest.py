"""GPU tests: the `cuda` marker needs an sm_80+ GPU with a driver; without one
those tests are skipped with the reason the driver check gives (never silently)."""

from __future__ import annotations

import pytest

from .cuda_env import cuda_unavailable_reason


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cuda: needs an NVIDIA sm_80+ GPU and its driver (libcuda.so.1)")


@pytest.fixture
def cuda_device() -> None:
    reason = cuda_unavailable_reason()
    if reason:
        pytest.skip(reason)
