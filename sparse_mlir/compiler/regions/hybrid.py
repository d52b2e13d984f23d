"""A weight stored as `Hybrid(BSR, CSR)`: one linear region, two kernels summed.

The region's packed buffers are the two parts' index buffers and ONE values
buffer (the block part's values, then the CSR part's), so training and the
state dict see one parameter. Each part is a plain LinearRegion over its
index buffers and its slice of the values (a view: the kernels read the
shared buffer in place), run without a cost model of its own; this region
times the two kernels together against torch's F.linear on the whole weight.
The first part writes y (with the bias); the second's kernel accumulates
into it in place (smlir.linear's `into`: its output stage loads y's tile
and adds its product), so no temporary is made or read again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from sparse_mlir.encodings import CSR, ELL, Encoding, Hybrid
from sparse_mlir.errors import SpecError
from sparse_mlir.runtime.threads import get_num_threads
from sparse_mlir.compiler.weights import hybrid_parts
from sparse_mlir.compiler.regions import base
from sparse_mlir.compiler.regions.base import Choice, PieceKernels
from sparse_mlir.compiler.regions.kernels import KernelOptions
from sparse_mlir.compiler.regions.linear import LinearRegion

log = logging.getLogger("sparse_mlir.compiler.regions")


@dataclass(frozen=True)
class HybridKernels:
    """The parts' kernels for one input shape, in the order they run."""

    parts: tuple[tuple[LinearRegion, PieceKernels, bool], ...]   # (part, its kernels, adds the bias)


