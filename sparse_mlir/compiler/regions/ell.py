"""A weight stored as `ELL(width=k)` alone or as `Hybrid(ELL(width=k), COO())`.

The ELL part runs the ELL micro-kernel (lib/Codegen/ELLWeight.cpp: rows
all k long, no positions read, a fixed trip count): its kernel is compiled
for `#smlir.ell<width = k>`, whose argument is the CSR its buffers also
are, so the region passes the implicit positions 0, k, 2k, ... made
explicit (N + 1 indices held by the region, not stored with the weight;
the kernel never reads them). The row-sorted COO remainder runs the CSR
kernel over its non-empty rows only, with positions counted from its rows,
accumulating into those columns of the ELL part's output in place (the
kernel's `into` / `columns`: no temporary, no index_add_). Both read
views of the one values buffer (ELL's N * k, then COO's), as Hybrid(BSR,
CSR) does (hybrid.py).

A padding entry (value 0 at a column its row does not use) is stored but is
not part of the weight's mask: its gradient is zeroed and a loaded weight's
value there dropped, so training keeps it 0 and the nonzero pattern is the
eager one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np
import torch

from sparse_mlir.encodings import COO, ELL, Encoding, Hybrid
from sparse_mlir.compiler.regions.hybrid import HybridLinearRegion
from sparse_mlir.compiler.regions.kernels import KernelOptions
from sparse_mlir.compiler.regions.linear import LinearRegion
from sparse_mlir.compiler.weights import coo_as_csr, ell_as_csr, hybrid_parts


def stores_ell(encoding: Encoding) -> bool:
    """ELL alone, or a Hybrid whose first part is ELL."""
    return isinstance(encoding, ELL) or isinstance(encoding, Hybrid) and isinstance(encoding.first, ELL)


class EllPartRegion(LinearRegion):
    """An ELL part: stored as its CSR form (what its kernel's argument is),
    its kernels compiled for `ell` (with its width), the ELL kernel."""

    def __init__(self, name: str, csr: Encoding, ell: ELL, dense: torch.Tensor, buffers: Sequence[np.ndarray],
                 bias: bool, options: KernelOptions) -> None:
        super().__init__(name, csr, dense, buffers, bias, options, cost_model=False)
        self._ell = ell
        self.signature = replace(self.signature, encoding=ell.attr_text())   # its kernels' cache key

    def kernel_encoding(self) -> Encoding:
        return self._ell


class EllLinearRegion(HybridLinearRegion):
    """y = x W^T (+ bias) with W in ELL (the ELL kernel) plus a COO remainder (the CSR kernel)."""

    def __init__(self, name: str, encoding: Encoding, effective: torch.Tensor, packed: Sequence[np.ndarray],
                 bias: bool, options: KernelOptions, cost_model: bool) -> None:
        super().__init__(name, encoding, effective, packed, bias, options, cost_model)   # type: ignore[arg-type]
        # Every stored nonzero is nonzero when packed: the zeros are ELL's padding.
        self._padding = torch.from_numpy(self._packed[-1] == 0)

    def _ell_and_rest(self) -> tuple[ELL, list[np.ndarray], COO | None, list[np.ndarray] | None]:
        encoding = self.encoding
        if isinstance(encoding, Hybrid):
            ell, rest = hybrid_parts(encoding, self._packed)
            assert isinstance(encoding.first, ELL) and isinstance(encoding.second, COO)
            return encoding.first, ell, encoding.second, rest
        assert isinstance(encoding, ELL)
        return encoding, list(self._packed), None, None

    def _part_buffers(self) -> list[tuple[str, Encoding, list[np.ndarray]]]:
        rows = self.signature.out_features
        ell, ell_buffers, coo, coo_buffers = self._ell_and_rest()
        parts: list[tuple[str, Encoding, list[np.ndarray]]] = [("ell", *ell_as_csr(ell, ell_buffers, rows))]
        if coo is not None and coo_buffers is not None:
            parts.append(("coo", *coo_as_csr(coo, coo_buffers, rows, self.name)))
        return parts

    def _part_region(self, name: str, encoding: Encoding, dense: torch.Tensor, buffers: list[np.ndarray],
                     bias: bool, accumulate: bool) -> LinearRegion:
        if name == "coo" and accumulate:
            return self._remainder_region(encoding, buffers)
        if name != "ell":   # (a remainder alone: the ELL part stores nothing)
            return super()._part_region(name, encoding, dense, buffers, bias, accumulate)
        ell = self._ell_and_rest()[0]
        width = buffers[1].size // max(1, self.signature.out_features)
        # (The weight is stored already: the kernel's encoding has no sparsifier of its own.)
        kernel = replace(ell, width=width, sparsifier=None, grad=None)
        return EllPartRegion(f"{self.name} (ell part)", encoding, kernel, dense, buffers, bias, self._options)

    def _remainder_region(self, csr: Encoding, buffers: list[np.ndarray]) -> LinearRegion:
        """The COO remainder on the CSR kernel over its non-empty rows only
        (a [rows with a remainder, K] weight whose kernel accumulates into
        those columns of y, smlir.linear's `into` with `columns`): the
        kernel pads each block of R rows to its longest, and a remainder's
        rows are mostly empty (the rows at most `width` long), a long one
        among them padded R-fold over all rows. A remainder in every row
        accumulates into y's own columns."""
        positions, columns, values = buffers
        rows = self.signature.out_features
        counts = np.diff(positions.astype(np.int64))
        kept = np.flatnonzero(counts)
        compact = np.concatenate([[0], np.cumsum(counts[kept])]).astype(positions.dtype)
        dense = torch.zeros(1, dtype=torch.float32).expand(kept.size, self.signature.in_features)
        part = LinearRegion(f"{self.name} (coo part)", csr, dense, [compact, columns, values], False, self._options,
                            cost_model=False)
        compacted = kept.size < rows
        part.signature = replace(part.signature, accumulate=True, y_columns=rows if compacted else 0)
        part.output_columns = np.ascontiguousarray(kept, dtype=np.int64) if compacted else None
        return part

    def split(self) -> str:
        """What each part stores, for sparsity_plan()."""
        rows = self.signature.out_features
        _, ell_buffers, coo, coo_buffers = self._ell_and_rest()
        slots = ell_buffers[-1].size
        padding = int(self._padding[:slots].sum())
        in_ell = slots - padding
        in_coo = coo_buffers[-1].size if coo_buffers is not None else 0
        total = max(1, in_ell + in_coo)
        text = (f"ell width {slots // max(1, rows)}: {slots} entries ({in_ell} nonzero = "
                f"{100 * in_ell / total:.0f}% of nnz, {padding} padding)")
        if coo is not None:
            text += f", coo: {in_coo} nnz ({100 * in_coo / total:.0f}% of nnz); each row's first entries go to ell"
        return text

    def _gradients(self, dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None,
                   needs: Sequence[bool]) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        dx, dvalues, dbias = super()._gradients(dy, x, weight, needs)
        if dvalues is not None:
            dvalues = dvalues.masked_fill(self._padding, 0)
        return dx, dvalues, dbias

    def gather_values(self, matrix: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            kept = matrix[self._rows, self._cols].masked_fill(self._padding, 0)
            self.values.copy_(kept)
            return kept
