"""Sparse attention for an encoded CSR input `mask` (sampled_readers.py
finds it in the captured graph).

Sparse attention, written as eager torch computes its reference (with the
mask passed dense):

    scores = (q @ k.transpose(-1, -2)) * scale        # (or / scale, or no scale)
    scores = scores.masked_fill(mask == 0, float("-inf"))
    out = scores.softmax(-1) @ v

becomes one op: per batch entry (q, k, v [..., S, D], one mask [S, S]
shared by every batch entry and head), one fused pass per row of the mask
(row_kernels.py: the scores at the row's stored entries, their
softmax, the weighted sum of v rows; no score matrix is written, dense or
sparse). `attend_unfused` runs it as three ops for comparison: the
sampled product (sddmm.py), `row_softmax`, SpMM on the input's region.

A row with no stored entry gives a zero output row, as torch's SDPA does
with a boolean mask (the masked_fill spelling gives NaN in eager torch:
softmax of a row of -inf). The mask's stored positions are
the attended ones: its values are not read (a stored 0 still attends,
unlike `mask == 0` on the dense mask). `F.scaled_dot_product_attention(q,
k, v, attn_mask=mask.bool())` (or `mask != 0`; no dropout, not causal) is
the same op. The op is differentiable in q, k and v (its backward
recomputes P at the stored entries: `AttentionRegion.backward`); the
compiled module itself runs inference, as every captured graph does.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from sparse_mlir.runtime.ops import REGIONS, _traced, packed_for
from sparse_mlir.runtime.memref import Kernel
from sparse_mlir.runtime.threads import shares_torch_threads, single_threaded
from sparse_mlir.compiler.regions import sddmm
from sparse_mlir.compiler.regions.row_kernels import ROW_KERNELS, RowSignature, bind, run
from sparse_mlir.compiler.regions.kernels import KernelOptions


# The fused kernel keeps a row's scores in a stack buffer of `cols` floats
# (1 MiB here): longer rows take the three-op path.
MAX_FUSED_COLUMNS = 1 << 18


def row_softmax(scores: torch.Tensor, pos: torch.Tensor, rows: int) -> torch.Tensor:
    """softmax over each row's stored entries of scores [B, nnz] (the
    pattern's positions `pos`): max, exp, sum per row by scatter / gather on
    the entries' row numbers (rows with no entry are never read)."""
    counts = torch.diff(pos.to(torch.int64))
    row = torch.repeat_interleave(torch.arange(rows), counts).expand(scores.shape[0], -1)
    peak = scores.new_full((scores.shape[0], rows), -math.inf).scatter_reduce_(1, row, scores, "amax")
    e = (scores - peak.gather(1, row)).exp_()
    total = scores.new_zeros((scores.shape[0], rows)).scatter_add_(1, row, e)
    return e.div_(total.gather(1, row))


