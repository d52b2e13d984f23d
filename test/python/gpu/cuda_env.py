"""Whether target='cuda' code can run on this machine."""

from __future__ import annotations


def cuda_unavailable_reason() -> str | None:
    """Why target='cuda' code cannot run here, or None when it can."""
    from sparse_mlir.compiler.cuda import CudaUnavailableError
    from sparse_mlir.runtime.cuda.driver import require_device

    try:
        require_device()
    except CudaUnavailableError as error:
        return f"no CUDA GPU: {error}"
    return None
