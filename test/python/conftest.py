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
