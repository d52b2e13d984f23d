"""A sparse weight read by F.linear (or x @ W), as a region: our kernel or torch's, per token count."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from sparse_mlir.encodings import CSR, NM, Encoding
from sparse_mlir.errors import SpecError
from sparse_mlir.runtime.memref import Kernel
from sparse_mlir.runtime.threads import shares_torch_threads, single_threaded
from sparse_mlir.compiler.regions.base import Choice, PieceKernels, Region, SampledChoice
from sparse_mlir.compiler.regions.kernels import KernelOptions
from sparse_mlir.compiler.regions.reprune import fast_nm, nm_sizes, prune_and_pack, prune_nm_into
from sparse_mlir.compiler.weights import pack, stored_coordinates

__all__ = ["Choice", "LinearRegion", "SampledChoice"]


class LinearRegion(Region):
    """y = x W^T (+ bias) for one encoded weight W (all F.linears reading it),
    x of any leading dims: the kernel runs on x flattened to [tokens, K]."""

    op_name = "F.linear"
    half_kernels = True

    def __init__(self, name: str, encoding: Encoding, effective: torch.Tensor, packed: Sequence[np.ndarray],
                 bias: bool, options: KernelOptions, cost_model: bool) -> None:
        super().__init__(name, encoding, effective, effective, packed, bias, options, cost_model)
        self._transposed: tuple[LinearRegion, torch.Tensor] | None = None   # dx's region, made on first use
        # Set for a weight pruned again each training step (MaskUpdate(every=1)): dx then runs on
        # torch (a W^T region would be rebuilt every step).
        self.prunes_every_step = False
        self.synced_from = 0   # (dx's region) the version of the values it last gathered its own from
        # (dx's region) Its dense W2^T is a view of the weight's own W2, which
        # the weight's sync keeps current: writing it again costs a scatter.
        self.dense_is_a_view = False
        # (accumulating parts of a wider weight) y's column of each of W's rows
        self.output_columns: np.ndarray | None = None

    def _check(self, x: torch.Tensor) -> None:
        if x.dim() == 0 or x.shape[-1] != self.signature.in_features:
            raise SpecError(f"{self.name} ({self.encoding.format_name}, [{self.signature.out_features}, "
                            f"{self.signature.in_features}]): {self.op_name} expects inputs whose last dim is "
                            f"{self.signature.in_features}, got shape {tuple(x.shape)}")

    def _tokens(self, x: torch.Tensor) -> int:
        return x.numel() // self.signature.in_features

    def _ours(self, kernel: PieceKernels, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        y = self._linear(kernel, x.reshape(-1, self.signature.in_features), bias)
        return y.reshape(*x.shape[:-1], self.signature.out_features)

    def accumulate_into(self, kernels: PieceKernels, columns: torch.Tensor, y: torch.Tensor) -> None:
        """y[T, N'] += x[T, K] W^T in place, for a region whose kernels
        accumulate (signature.accumulate: a composable format's second
        part): W's row n into y's column output_columns[n] where the region
        holds some rows of a wider weight. A piece padded to its kernel's
        size accumulates into a padded copy of its rows of y."""
        columns = columns.contiguous()
        assert self.signature.accumulate and y.is_contiguous() and y.dtype == torch.float32
        for piece in kernels.pieces:
            rows = columns[piece.start:piece.start + piece.rows]
            into = y[piece.start:piece.start + piece.rows]
            if piece.rows == piece.size:
                self._call_into(kernels.by_size[piece.size], rows, into)
                continue
            padded, padded_y = columns.new_zeros(piece.size, columns.shape[1]), y.new_zeros(piece.size, y.shape[1])
            padded[:piece.rows], padded_y[:piece.rows] = rows, into
            self._call_into(kernels.by_size[piece.size], padded, padded_y)
            into.copy_(padded_y[:piece.rows])

    def _call_into(self, kernel: Kernel, columns: torch.Tensor, y: torch.Tensor) -> None:
        """One accumulate-into kernel on contiguous x[T, K] and y[T, N']."""
        tokens, depth = columns.shape
        signature = [((tokens, depth), (depth, 1), np.dtype(np.float32)),
                     (tuple(y.shape), (y.shape[1], 1), np.dtype(np.float32))]
        addresses = [columns.data_ptr(), y.data_ptr()]
        if self.output_columns is not None:
            signature.append(((self.output_columns.size,), (1,), self.output_columns.dtype))
            addresses.append(self.output_columns.ctypes.data)
        if torch.get_num_threads() > 1 and not shares_torch_threads():
            with single_threaded():   # (as _call: our threads and torch's would slow each other)
                kernel.call_into(tuple(signature), addresses)
            return
        kernel.call_into(tuple(signature), addresses)

    def _torch(self, x: torch.Tensor, bias: torch.Tensor | None, weight: torch.Tensor | None = None) -> torch.Tensor:
        weight = self._weight if weight is None else weight
        return torch.nn.functional.linear(x, weight.to(x.dtype), bias.to(x.dtype) if bias is not None else None)

    def _gradients(self, dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None,
                   needs: Sequence[bool]) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        out_features, in_features = self.signature.out_features, self.signature.in_features
        dy2, x2 = dy.reshape(-1, out_features), x.reshape(-1, in_features).to(dy.dtype)
        dx = None
        if needs[0]:
            if weight is None and self.runs_dx_on_transpose(dy):
                dx = self._input_gradient(dy2)
            else:
                dx = dy2 @ (self._weight.to(dy.dtype) if weight is None else weight)
            dx = dx.reshape(x.shape).to(x.dtype)
        dvalues = self._sampled(dy2, x2) if needs[1] else None
        dbias = dy2.sum(0) if needs[2] else None
        return dx, dvalues, dbias

    def runs_dx_on_transpose(self, dy: torch.Tensor) -> bool:
        """dx of the own stored values runs on W2^T's region (f32, a fixed mask), not on torch's dense W2."""
        return dy.dtype == torch.float32 and not self.prunes_every_step

    def _store_dense(self, values: torch.Tensor) -> None:
        if not self.dense_is_a_view:
            super()._store_dense(values)

    def reprune(self, matrix: torch.Tensor) -> None:
        """Prunes the dense master W2 `matrix` [N, K] with the encoding's
        sparsifier and stores the result (MaskUpdate): in place where the
        buffers keep their sizes (the kernels stay bound), else the kernels
        are bound again on the next call."""
        if self._prune_in_place(matrix):
            return
        packed, pruned = prune_and_pack(self.encoding, matrix, self.name, scratch=True)
        with self._lock, torch.no_grad():
            if [(a.shape, a.dtype) for a in packed] == [(a.shape, a.dtype) for a in self._packed]:
                for old, new in zip(self._packed, packed):
                    np.copyto(old, new)
            else:
                self._packed = [np.array(a, order="C", copy=True) for a in packed]   # (packed may be scratch)
                tensors = [torch.from_numpy(a) for a in self._packed]
                self._indices = tensors[:-1]
                self.values.data = tensors[-1]
                self.choices = {}
                self.sampled_choices = {}   # bound to the buffers replaced
            self._matrix.copy_(pruned)
            self._repruned()

    def _prune_in_place(self, matrix: torch.Tensor) -> bool:
        """n:m magnitude pruning written straight into the stored buffers and
        the dense copy (no scratch, no copies), where the sizes fit."""
        encoding = self.encoding
        if not fast_nm(encoding) or matrix.dtype != torch.float32 or len(self._packed) != 2:
            return False
        assert isinstance(encoding, NM)
        coordinates, values = self._packed
        size = nm_sizes(matrix, encoding)
        if coordinates.size != size or values.size != size or not self._matrix.is_contiguous():
            return False
        with self._lock, torch.no_grad():
            prune_nm_into(matrix, encoding, coordinates, values, self._matrix)
            self._repruned()
        return True

    def _repruned(self) -> None:
        """After a pruning wrote the stored buffers and the dense copy: what follows them is made again."""
        self._coordinates = None   # made again when asked for
        self._synced = self.values._version
        self._transposed = None

    def transposed_region(self, name: str, encoding: Encoding, packed: Sequence[np.ndarray]) -> LinearRegion:
        """dx's region over W2^T stored as `packed`; its dense W2^T (torch's
        side) a view of this region's dense W2."""
        return LinearRegion(name, encoding, self._matrix.t(), packed, False, self._options, self._cost_model)

    def _input_gradient(self, dy: torch.Tensor) -> torch.Tensor:
        """dx = dy W2, as the linear dy (W2^T)^T: W2^T stored as CSR (its
        values gathered from the stored ones after each change), a region of
        its own, so the cost model picks our kernel or torch's per token count."""
        if self._transposed is None:
            self._transposed = _transposed_region(self)
            self._transposed[0].routing = self.routing   # an expert's dy has its routed count too
        region, order = self._transposed
        if region.synced_from != self.values._version:
            with torch.no_grad():   # (order's last index: a stored zero of W2^T's n:m padding)
                region.values.copy_(torch.cat([self.values.detach(), self.values.new_zeros(1)])[order])
            region.synced_from = self.values._version
        dx = region(dy, region.buffers, None)
        region.freeze()   # other token counts: bucket kernels, no compile per training shape
        return dx


def _transposed_region(region: LinearRegion) -> tuple[LinearRegion, torch.Tensor]:
    """The region reading W2^T [K, N] for `region`'s W2, and where each of
    its stored values is in `region`'s (its count: a zero). W2^T is stored
    as n:m where an n:m W2's pattern is transposable (at most n per group
    along its columns too: NMMagnitude(..., transposable=True)), else CSR."""
    rows, cols = region._rows.numpy(), region._cols.numpy()
    out_features, in_features = region.signature.out_features, region.signature.in_features
    values = region.values.detach().numpy()
    transposed = _transposed_nm(region)
    if transposed is not None:
        encoding, packed = transposed
        rows_t, cols_t = stored_coordinates(encoding, packed, (in_features, out_features))
        index = np.full(out_features * in_features, values.size, dtype=np.int64)
        index[rows * in_features + cols] = np.arange(values.size)
        order = index[cols_t * in_features + rows_t]   # W2^T[a, b] is W2[b, a]
        packed[-1] = np.append(values, np.float32(0))[order].astype(np.float32)
    else:
        order = np.lexsort((rows, cols))   # by column, then row: W2^T's rows
        positions = np.concatenate([[0], np.cumsum(np.bincount(cols, minlength=in_features))])
        encoding = CSR(pos_width=32 if positions[-1] < 2 ** 31 else 64)
        packed = [positions.astype(np.int64 if encoding.pos_width == 64 else np.int32),
                  rows[order].astype(np.int32), values[order].copy()]
    region_t = region.transposed_region(f"{region.name} (transposed, for dx)", encoding, packed)
    region_t.synced_from = region.values._version
    region_t.dense_is_a_view = True
    return region_t, torch.from_numpy(order)


def _transposed_nm(region: LinearRegion) -> tuple[NM, list[np.ndarray]] | None:
    """W2^T's layout as n:m, where its mask fits (the values are gathered by
    the caller). Packed from the mask, not the values: a stored value that is
    zero now (and may not be after a step) keeps its place in W2^T."""
    encoding = region.encoding
    if not isinstance(encoding, NM) or encoding.rows != 1 or region.signature.out_features % encoding.m:
        return None
    transposed = NM(encoding.n, encoding.m, crd_width=encoding.crd_width)
    mask = np.zeros((region.signature.in_features, region.signature.out_features), dtype=np.float32)
    mask[region._cols.numpy(), region._rows.numpy()] = 1.0
    try:
        return transposed, pack(transposed, mask, region.name)
    except SpecError:
        return None
