"""Sparse attention and SDDMM in a captured graph, for an encoded CSR input
`mask` (inputs.py calls `rewrite` before densifying the input's other readers).

Sparse attention, written as eager torch computes its reference (with the
mask passed dense):

    scores = (q @ k.transpose(-1, -2)) * scale        # (or / scale, or no scale)
    scores = scores.masked_fill(mask == 0, float("-inf"))
    out = scores.softmax(-1) @ v

becomes one op: per batch entry (q, k, v [..., S, D], one mask [S, S]
shared by every batch entry and head), one fused pass per row of the mask
(row_kernels.py: the scores at the row's stored entries, their
softmax, the weighted sum of v rows; no score matrix is written, dense or
sparse). `attend_unfused` runs it as three ops for comparison: the sampled
product (sddmm.py), `row_softmax`, SpMM on the input's region. A row with no stored entry gives a zero output row (eager
torch gives NaN: softmax of a row of -inf). The mask's stored positions are
the attended ones: its values are not read (a stored 0 still attends,
unlike `mask == 0` on the dense mask). `F.scaled_dot_product_attention(q,
k, v, attn_mask=mask.bool())` (or `mask != 0`; no dropout, not causal) is
the same op. The op is differentiable in q, k and v (its backward
recomputes P at the stored entries: `AttentionRegion.backward`); the
compiled module itself runs inference, as every captured graph does.

SDDMM: `(a @ b) * mask` / `mask * (a @ b)` / `torch.mul` (b may be
`x.transpose(-1, -2)`: read as stored) -> sddmm.py's op.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Callable

import torch

from sparse_mlir.errors import SpecError
from sparse_mlir.runtime.ops import REGIONS, _traced, packed_for
from sparse_mlir.runtime.memref import Kernel
from sparse_mlir.runtime.threads import shares_torch_threads, single_threaded
from sparse_mlir.compiler.regions import sddmm
from sparse_mlir.compiler.regions.row_kernels import ROW_KERNELS, RowSignature, bind, run
from sparse_mlir.compiler.regions.kernels import KernelOptions

log = logging.getLogger("sparse_mlir.compiler.regions")

aten = torch.ops.aten
_MATMULS = {aten.matmul.default, aten.mm.default, aten.bmm.default}
_MUL = {aten.mul.Tensor, aten.mul.Scalar}
_DIV = {aten.div.Tensor, aten.div.Scalar}
_SOFTMAX = {aten.softmax.int, aten._softmax.default}


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
        kernel = self.fused_kernel(rows, cols, q.shape[-1], v.shape[-1])
        q3, k3, v3 = (t.detach().reshape(-1, *t.shape[-2:]).contiguous() for t in (q, k, v))

        def each() -> list[torch.Tensor]:
            return [run(kernel, buffers, q3[i], k3[i], v3[i]) for i in range(q3.shape[0])]

        if torch.get_num_threads() > 1 and not shares_torch_threads():
            with single_threaded():   # (two OpenMP runtimes on shared cores: see Region._call)
                outs = each()
        else:
            outs = each()
        out = outs[0].unsqueeze(0) if len(outs) == 1 else torch.stack(outs)
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


# ---------------------------------------------------------------- graph rewrite

def _val(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _rank(node: Any) -> int | None:
    value = _val(node)
    return value.dim() if isinstance(value, torch.Tensor) else None


def _call(node: Any, targets: set) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in targets


def _only_user(node: torch.fx.Node, user: torch.fx.Node) -> bool:
    return list(node.users) == [user]


def _transposed_operand(node: Any) -> torch.fx.Node | None:
    """x where `node` is x.transpose(-1, -2) (of x's last two dims), or x.t()."""
    if _call(node, {aten.t.default}):
        return node.args[0]
    if _call(node, {aten.transpose.int}) and len(node.args) == 3:
        rank = _rank(node.args[0])
        if rank is None or rank < 2:
            return None
        dims = {d % rank for d in node.args[1:]}
        if dims == {rank - 2, rank - 1}:
            return node.args[0]
    return None


def _product(node: Any) -> tuple[torch.fx.Node, torch.fx.Node, bool] | None:
    """(a, b, b transposed) of a matmul node a @ b (b read as stored where it is a transpose)."""
    if not _call(node, _MATMULS) or len(node.args) != 2:
        return None
    a, b = node.args
    if (_rank(a) or 0) < 2 or (_rank(b) or 0) < 2 or _rank(a) != _rank(b):
        return None
    inner = _transposed_operand(b)
    if inner is not None and isinstance(inner, torch.fx.Node):
        return a, inner, True
    return a, b, False


def _scale(node: Any) -> tuple[Any, float] | None:
    """(x, s) for x * s or x / s with s a Python number, else (node, 1.0)."""
    if _call(node, _MUL | _DIV) and len(node.args) == 2 and isinstance(node.args[1], (int, float)):
        s = float(node.args[1])
        return node.args[0], (1.0 / s if node.target in _DIV else s)
    if _call(node, _MUL) and len(node.args) == 2 and isinstance(node.args[0], (int, float)):
        return node.args[1], float(node.args[0])
    return node, 1.0


def _is_mask_zero(node: Any, mask: torch.fx.Node) -> bool:
    return (_call(node, {aten.eq.Scalar}) and node.args[0] is mask and len(node.args) == 2
            and node.args[1] == 0)


def _is_mask_bool(node: Any, mask: torch.fx.Node) -> bool:
    """`mask.bool()` or `mask != 0`: True where the mask attends."""
    if not isinstance(node, torch.fx.Node) or not node.args or node.args[0] is not mask:
        return False
    if _call(node, {aten.to.dtype}) and len(node.args) >= 2 and node.args[1] == torch.bool:
        return True
    return _call(node, {aten.ne.Scalar}) and len(node.args) == 2 and node.args[1] == 0


def _sdpa(graph: torch.fx.Graph, mask: torch.fx.Node, boolean: torch.fx.Node, sdpa: torch.fx.Node,
          spmm_region: Any, options: KernelOptions, add_region: Callable[[Any], int],
          regions: dict[int, Any]) -> torch.fx.Node | None:
    """F.scaled_dot_product_attention(q, k, v, attn_mask=mask.bool()) -> sparse_mlir_attention
    (no dropout, not causal, no GQA; `scale` as given, else 1 / sqrt(D))."""
    if not _call(sdpa, {aten.scaled_dot_product_attention.default}):
        return None
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    given = dict(zip(names, sdpa.args)) | dict(sdpa.kwargs)
    if (given.get("attn_mask") is not boolean or given.get("dropout_p", 0.0) != 0.0 or given.get("is_causal", False)
            or given.get("enable_gqa", False)):
        return None
    q, k, v = given["query"], given["key"], given["value"]
    rank = _rank(q)
    if rank is None or rank < 2 or _rank(k) != rank or _rank(v) != rank:
        return None
    scale = given.get("scale")
    region = AttentionRegion(spmm_region, options, None if scale is None else float(scale))
    handle = add_region(region)
    regions[handle] = region
    with graph.inserting_before(sdpa):
        call = graph.call_function(sparse_mlir_attention, (q, k, v, mask, handle))
    call.meta.update(sdpa.meta)
    sdpa.replace_all_uses_with(call)
    graph.erase_node(sdpa)
    if not boolean.users:
        graph.erase_node(boolean)
    log.info("input %r: scaled_dot_product_attention with it as the boolean mask runs on its stored entries",
             region.name)
    return call


def _erase_chain(graph: torch.fx.Graph, nodes: list[torch.fx.Node]) -> None:
    for node in nodes:
        if not node.users:
            graph.erase_node(node)


def rewrite(graph: torch.fx.Graph, mask: torch.fx.Node, spmm_region: Any, options: KernelOptions,
            add_region: Callable[[Any], int]) -> tuple[dict[int, Any], set[torch.fx.Node]]:
    """Sparse attention and SDDMM reading input `mask` -> our ops. Returns
    the new regions by handle and the graph nodes that read the mask sparsely."""
    regions: dict[int, Any] = {}
    readers: set[torch.fx.Node] = set()
    if not sddmm.supported(spmm_region.encoding) or _rank(mask) != 2:
        return regions, readers
    for user in list(mask.users):
        if _is_mask_zero(user, mask):
            for fill in list(user.users):
                node = _attention(graph, mask, user, fill, spmm_region, options, add_region, regions)
                if node is not None:
                    readers.add(node)
    for user in list(mask.users):
        if _is_mask_bool(user, mask):
            for sdpa in list(user.users):
                node = _sdpa(graph, mask, user, sdpa, spmm_region, options, add_region, regions)
                if node is not None:
                    readers.add(node)
    for user in list(mask.users):
        # export's dtype / layout assertion before `mask.bool()`: made on the
        # dense stand-in (strided); the call's input is validated by inputs.py.
        if _call(user, {aten._assert_tensor_metadata.default}):
            graph.erase_node(user)
    for user in list(mask.users):
        if _call(user, _MUL) and len(user.args) == 2 and mask in user.args:
            node = _sddmm(graph, mask, user, spmm_region, options, add_region, regions)
            readers.update(node)
    return regions, readers


def _attention(graph: torch.fx.Graph, mask: torch.fx.Node, eq: torch.fx.Node, fill: torch.fx.Node,
               spmm_region: Any, options: KernelOptions, add_region: Callable[[Any], int],
               regions: dict[int, Any]) -> torch.fx.Node | None:
    """softmax(masked_fill(scale(q @ k^T), mask == 0, -inf), -1) @ v -> sparse_mlir_attention."""
    if not (_call(fill, {aten.masked_fill.Scalar}) and len(fill.args) == 3 and fill.args[1] is eq
            and fill.args[2] == -math.inf and len(fill.users) == 1):
        return None
    softmax = next(iter(fill.users))
    if not (_call(softmax, _SOFTMAX) and softmax.args[0] is fill and len(softmax.users) == 1):
        return None
    rank = _rank(fill)
    if rank is None or softmax.args[1] % rank != rank - 1 or (len(softmax.args) > 2 and softmax.args[2]):
        return None
    out = next(iter(softmax.users))
    if not (_call(out, _MATMULS) and out.args[0] is softmax and out.args[1] is not softmax
            and _rank(out.args[1]) == rank):
        return None
    scores, scale = _scale(fill.args[0])
    if scores is not fill.args[0] and not _only_user(fill.args[0], fill):
        return None
    product = _product(scores)
    if product is None or not _only_user(scores, fill.args[0] if scores is not fill.args[0] else fill):
        return None
    q, k, transposed = product
    if not transposed:
        return None   # q @ kt with kt already [D, S]: left to torch (not attention's layout)
    region = AttentionRegion(spmm_region, options, scale)
    handle = add_region(region)
    regions[handle] = region
    with graph.inserting_before(out):
        call = graph.call_function(sparse_mlir_attention, (q, k, out.args[1], mask, handle))
    call.meta.update(out.meta)
    out.replace_all_uses_with(call)
    chain = [out, softmax, fill]
    if fill.args[0] is not scores:
        chain.append(fill.args[0])
    chain.append(scores)
    if scores.args[1] is not k:
        chain.append(scores.args[1])   # the transpose of k
    _erase_chain(graph, chain)
    if not eq.users:
        graph.erase_node(eq)
    log.info("input %r: sparse attention (scale %g) runs on the mask's stored entries", region.name, scale)
    return call


def _sddmm(graph: torch.fx.Graph, mask: torch.fx.Node, mul: torch.fx.Node, spmm_region: Any,
           options: KernelOptions, add_region: Callable[[Any], int], regions: dict[int, Any]) -> list[torch.fx.Node]:
    """(a @ b) * mask -> values = sparse_mlir_sddmm; `values @ v` -> SpMM;
    other readers get it made dense once per call."""
    other = mul.args[1] if mul.args[0] is mask else mul.args[0]
    if other is mask or not _only_user(other, mul):
        return []
    product = _product(other)
    if product is None or _rank(other) != _rank(mul):
        return []
    a, b, transposed = product
    region = sddmm.SDDMMRegion(spmm_region, options, b_transposed=transposed, scaled=True,
                               cost_model=getattr(spmm_region, "_cost_model", True))
    handle = add_region(region)
    regions[handle] = region
    with graph.inserting_before(mul):
        values = graph.call_function(sddmm.sparse_mlir_sddmm, (a, b, mask, handle))
    created = [values]
    dense: torch.fx.Node | None = None
    dense_readers = []
    for reader in list(mul.users):
        if (_call(reader, _MATMULS) and reader.args[0] is mul and reader.args[1] is not mul
                and _rank(reader.args[1]) == _rank(mul)):
            with graph.inserting_before(reader):
                call = graph.call_function(sddmm.sparse_mlir_sddmm_spmm, (values, mask, reader.args[1], handle))
            call.meta.update(reader.meta)
            reader.replace_all_uses_with(call)
            graph.erase_node(reader)
            created.append(call)
            continue
        if dense is None:
            with graph.inserting_after(values):
                dense = graph.call_function(sddmm.sparse_mlir_sddmm_dense, (values, mask, handle))
            dense.meta.update(mul.meta)
            created.append(dense)
        reader.replace_input_with(mul, dense)
        dense_readers.append(reader.name if reader.op == "output" else str(reader.target))
    graph.erase_node(mul)
    graph.erase_node(other)   # (a transpose feeding it goes with the dead code)
    log.info("input %r: %s runs the sampled product at the mask's stored positions", region.name, region.op_name)
    if dense_readers:
        log.warning("input %r: the result of %s is read densely by %s: made dense once per call (zeros off the "
                    "mask's pattern)", region.name, region.op_name, ", ".join(dense_readers))
    return created