class HybridLinearRegion(LinearRegion):
    """y = x W^T (+ bias) with W = W_first + W_second stored in two formats."""

    def __init__(self, name: str, encoding: Hybrid, effective: torch.Tensor, packed: Sequence[np.ndarray],
                 bias: bool, options: KernelOptions, cost_model: bool) -> None:
        super().__init__(name, encoding, effective, packed, bias, options, cost_model)
        self._parts = self._make_parts()

    def _part_buffers(self) -> list[tuple[str, Encoding, list[np.ndarray]]]:
        """(name, format a kernel runs, buffers) of each part: its own."""
        encoding = self.encoding
        assert isinstance(encoding, Hybrid)
        return [(part.format_name, part, buffers)
                for part, buffers in zip(encoding.parts, hybrid_parts(encoding, self._packed))]

    def _make_parts(self) -> list[LinearRegion]:
        """The part regions that run (those storing values; the first if none
        does), over views of this region's buffers. The first of them adds the bias."""
        shape = tuple(self._matrix.shape)
        found = self._part_buffers()
        parts = [part for part in found if part[2][-1].size] or found[:1]
        self._part_names = [name for name, _, _ in parts]
        # A part is never read densely (_decide refuses a kernel that would):
        # its dense weight is a zero-stride stand-in, not a copy of W.
        nothing = torch.zeros(1, dtype=torch.float32).expand(shape)
        # The first part writes y (with the bias), the others accumulate into it.
        return [self._part_region(name, part, nothing, buffers, self.signature.bias and index == 0, index > 0)
                for index, (name, part, buffers) in enumerate(parts)]

    def _part_region(self, name: str, encoding: Encoding, dense: torch.Tensor, buffers: list[np.ndarray],
                     bias: bool, accumulate: bool) -> LinearRegion:
        """The region running one part, stored in and compiled for `encoding`
        (with `accumulate`, its kernels add into the y an earlier part wrote)."""
        part = LinearRegion(f"{self.name} ({name} part)", encoding, dense, buffers, bias, self._options,
                            cost_model=False)
        if accumulate:
            part.signature = replace(part.signature, accumulate=True)
        return part

    def split(self) -> str:
        """What each part stores, for sparsity_plan()."""
        encoding = self.encoding
        assert isinstance(encoding, Hybrid)
        total = max(1, int(np.count_nonzero(self._packed[-1])))
        first, second = hybrid_parts(encoding, self._packed)
        r, c = encoding.first.block   # type: ignore[attr-defined]
        blocks = first[-1].size // (r * c)
        first_nnz, second_nnz = int(np.count_nonzero(first[-1])), int(np.count_nonzero(second[-1]))
        return (f"{encoding.first.format_name} {r}x{c}: {blocks} blocks ({first[-1].size} values, "
                f"{first_nnz} nonzero = {100 * first_nnz / total:.0f}% of nnz), "
                f"{encoding.second.format_name}: {second_nnz} nnz ({100 * second_nnz / total:.0f}% of nnz); "
                f"blocks at least {encoding.threshold:g} full go to {encoding.first.format_name}")

    def _follow_replaced_values(self) -> None:
        # (the base rebinds by storing a new array: compared by identity, as
        # `.ctypes` costs ~1 us on every call)
        before = self._packed[-1] if self._packed else None
        super()._follow_replaced_values()
        if self._packed and self._packed[-1] is not before:
            self._parts = self._make_parts()   # bound to the new memory

    def freeze(self) -> None:
        super().freeze()
        for part in self._parts:
            part.freeze()

    def reprune(self, matrix: torch.Tensor) -> None:
        raise SpecError(f"{self.name} ({self.encoding.format_name}): pruning again during training (MaskUpdate) "
                        "is not supported for Hybrid weights yet")

    def _ours(self, kernel: PieceKernels, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        assert isinstance(kernel, HybridKernels)
        columns = x.reshape(-1, self.signature.in_features).contiguous()
        (first, kernels, adds_bias), *rest = kernel.parts
        y = first._linear(kernels, columns, bias if adds_bias else None)
        # The other parts' kernels add into y in place (into its columns for
        # a part stored over some rows of W only: ell.py's remainder): no
        # temporary, no separate add.
        for part, kernels, _ in rest:
            part.accumulate_into(kernels, columns, y)
        return y.reshape(*x.shape[:-1], self.signature.out_features)

    def _decide(self, x: torch.Tensor, bias: torch.Tensor | None) -> Choice:
        if x.dtype != torch.float32 or (bias is not None and bias.dtype != torch.float32):
            return Choice(0, None, None, None, f"torch: {x.dtype} (the CPU kernels take float32)")
        tokens = self._tokens(x)
        if not self._frozen:
            self._exact.add(tokens)
        parts = []
        for index, part in enumerate(self._parts):
            if not self._frozen:
                part._exact.add(tokens)
            choice = part._decide(x, bias if index == 0 else None)
            if choice.kernel is None:
                self._warn(f"no sparse kernel for the {part.encoding.format_name} part of '{self.name}' "
                           f"({self.encoding.format_name}): {choice.reason}; torch's F.linear runs it on the "
                           "pruned weight")
                return Choice(tokens, None, None, None, f"torch: the {part.encoding.format_name} part has no "
                                                        f"kernel ({choice.reason})")
            if not choice.compiled.stored_sparse:   # a part read densely would be the whole cost of dense
                return Choice(tokens, None, None, None, f"torch: the {part.encoding.format_name} part's kernel "
                                                        "reads it densely")
            parts.append((part, choice.kernel, index == 0))
        kernel = HybridKernels(tuple(parts))
        live = True   # the parts read this region's values buffer in place
        if not self._cost_model:
            return Choice(tokens, kernel, None, None, "ours (cost_model=False)", None, live)
        key = (self.signature, tokens, round(self.density, 2), self._options, self._measure_key(x),
               torch.get_num_threads(), get_num_threads(), "hybrid")
        if key not in base._DECISIONS:
            x = x.contiguous()
            run_ours, run_torch = (lambda: self._ours(kernel, x, bias)), (lambda: self._torch(x, bias))
            call = base.call_overhead_ms()
            ours, theirs = base._timed_pair(run_ours, run_torch, call)
            names = " + ".join(self._part_names)
            base._DECISIONS[key] = (ours, theirs, f"{'ours' if base._ours_wins(ours, theirs) else 'torch'} "
                                                  f"({names} kernels {ours:.3f} ms incl. {call * 1e3:.0f} us "
                                                  f"for the custom op call, torch {theirs:.3f} ms)")
            shared = ""
        else:
            shared = ", measured on a weight of the same shape, format and density"
        ours, theirs, reason = base._DECISIONS[key]
        return Choice(tokens, kernel if base._ours_wins(ours, theirs) else None, ours, theirs, reason + shared,
                      None, live)


def linear_region(name: str, encoding: Encoding, effective: torch.Tensor, packed: Sequence[np.ndarray],
                  bias: bool, options: KernelOptions, cost_model: bool) -> LinearRegion:
    """The linear region for `encoding`: a hybrid one for `Hybrid`, an ELL one for ELL (alone or first)."""
    from sparse_mlir.compiler.regions.ell import EllLinearRegion, stores_ell   # (ell.py subclasses this module's)

    if stores_ell(encoding):
        return EllLinearRegion(name, encoding, effective, packed, bias, options, cost_model)
    if isinstance(encoding, Hybrid):
        return HybridLinearRegion(name, encoding, effective, packed, bias, options, cost_model)
    return LinearRegion(name, encoding, effective, packed, bias, options, cost_model)


def exportable(encodings: Mapping[str, Any]) -> dict[str, Any]:
    """`encodings` for export(): artifacts have no hybrid or ELL kernel
    yet, so such a weight is exported as CSR of the same pruned weight (the
    same results; CSR's speed), with a log line."""
    out = {}
    for name, encoding in encodings.items():
        if isinstance(encoding, (Hybrid, ELL)):
            log.info("export(): %s (%s) is stored as csr in the artifact (no hybrid or ell kernel there yet)", name,
                     encoding.format_name)
            encoding = CSR(sparsifier=encoding.effective_sparsifier)
        out[name] = encoding
    return out
