"""The torch custom op a compiled sparse region runs as.

`torch.ops.sparse_mlir.linear(x, buffers, bias, out_features, region)`
computes `F.linear(x, W, bias)` for the sparse weight `W` that region
`region` of this process stores in `buffers` (its packed positions,
coordinates and values, in the kernel's argument order). `region` is a
handle into `REGIONS`, filled by the compiler: the region object picks (and
builds on first use) the kernel for the call's token count. The fake
implementation gives torch.export / torch.compile the output's shape and
dtype without running anything.
"""

from __future__ import annotations

import itertools
import threading
from typing import Protocol, Sequence

import torch


class RegionKernel(Protocol):
    """What a region handle stands for: y[T, N] = x[T, K] W^T (+ bias)."""

    def __call__(self, x: torch.Tensor, buffers: Sequence[torch.Tensor],
                 bias: torch.Tensor | None) -> torch.Tensor: ...


class _Registry:
    """Region handles -> region kernels (process-wide; handles never reused)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._regions: dict[int, RegionKernel] = {}
        self._next = itertools.count(1)

    def add(self, region: RegionKernel) -> int:
        with self._lock:
            handle = next(self._next)
            self._regions[handle] = region
            return handle

    def remove(self, handle: int) -> None:
        with self._lock:
            self._regions.pop(handle, None)

    def get(self, handle: int) -> RegionKernel:
        region = self._regions.get(handle)
        if region is None:
            raise RuntimeError(f"sparse_mlir::linear: region {handle} does not exist in this process (a compiled "
                               "model's regions live as long as the model; a pickled or torch.save'd model cannot "
                               "bring them to another process: use fn.export / sm.load for deployment)")
        return region


REGIONS = _Registry()


@torch.library.custom_op("sparse_mlir::linear", mutates_args=())
def linear(x: torch.Tensor, buffers: list[torch.Tensor], bias: torch.Tensor | None, out_features: int,
           region: int) -> torch.Tensor:
    """F.linear(x, W, bias) with W stored sparsely in `buffers`, by region `region`'s kernel."""
    return REGIONS.get(region)(x, buffers, bias)


@linear.register_fake
def _(x: torch.Tensor, buffers: list[torch.Tensor], bias: torch.Tensor | None, out_features: int,
      region: int) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], out_features))
