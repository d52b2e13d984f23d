"""Shared pytest set-up: the tests must run against the installed package."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def pytest_configure(config: pytest.Config) -> None:
    import sparse_mlir

    location = Path(sparse_mlir.__file__).resolve()
    if REPO_ROOT in location.parents and "site-packages" not in str(location):
        raise pytest.UsageError(
            f"sparse_mlir was imported from the source tree ({location}); run the tests with "
            "the `pytest` of the venv that `bash dev.sh test` installs the package into")


@pytest.fixture
def one_thread():
    """torch and the compiled kernels on one thread for the test: the cost
    model's timings at two threads on a loaded 2-core machine measure
    OpenMP barriers waiting for descheduled threads, not the kernels."""
    import torch

    import sparse_mlir as sm

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    sm.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
    sm.set_num_threads(None)
