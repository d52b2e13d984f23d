"""SDDMM in a model: `(a @ b) * mask` for an encoded CSR input `mask`
computes the product only at the mask's stored positions, on the
`smlir.sampled_matmul` kernel (sampled.py, `scaled`: each sum times the
mask's value). a is [..., M, K] row-major; b is [..., K, N] or, for
`a @ b.transpose(-1, -2)` (attention's q k^T), b^T [..., N, K] read as
stored (`rhs <transposed>`: rows of k). One kernel per (M, N) and form
serves every nnz and every K (both are runtime sizes); batch dims share
one mask (multi-head attention): a loop of sampled-kernel calls, or one
row-kernel call over every batch entry. Where b is
read by rows, row_kernels.py's SDDMM (no packing of b: faster at small K
and low density) is the other candidate: with the cost model the first
call of a shape times both and keeps the faster; without it, the row kernel.

The result is the mask's pattern with new values: `values [..., nnz]`
beside the mask's positions / coordinates (`to_csr` builds the torch
sparse_csr tensor). A sparse-aware reader keeps it sparse (`result @ v`:
SpMM on the input's SpMMRegion, per batch entry); any other reader gets it
made dense once per call (logged at compile time).

The row kernel writes into a values tensor torch allocates (its pointer
passed; runtime/sddmm_call.py). A call of the op like the last checked one
(the same packed mask object, which inputs.py hands back for the same
unchanged mask; contiguous f32 CPU a and b of the same shapes; the same
thread count) goes straight to that kernel (`repeat`): a few us of Python
on a ~20 us call at S = 1024, 1% density. Any other call takes the full
path, checks included, and becomes the last one.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from sparse_mlir.encodings import CSR
from sparse_mlir.errors import SpecError
from sparse_mlir.runtime.memref import Kernel
from sparse_mlir.runtime.sddmm_call import SDDMMRowKernel
from sparse_mlir.runtime.ops import REGIONS, _traced, packed_for
from sparse_mlir.runtime.threads import shares_torch_threads, single_threaded
from sparse_mlir.compiler.regions.kernels import KernelOptions
from sparse_mlir.compiler.regions.row_kernels import ROW_KERNELS, RowSignature
from sparse_mlir.compiler.regions.row_kernels import bind as bind_rows
from sparse_mlir.compiler.regions.sampled import SAMPLED_KERNELS, SampledSignature

log = logging.getLogger("sparse_mlir.compiler.regions")


def supported(encoding: Any) -> bool:
    """Masks the sampled kernel reads: CSR (COO / BSR masks keep torch's dense product)."""
    return isinstance(encoding, CSR)


class SDDMMRegion:
    """values = (a @ b')[mask's stored positions] (times the mask's values
    where `scaled`), for an encoded input `mask` [M, N]; b' = b, or b^T
    where `b_transposed` (b passed as [N, K])."""

    def __init__(self, spmm: Any, options: KernelOptions, b_transposed: bool, scaled: bool,
                 cost_model: bool = True) -> None:
        self.spmm = spmm              # the input's SpMMRegion (result @ v)
        self.input = spmm.input
        self.name = spmm.name
        self.encoding = spmm.encoding
        self.b_transposed = b_transposed
        self.scaled = scaled
        self.op_name = "(a @ b^T) * mask" if b_transposed else "(a @ b) * mask"
        self._options = options
        self._cost_model = cost_model
        self._lock = threading.Lock()
        self._kernels: dict[tuple[str, int, int, int], Kernel] = {}
        # (rows, cols, K, threads) -> (kernel, why): b read by rows has two.
        self.choices: dict[tuple[int, int, int, int], tuple[str, str]] = {}
        self.compile_seconds = 0.0
        # The op's last row-kernel call (sparse_mlir_sddmm), after its checks
        # passed: a call like it (the same packed mask, a and b alike) goes
        # straight to the kernel (`repeat`).
        self._last: _LastCall | None = None
        self.plan_applied = (f"every call: validated in O(nnz); {self.op_name} runs the sampled product at its "
                             "stored positions only (smlir.sampled_matmul, or the row kernel where b is read by "
                             "rows and timed faster): one kernel per mask shape, any nnz")

    @property
    def compiles(self) -> int:
        """Kernels this region built (the sampled product's: one per mask
        shape; the row kernel's: one per mask shape and K)."""
        return len(self._kernels)

    def _error(self, what: str) -> SpecError:
        return SpecError(f"input {self.name!r} ({self.encoding.format_name}): {self.op_name}: {what}")

    def kernel(self, rows: int, cols: int, which: str = "sampled", inner: int = 0) -> Kernel:
        """`which`: "sampled" (smlir.sampled_matmul, any K) or "rows"
        (row_kernels.py, K = `inner` static; b read by rows)."""
        key = (which, rows, cols, inner if which == "rows" else 0)
        kernel = self._kernels.get(key)
        if kernel is None:
            with self._lock:
                if key not in self._kernels:
                    if which == "rows":
                        lanes = self._options.vector_lanes or 0   # (0: the host's)
                        lanes = lanes if lanes >= 2 and lanes & (lanes - 1) == 0 else 0
                        signature = RowSignature("sddmm", rows, cols, inner, scaled=self.scaled,
                                                 encoding=self.encoding.attr_text(), lanes=lanes,
                                                 group=min(8, lanes or 8))
                        compiled = ROW_KERNELS.get(signature, self.encoding, self._options)
                        self._kernels[key] = bind_rows(compiled)
                    else:
                        signature = SampledSignature(rows, cols, self.encoding.attr_text(), "identity",
                                                     "transposed" if self.b_transposed else "identity",
                                                     self.scaled)
                        compiled = SAMPLED_KERNELS.get(signature, self.encoding, self._options)
                        self._kernels[key] = Kernel(compiled.function, [], 1, np.float32, owner=compiled)
                    self.compile_seconds += compiled.seconds
                kernel = self._kernels[key]
        return kernel

    def _choose(self, buffers: Sequence[torch.Tensor], shape: tuple[int, int], a: torch.Tensor,
                b: torch.Tensor) -> str:
        """Which kernel runs b read by rows: with the cost model, the faster
        of the two on the first call of a shape (and thread count)."""
        if not self._cost_model:
            return "rows"
        key = (*shape, a.shape[-1], torch.get_num_threads())
        choice = self.choices.get(key)
        if choice is None:
            from sparse_mlir.compiler.regions.base import _timed_pair
            pattern = [t.detach().numpy() for t in buffers]
            kernels = {which: self.kernel(*shape, which, a.shape[-1]) for which in ("rows", "sampled")}
            arrays = pattern + [a[0].numpy(), b[0].numpy()]
            rows_ms, sampled_ms = _timed_pair(lambda: kernels["rows"](buffers, a[:1], b[:1]),
                                              lambda: kernels["sampled"](arrays), 0.0)
            which = "rows" if rows_ms <= sampled_ms else "sampled"
            choice = self.choices[key] = (which, f"{which} (row kernel {rows_ms:.3f} ms, smlir.sampled_matmul "
                                                 f"{sampled_ms:.3f} ms, nnz {pattern[-1].size} at the first call)")
            log.info("input %r, %s %s, K %d: %s", self.name, self.op_name, shape, a.shape[-1], choice[1])
        return choice[0]

    def check(self, shape: tuple[int, int], a: torch.Tensor, b: torch.Tensor) -> None:
        """a [..., M, K] and b [..., K, N] (b^T [..., N, K]) against the mask [M, N]."""
        rows, cols = shape
        for what, t in (("a", a), ("b", b)):
            if t.dtype != torch.float32:
                raise self._error(f"runs on float32 operands, got {what} of {t.dtype}")
            if t.device.type != "cpu":
                raise self._error(f"runs on CPU operands, got {what} on {t.device}")
            if t.dim() < 2 or t.layout != torch.strided:
                raise self._error(f"{what} must be a dense matrix or batch of matrices, got shape "
                                  f"{tuple(t.shape)} ({t.layout})")
        b_rows, b_inner = (b.shape[-1], b.shape[-2]) if not self.b_transposed else (b.shape[-2], b.shape[-1])
        if a.shape[-2] != rows or b_rows != cols or a.shape[-1] != b_inner or a.shape[:-2] != b.shape[:-2]:
            wanted = f"[..., {cols}, K]" if self.b_transposed else f"[..., K, {cols}]"
            raise self._error(f"the mask has shape {shape}: expected a [..., {rows}, K] and b {wanted} with the "
                              f"same batch dims, got a {tuple(a.shape)} and b {tuple(b.shape)}")

    def remember(self, packed: Any, a: torch.Tensor, b: torch.Tensor) -> None:
        """Keeps this checked call for `repeat`, where it ran the row kernel
        on a and b as passed (contiguous; the mask not empty)."""
        rows, cols = packed.shape
        dim, nnz = a.shape[-1], packed.buffers[-1].numel()
        threads = torch.get_num_threads()
        if (not self.b_transposed or nnz == 0 or dim == 0 or not (a.is_contiguous() and b.is_contiguous())
                or (self._cost_model and self.choices.get((rows, cols, dim, threads), ("",))[0] != "rows")):
            return
        batch = a.shape[:-2].numel()
        self._last = _LastCall(packed, a.shape, b.shape, threads, threads > 1 and not shares_torch_threads(),
                               self.kernel(rows, cols, "rows", dim), (*a.shape[:-2], nnz), batch, nnz)

    def repeat(self, packed: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor | None:
        """values for a call like the last one `remember`ed (the same packed
        mask, contiguous f32 CPU a and b of the same shapes, the same thread
        count: every check it passed holds), on its kernel; None for any
        other call (the full path)."""
        last = self._last
        if (last is None or last.packed is not packed or a.shape != last.a_shape or b.shape != last.b_shape
                or a.dtype != torch.float32 or b.dtype != torch.float32 or not (a.is_cpu and b.is_cpu)
                or a.layout != torch.strided or b.layout != torch.strided
                or not (a.is_contiguous() and b.is_contiguous()) or torch.get_num_threads() != last.threads):
            return None
        out = torch.empty(last.out_shape, dtype=torch.float32)
        if last.single:
            with single_threaded():   # (two OpenMP runtimes on shared cores: see Region._call)
                last.kernel.run(last.packed.buffers, a.data_ptr(), b.data_ptr(), out.data_ptr(), last.batch, last.nnz)
        else:
            last.kernel.run(last.packed.buffers, a.data_ptr(), b.data_ptr(), out.data_ptr(), last.batch, last.nnz)
        return out

    def values(self, buffers: Sequence[torch.Tensor], shape: tuple[int, int], a: torch.Tensor,
               b: torch.Tensor) -> torch.Tensor:
        """The sampled product's values [..., nnz] (the mask's pattern)."""
        rows, cols = shape
        batch = a.shape[:-2]
        a3 = a.detach().reshape(-1, *a.shape[-2:]).contiguous()
        b3 = b.detach().reshape(-1, *b.shape[-2:]).contiguous()
        nnz = buffers[-1].numel()
        if nnz == 0 or a3.shape[-1] == 0:
            return a3.new_zeros((*batch, nnz))

        def run() -> torch.Tensor:
            which = self._choose(buffers, shape, a3, b3) if self.b_transposed else "sampled"
            kernel = self.kernel(rows, cols, which, a3.shape[-1])
            if which == "rows":   # every batch entry in one call, into a tensor of ours
                return kernel(buffers, a3, b3)
            pattern = [t.detach().numpy() for t in buffers]
            if a3.shape[0] == 1:   # (one batch entry: the kernel's buffer, no copy)
                return torch.from_numpy(kernel(pattern + [a3[0].numpy(), b3[0].numpy()])).unsqueeze(0)
            out = torch.empty(a3.shape[0], nnz, dtype=torch.float32)
            for i in range(a3.shape[0]):
                out[i] = torch.from_numpy(kernel(pattern + [a3[i].numpy(), b3[i].numpy()]))
            return out

        if torch.get_num_threads() > 1 and not shares_torch_threads():
            with single_threaded():   # (two OpenMP runtimes on shared cores: see Region._call)
                out = run()
        else:
            out = run()
        return out.reshape(*batch, nnz)

    def backward(self, g: torch.Tensor, a: torch.Tensor, b: torch.Tensor, buffers: Sequence[torch.Tensor],
                 shape: tuple[int, int], needs: Sequence[bool]) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(da, db) for d values `g` [..., nnz]: G = the pattern with values
        g (times the mask's where scaled); da = G b'^T, db' = a^T G (torch's
        CSR matmuls, O(nnz K) each; no dense [M, N])."""
        pos, crd, mask_values = buffers
        g3 = g.reshape(-1, g.shape[-1])
        if self.scaled:
            g3 = g3 * mask_values
        a3, b3 = a.reshape(-1, *a.shape[-2:]), b.reshape(-1, *b.shape[-2:])
        da, db = [], []
        for i in range(g3.shape[0]):
            grad = torch.sparse_csr_tensor(pos, crd, g3[i].contiguous(), shape, check_invariants=False)
            bt = b3[i] if self.b_transposed else b3[i].t()       # b'^T [N, K]
            if needs[0]:
                da.append(grad @ bt)
            if needs[1]:
                gta = grad.t() @ a3[i]                            # (a^T G)^T = G^T a [N, K]
                db.append(gta if self.b_transposed else gta.t())
        return (torch.stack(da).reshape(a.shape) if needs[0] else None,
                torch.stack(db).reshape(b.shape) if needs[1] else None)


@torch.library.custom_op("sparse_mlir::sddmm", mutates_args=())
def sddmm(a: torch.Tensor, b: torch.Tensor, buffers: list[torch.Tensor], rows: int, cols: int,
          region: int) -> torch.Tensor:
    """values [..., nnz] of (a @ b') sampled at the pattern in `buffers`
    (pos / crd / values of a validated CSR input), by region `region`."""
    return REGIONS.get(region).values(buffers, (rows, cols), a, b)


@sddmm.register_fake
def _(a: torch.Tensor, b: torch.Tensor, buffers: list[torch.Tensor], rows: int, cols: int,
      region: int) -> torch.Tensor:
    return a.new_empty((*a.shape[:-2], buffers[-1].shape[0]))


def _save_sddmm(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    a, b, buffers, rows, cols, region = inputs
    ctx.region, ctx.shape, ctx.count = region, (rows, cols), len(buffers)
    ctx.save_for_backward(a, b, *buffers)


def _sddmm_backward(ctx: Any, g: torch.Tensor) -> tuple:
    a, b, *buffers = ctx.saved_tensors
    needs = [bool(ctx.needs_input_grad[0]), bool(ctx.needs_input_grad[1])]
    da, db = REGIONS.get(ctx.region).backward(g, a, b, buffers, ctx.shape, needs)
    return da, db, [None] * ctx.count, None, None, None


torch.library.register_autograd("sparse_mlir::sddmm", _sddmm_backward, setup_context=_save_sddmm)


@dataclass(frozen=True)
class _LastCall:
    """A checked call of the op that ran the row kernel (SDDMMRegion.remember)."""

    packed: Any                 # inputs.Packed: the mask's validated buffers (held: their memory stays theirs)
    a_shape: torch.Size
    b_shape: torch.Size
    threads: int
    single: bool                # run single-threaded (two OpenMP runtimes)
    kernel: SDDMMRowKernel
    out_shape: tuple[int, ...]  # values [..., nnz]
    batch: int
    nnz: int


def _packed(region: SDDMMRegion, mask: torch.Tensor) -> Any:
    packed = packed_for(region.input, mask)
    return packed


def sparse_mlir_sddmm(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor, region: int) -> torch.Tensor:
    """(a @ b) * mask in a captured graph: the mask validated and packed (once
    per call of the module), then the sampled kernel; values [..., nnz]."""
    sddmm_region: SDDMMRegion = REGIONS.get(region)
    packed = _packed(sddmm_region, mask)
    if type(a) is torch.Tensor and not (a.requires_grad or b.requires_grad) and not _traced(b):
        values = sddmm_region.repeat(packed, a, b)   # (a call like the last: its checks hold)
        if values is not None:
            return values
    sddmm_region.check(packed.shape, a, b)
    buffers = list(packed.buffers)
    rows, cols = packed.shape
    if _traced(a) or (torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)):
        return torch.ops.sparse_mlir.sddmm(a, b, buffers, rows, cols, region)
    values = sddmm_region.values(packed.buffers, packed.shape, a, b)
    sddmm_region.remember(packed, a, b)
    return values


def flat_positions(buffers: Sequence[torch.Tensor], shape: tuple[int, int]) -> torch.Tensor:
    """row * N + column of each stored entry (int64)."""
    pos, crd = buffers[0], buffers[1]
    rows, cols = shape
    row = torch.repeat_interleave(torch.arange(rows), torch.diff(pos.to(torch.int64)))
    return row * cols + crd.to(torch.int64)


def sparse_mlir_sddmm_dense(values: torch.Tensor, mask: torch.Tensor, region: int) -> torch.Tensor:
    """The SDDMM's result read densely: [..., M, N], zero off the pattern."""
    sddmm_region: SDDMMRegion = REGIONS.get(region)
    packed = _packed(sddmm_region, mask)
    rows, cols = packed.shape
    dense = values.new_zeros((*values.shape[:-1], rows * cols))
    dense.index_copy_(-1, flat_positions(packed.buffers, packed.shape), values)
    return dense.reshape(*values.shape[:-1], rows, cols)


def spmm_values(region: SDDMMRegion | Any, pos: torch.Tensor, crd: torch.Tensor, values: torch.Tensor,
                rows: int, v: torch.Tensor) -> torch.Tensor:
    """P @ v for P the pattern (pos, crd) with values [..., nnz] and v
    [..., N, F] (batch dims as the values', or none): the input's SpMM
    region per batch entry (our kernel or torch.sparse, its cost model's
    choice)."""
    spmm = region.spmm
    batch = values.shape[:-1]
    values2 = values.reshape(batch.numel(), values.shape[-1])
    v3 = v.reshape(-1, *v.shape[-2:])
    outs = []
    for i in range(values2.shape[0]):
        outs.append(spmm([pos, crd, values2[i].contiguous()], rows, v3[i if v3.shape[0] > 1 else 0]))
    return torch.stack(outs).reshape(*batch, rows, v.shape[-1])


def sparse_mlir_sddmm_spmm(values: torch.Tensor, mask: torch.Tensor, v: torch.Tensor, region: int) -> torch.Tensor:
    """result @ v for the SDDMM's result (kept sparse): SpMM per batch entry."""
    sddmm_region: SDDMMRegion = REGIONS.get(region)
    packed = _packed(sddmm_region, mask)
    rows, cols = packed.shape
    if v.dim() < 2 or v.shape[-2] != cols or (v.dim() > 2 and v.shape[:-2] != values.shape[:-1]):
        raise sddmm_region._error(f"the result [..., {rows}, {cols}] @ v needs v [..., {cols}, F] with the "
                                  f"result's batch dims {tuple(values.shape[:-1])}, got {tuple(v.shape)}")
    if v.dtype != torch.float32:
        raise sddmm_region._error(f"the result @ v runs on float32 v, got {v.dtype}")
    pos, crd = packed.buffers[0], packed.buffers[1]
    return spmm_values(sddmm_region, pos, crd, values, rows, v.detach())


def to_csr(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The torch sparse_csr tensor of the mask's pattern with `values`
    ([nnz], or [B, nnz]: a batched CSR tensor sharing the pattern)."""
    crow, col = mask.crow_indices(), mask.col_indices()
    if values.dim() > 1:
        batch = values.shape[:-1]
        crow = crow.expand(*batch, crow.numel())
        col = col.expand(*batch, col.numel())
    return torch.sparse_csr_tensor(crow, col, values, (*values.shape[:-1], *mask.shape), check_invariants=False)
