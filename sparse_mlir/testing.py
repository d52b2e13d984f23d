"""Helpers for tests and benchmarks that build real models."""

from __future__ import annotations

import sys
import types
from typing import Any


def import_torchvision() -> Any:
    """torchvision, imported beside torch's CPU build.

    PyPI's torchvision wheel is built against CUDA torch: importing it
    registers fake kernels for its C ops (`torchvision::nms`, ...), which do
    not exist here, and fails. Its models are plain Python and need none of
    them, so the registrations are skipped (timm imports torchvision too:
    call this first)."""
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    import torchvision
    return torchvision


def import_transformers() -> Any:
    """transformers (which imports torchvision where it is installed: see
    `import_torchvision`), its logging quiet."""
    try:
        import_torchvision()
    except ImportError:   # not installed: transformers does without it
        pass
    import transformers
    transformers.logging.set_verbosity_error()
    return transformers
