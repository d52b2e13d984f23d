"""Console entry points shipped with the wheel."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def opt_path() -> Path:
    """The sparse-mlir-opt binary installed next to the package."""
    return Path(__file__).resolve().parent / "_bin" / "sparse-mlir-opt"


def sparse_mlir_opt() -> None:
    binary = opt_path()
    os.execv(binary, [str(binary), *sys.argv[1:]])
