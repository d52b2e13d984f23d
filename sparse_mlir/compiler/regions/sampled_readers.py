"""The captured graph's readers of an encoded CSR input `mask` that run
sparse: sparse attention and SDDMM (inputs.py calls `rewrite` before it
densifies the input's other readers). What each pattern computes, and
how, is attention.py's and sddmm.py's.

    softmax(masked_fill(scale(q @ k^T), mask == 0, -inf), -1) @ v
    F.scaled_dot_product_attention(q, k, v, attn_mask=mask.bool() / mask != 0)
        -> sparse_mlir_attention (attention.py)
    (a @ b) * mask, mask * (a @ b), torch.mul (b may be x.transpose(-1, -2))
        -> sparse_mlir_sddmm; its `result @ v` -> SpMM; other readers -> made dense (sddmm.py)

A pattern whose intermediates have other readers is left to torch (the
fallback warning names the op).
"""

from __future__ import annotations

import logging
import math
from typing import Any, Callable

import torch

from sparse_mlir.compiler.regions import sddmm
from sparse_mlir.compiler.regions.attention import AttentionRegion, sparse_mlir_attention
from sparse_mlir.compiler.regions.kernels import KernelOptions

log = logging.getLogger("sparse_mlir.compiler.regions")

aten = torch.ops.aten
_MATMULS = {aten.matmul.default, aten.mm.default, aten.bmm.default}
_MUL = {aten.mul.Tensor, aten.mul.Scalar}
_DIV = {aten.div.Tensor, aten.div.Scalar}
_SOFTMAX = {aten.softmax.int, aten._softmax.default}


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
