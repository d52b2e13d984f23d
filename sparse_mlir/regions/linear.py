"""A sparse weight read by F.linear, as a region: our kernel or torch's, per token count."""

from __future__ import annotations

import logging
import threading
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from .._memref import Kernel
from ..compiler import SparseFallbackWarning
from ..encodings import Encoding
from ..errors import CompileError
from .kernels import KERNELS, CompiledLinear, KernelOptions, LinearSignature, median_seconds

log = logging.getLogger("sparse_mlir.regions")


@dataclass
class Choice:
    """What runs a region at one token count, and why."""

    tokens: int
    kernel: Kernel | None          # None: torch's F.linear on the pruned dense weight
    ours_ms: float | None
    torch_ms: float | None
    reason: str
    compiled: CompiledLinear | None = None


# (signature, tokens, density, bias, options) -> (ours ms, torch ms, reason):
# the cost model's measurements, shared by the weights they describe.
_DECISIONS: dict[tuple, tuple[float, float, str]] = {}


class LinearRegion:
    """y = x W^T (+ bias) for one encoded weight W (all F.linears reading it).

    The kernel for a token count T is built on the first call with T rows
    (shared with every weight of the same signature) and, with the cost
    model on, timed against torch's F.linear on that call's input: the
    faster one runs every later call with T rows."""

    def __init__(self, name: str, encoding: Encoding, effective: torch.Tensor, packed: Sequence[np.ndarray],
                 bias: bool, options: KernelOptions, cost_model: bool) -> None:
        self.name = name
        self.encoding = encoding
        out_features, in_features = effective.shape
        self.signature = LinearSignature(in_features, out_features, encoding.attr_text(), bias)
        self._weight = effective
        self._packed = [np.ascontiguousarray(a) for a in packed]
        self._options = options
        self._cost_model = cost_model
        self._lock = threading.Lock()
        self.choices: dict[int, Choice] = {}
        self._warned = False
        self.density = float(np.count_nonzero(effective.numpy())) / max(1, effective.numel())

    @property
    def buffers(self) -> list[torch.Tensor]:
        """The packed weight as tensors (zero-copy views of the kernel's arguments)."""
        return [torch.from_numpy(a) for a in self._packed]

    def __call__(self, x: torch.Tensor, buffers: Sequence[torch.Tensor], bias: torch.Tensor | None) -> torch.Tensor:
        flat = x.reshape(-1, self.signature.in_features)
        tokens = flat.shape[0]
        choice = self.choices.get(tokens)
        if choice is None:
            choice = self._choose(flat, bias)
        if choice.kernel is None or x.dtype != torch.float32 or x.device.type != "cpu":
            return torch.nn.functional.linear(x, self._weight.to(x.dtype), bias)
        return self._run(choice.kernel, flat, bias).reshape(*x.shape[:-1], self.signature.out_features)

    def _run(self, kernel: Kernel, flat: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        flat = flat.contiguous()
        tokens, depth = flat.shape
        signature = [((tokens, depth), (depth, 1), np.dtype(np.float32))]
        addresses = [flat.data_ptr()]
        if bias is not None:
            bias = bias.contiguous()
            signature.append(((bias.shape[0],), (1,), np.dtype(np.float32)))
            addresses.append(bias.data_ptr())
        return torch.from_numpy(kernel.call_addresses(tuple(signature), addresses))

    def _choose(self, flat: torch.Tensor, bias: torch.Tensor | None) -> Choice:
        tokens = flat.shape[0]
        with self._lock:
            if tokens in self.choices:
                return self.choices[tokens]
            choice = self._decide(flat, bias)
            self.choices[tokens] = choice
            log.info("%s, %d tokens: %s", self.name, tokens, choice.reason)
            return choice

    def _decide(self, flat: torch.Tensor, bias: torch.Tensor | None) -> Choice:
        tokens = flat.shape[0]
        if flat.dtype != torch.float32 or (bias is not None and bias.dtype != torch.float32):
            return Choice(tokens, None, None, None, f"torch: {flat.dtype} (the CPU kernels take float32)")
        try:
            compiled = KERNELS.get(self.signature, self.encoding, tokens, self._options)
        except CompileError as error:
            self._warn(f"no sparse kernel for F.linear reading '{self.name}' stored as "
                       f"{self.encoding.format_name}: {error}; torch's F.linear runs it on the pruned weight")
            return Choice(tokens, None, None, None, f"torch: the kernel did not compile ({error})")
        for message in compiled.fallbacks:
            self._warn(message.replace("tensor 'weight'", f"tensor '{self.name}'"))
        bound = self._packed if compiled.stored_sparse else [self._weight.contiguous().numpy()]
        kernel = Kernel(compiled.engine.lookup("main"), bound, 2, np.float32, owner=compiled)
        if not self._cost_model:
            return Choice(tokens, kernel, None, None, "ours (cost_model=False)", compiled)
        # Weights of one signature and density run alike: measured once.
        key = (self.signature, tokens, round(self.density, 2), bias is not None, self._options)
        shared = _DECISIONS.get(key)
        if shared is not None:
            ours_ms, torch_ms, reason = shared
            return Choice(tokens, kernel if ours_ms < torch_ms else None, ours_ms, torch_ms,
                          f"{reason}, measured on a weight of the same shape, format and density", compiled)
        x = flat.contiguous()
        ours = median_seconds(lambda: self._run(kernel, x, bias))
        weight = self._weight
        theirs = median_seconds(lambda: torch.nn.functional.linear(x, weight, bias))
        timing = f"ours {ours * 1e3:.3f} ms, torch {theirs * 1e3:.3f} ms"
        _DECISIONS[key] = (ours * 1e3, theirs * 1e3, f"{'ours' if ours < theirs else 'torch'} ({timing})")
        if ours < theirs:
            return Choice(tokens, kernel, ours * 1e3, theirs * 1e3, f"ours ({timing})", compiled)
        return Choice(tokens, None, ours * 1e3, theirs * 1e3, f"torch ({timing})", compiled)

    def _warn(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(message, SparseFallbackWarning, stacklevel=4)