class AttentionRegion(sddmm.SDDMMRegion):
    """softmax((q @ k^T) * scale over the mask's stored entries) @ v."""

    def __init__(self, spmm: Any, options: KernelOptions, scale: float | None) -> None:
        super().__init__(spmm, options, b_transposed=True, scaled=False,
                         cost_model=getattr(spmm, "_cost_model", True))
        self.scale = scale   # None: SDPA's default, 1 / sqrt(D) at the call's head size
        self._fused: dict[tuple[int, int, int, int], Kernel] = {}
        self.op_name = "sparse attention softmax(q @ k^T * scale, masked) @ v"
        self.plan_applied = ("every call: validated in O(nnz); sparse attention: one fused pass per row of the "
                             "mask (scores at its stored entries, their softmax, the weighted sum of v rows; no "
                             "score matrix): one kernel per mask shape and head size, any nnz")

    @property
    def compiles(self) -> int:
        """Kernels this region built (one per mask shape and head size; the
        sampled product's only for `attend_unfused`)."""
        return len(self._fused) + len(self._kernels)

    def scale_for(self, head_dim: int) -> float:
        return self.scale if self.scale is not None else 1.0 / math.sqrt(head_dim)

    def fused_kernel(self, rows: int, cols: int, head_dim: int, value_dim: int) -> Kernel:
        key = (rows, cols, head_dim, value_dim)
        kernel = self._fused.get(key)
        if kernel is None:
            with self._lock:
                if key not in self._fused:
                    signature = RowSignature("attention", rows, cols, head_dim, value_dim,
                                             scale=self.scale_for(head_dim),
                                             encoding=self.encoding.attr_text())
                    compiled = ROW_KERNELS.get(signature, self.encoding, self._options)
                    self.compile_seconds += compiled.seconds
                    self._fused[key] = bind(compiled)
                kernel = self._fused[key]
        return kernel

    def _check_v(self, shape: tuple[int, int], q: torch.Tensor, v: torch.Tensor) -> None:
        cols = shape[1]
        if v.dtype != torch.float32 or v.shape[:-2] != q.shape[:-2] or v.shape[-2] != cols:
            raise self._error(f"the mask has shape {shape}: expected v [..., {cols}, F] (float32) with q's batch "
                              f"dims {tuple(q.shape[:-2])}, got {tuple(v.shape)} ({v.dtype})")

    def attend(self, buffers: list[torch.Tensor], shape: tuple[int, int], q: torch.Tensor, k: torch.Tensor,
               v: torch.Tensor) -> torch.Tensor:
        """The fused kernel (row_kernels.py) per batch entry: no score matrix."""
        rows, cols = shape
        self._check_v(shape, q, v)
        if buffers[-1].numel() == 0:   # every row empty: zeros (see the module's doc)
            return q.new_zeros((*q.shape[:-1], v.shape[-1]))
        if cols > MAX_FUSED_COLUMNS:
            return self.attend_unfused(buffers, shape, q, k, v)
        kernel = self.fused_kernel(rows, cols, q.shape[-1], v.shape[-1])
        q3, k3, v3 = (t.detach().reshape(-1, *t.shape[-2:]).contiguous() for t in (q, k, v))
        if torch.get_num_threads() > 1 and not shares_torch_threads():
            with single_threaded():   # (two OpenMP runtimes on shared cores: see Region._call)
                out = run(kernel, buffers, q3, k3, v3)
        else:
            out = run(kernel, buffers, q3, k3, v3)   # every head in one call
        return out.reshape(*q.shape[:-1], v.shape[-1])

    def probabilities(self, buffers: list[torch.Tensor], shape: tuple[int, int], q: torch.Tensor,
                      k: torch.Tensor) -> torch.Tensor:
        """P [B, nnz]: the softmax of each row's stored scores (the sampled product, then row_softmax)."""
        scores = self.values(buffers, shape, q, k)
        flat = scores.reshape(-1, scores.shape[-1])
        scale = self.scale_for(q.shape[-1])
        if scale != 1.0:
            flat.mul_(scale)
        return row_softmax(flat, buffers[0], shape[0])

    def backward(self, dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 buffers: list[torch.Tensor], shape: tuple[int, int]) -> tuple[torch.Tensor, ...]:
        """(dq, dk, dv) at the stored entries only (P recomputed, as
        FlashAttention's backward does): dv = P^T dout; dP = (dout v^T) at
        the pattern (the sampled product); dS = P (dP - rowsum(P dP));
        dq = scale dS k, dk = scale dS^T q (torch's CSR matmuls)."""
        rows, cols = shape
        pos, crd = buffers[0], buffers[1]
        batch = q.shape[:-2]
        q3, k3, v3 = (t.detach().reshape(-1, *t.shape[-2:]) for t in (q, k, v))
        d3 = dout.detach().reshape(-1, *dout.shape[-2:]).contiguous()
        if buffers[-1].numel() == 0:
            return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        p = self.probabilities(buffers, shape, q3, k3)                  # [B, nnz]
        dp = self.values(buffers, shape, d3, v3.contiguous()).reshape(p.shape)   # dout v^T at the pattern
        row = torch.repeat_interleave(torch.arange(rows), torch.diff(pos.to(torch.int64))).expand(p.shape[0], -1)
        inner = p.new_zeros((p.shape[0], rows)).scatter_add_(1, row, p * dp)
        ds = p * (dp - inner.gather(1, row)) * self.scale_for(q.shape[-1])
        dq, dk, dv = [], [], []
        for i in range(p.shape[0]):
            grad = torch.sparse_csr_tensor(pos, crd, ds[i].contiguous(), shape, check_invariants=False)
            probs = torch.sparse_csr_tensor(pos, crd, p[i].contiguous(), shape, check_invariants=False)
            dq.append(grad @ k3[i])
            dk.append(grad.t() @ q3[i])
            dv.append(probs.t() @ d3[i])
        return (torch.stack(dq).reshape(*batch, rows, q.shape[-1]), torch.stack(dk).reshape(k.shape),
                torch.stack(dv).reshape(v.shape))

    def attend_unfused(self, buffers: list[torch.Tensor], shape: tuple[int, int], q: torch.Tensor,
                       k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Three ops (for comparison): the sampled product's scores [.., nnz],
        row_softmax on them, then SpMM on the input's region."""
        rows, cols = shape
        self._check_v(shape, q, v)
        if buffers[-1].numel() == 0:
            return q.new_zeros((*q.shape[:-1], v.shape[-1]))
        p = self.probabilities(buffers, shape, q, k)
        return sddmm.spmm_values(self, buffers[0], buffers[1], p.reshape(*q.shape[:-2], p.shape[-1]), rows,
                                 v.detach())


@torch.library.custom_op("sparse_mlir::sparse_attention", mutates_args=())
def sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, buffers: list[torch.Tensor], rows: int,
                     cols: int, region: int) -> torch.Tensor:
    """softmax over the stored entries of (q k^T) * scale at the pattern in
    `buffers`, then @ v, by region `region` (its scale)."""
    return REGIONS.get(region).attend(buffers, (rows, cols), q, k, v)


@sparse_attention.register_fake
def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, buffers: list[torch.Tensor], rows: int, cols: int,
      region: int) -> torch.Tensor:
    return q.new_empty((*q.shape[:-1], v.shape[-1]))


def _save_attention(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    q, k, v, buffers, rows, cols, region = inputs
    ctx.region, ctx.shape, ctx.count = region, (rows, cols), len(buffers)
    ctx.save_for_backward(q, k, v, *buffers)


def _attention_backward(ctx: Any, dout: torch.Tensor) -> tuple:
    q, k, v, *buffers = ctx.saved_tensors
    dq, dk, dv = REGIONS.get(ctx.region).backward(dout, q, k, v, buffers, ctx.shape)
    return dq, dk, dv, [None] * ctx.count, None, None, None


torch.library.register_autograd("sparse_mlir::sparse_attention", _attention_backward,
                                setup_context=_save_attention)


def sparse_mlir_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                          region: int) -> torch.Tensor:
    """The attention op in a captured graph (the mask validated and packed
    once per call); through torch's dispatcher where autograd records it."""
    attention: AttentionRegion = REGIONS.get(region)
    packed = packed_for(attention.input, mask)
    attention.check(packed.shape, q, k)
    buffers = list(packed.buffers)
    rows, cols = packed.shape
    if _traced(q) or (torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))):
        return torch.ops.sparse_mlir.sparse_attention(q, k, v, buffers, rows, cols, region)
    return attention.attend(buffers, packed.shape, q, k, v)
