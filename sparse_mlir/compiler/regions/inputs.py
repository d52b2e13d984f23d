"""Sparse model inputs (graphs): `encodings={"adj": CSR()}` names a forward
argument, a call passes a torch sparse tensor for it, and `adj @ h` runs on
our kernels.

Every format runs on the SpMM kernel (spmm_kernel.py: `smlir.spmm`, rows
of h in, rows of y out, one kernel per feature count for any graph and node
count: a new graph never compiles). CSR: the sparse tensor's own buffers
(crow_indices / col_indices / values) are the kernel's pos / crd / values
arguments, read in place; a copy is made only to convert an index dtype to
the encoding's widths (logged once per input). COO and BSR are converted to
CSR buffers (input_formats.py: COO's row positions in one pass over nnz,
BSR's blocks as rows of c entries), once per distinct graph.

The sparse input is validated in O(nnz) before any kernel reads it (index
dtype, lengths, monotone positions, sorted in-range coordinates), so bad
input is a SpecError naming the input and encoding, never an out-of-bounds
read. The O(nnz) part runs once per distinct index buffers and torch
version (the last CHECKED_MASKS of them): a graph or mask passed again
unchanged is not re-checked (a write through torch bumps the version; one
through numpy or a raw pointer does not: clone() after it, or `forget()`).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from sparse_mlir.encodings import BSR, COO, CSR, Encoding, KeepAll
from sparse_mlir.errors import SpecError
from sparse_mlir.runtime.check_csr import csr_problem
from sparse_mlir.compiler.regions.input_formats import COO_PROBLEMS, BsrToCSR, CooToCSR
from sparse_mlir.runtime.check_csr import COO_UNSORTED
from sparse_mlir.runtime.threads import shares_torch_threads, single_threaded
from sparse_mlir.compiler.regions.kernels import KernelOptions
from sparse_mlir.compiler.regions.spmm_kernel import SPMM_KERNELS, SpMMSignature
from sparse_mlir.runtime.spmm import SpMMKernel

log = logging.getLogger("sparse_mlir.compiler.regions")

INPUT_FORMATS = (CSR, COO, BSR)
_INDEX_TORCH = {32: torch.int32, 64: torch.int64}
CHECKED_MASKS = 4   # validated index buffers remembered per input


def input_path(name: str, positional: Sequence[str]) -> str:
    """An encodings key as the input path capture.py names: "args.0" is the
    forward's first positional parameter."""
    if name.startswith("args.") and name[5:].isdigit():
        index = int(name[5:])
        return positional[index] if index < len(positional) else f"args[{index}]"
    return name


def check_input_encoding(name: str, encoding: Encoding) -> None:
    """Refuses, at compile time, what no input kernel takes."""
    if not isinstance(encoding, INPUT_FORMATS):
        raise SpecError(f"input {name!r}: {encoding.format_name} is not an input format; inputs take CSR(), COO() "
                        "or BSR(block=...)")
    for field in ("pos_width", "crd_width"):
        if getattr(encoding, field) not in _INDEX_TORCH:
            raise SpecError(f"input {name!r} ({encoding.format_name}): {field}={getattr(encoding, field)}; "
                            f"torch sparse tensors hold int32 or int64 indices: use {field}=32 or 64")


@dataclass(frozen=True)
class Packed:
    """A validated sparse input: the kernel's buffers (in the sparse
    assembler's order) and the matrix shape."""

    buffers: tuple[torch.Tensor, ...]   # CSR pos, crd, values, whatever the input's format
    shape: tuple[int, int]
    copied: bool          # an index buffer was converted (not zero-copy; COO's positions are always built)


class SparseInput:
    """One encoded input: turns what a call passes for it into the kernel's buffers."""

    def __init__(self, name: str, encoding: Encoding) -> None:
        check_input_encoding(name, encoding)
        self.name = name
        self.encoding = encoding
        self._noted: set[str] = set()
        # The O(nnz) checks (positions monotone, coordinates sorted and in
        # range): RegionModule.check_sparse_inputs turns them off.
        self.check_entries = True
        # Index buffers whose entries passed the O(nnz) checks, by address,
        # version counter and sizes, the last CHECKED_MASKS of them: a call
        # passing the same buffers, unchanged by torch since (an in-place
        # write bumps the counter), skips the O(nnz) pass. Holding them
        # keeps their memory from being reused by another tensor at the
        # same address.
        self._checked: OrderedDict[tuple, tuple[torch.Tensor, torch.Tensor]] = OrderedDict()
        self._checked_lock = threading.Lock()
        # The last CSR / BSR tensor packed: (it, its version, checked, Packed).
        self._last: tuple[torch.Tensor, int, bool, Packed] | None = None
        pos_dtype, crd_dtype = _INDEX_TORCH[encoding.pos_width], _INDEX_TORCH[encoding.crd_width]
        self._coo = CooToCSR(pos_dtype, crd_dtype)
        self._bsr = BsrToCSR(tuple(encoding.block) if isinstance(encoding, BSR) else (1, 1), pos_dtype, crd_dtype)

    def forget(self) -> None:
        """Drops the validated / converted graphs: the next call checks (and
        converts) its input again, as for a graph never seen."""
        with self._checked_lock:
            self._checked.clear()
        self._last = None
        self._coo.forget()
        self._bsr.forget()

    def _error(self, what: str) -> SpecError:
        return SpecError(f"input {self.name!r} ({self.encoding.format_name}): {what}")

    def _note(self, key: str, message: str) -> None:
        if key not in self._noted:
            self._noted.add(key)
            log.warning("input %r (%s): %s", self.name, self.encoding.format_name, message)

    def pack(self, tensor: Any) -> Packed:
        """Validates `tensor` and returns the kernel's buffers for it."""
        last = self._last
        if (last is not None and last[0] is tensor and last[1] == tensor._version and not tensor.requires_grad
                and last[2] == self.check_entries):
            return last[3]   # the same tensor, unchanged since it was packed
        packed = self._pack(tensor)
        if (isinstance(tensor, torch.Tensor) and tensor.layout in (torch.sparse_csr, torch.sparse_bsr)
                and not tensor.is_inference()):   # (inference tensors keep no version counter)
            self._last = (tensor, tensor._version, self.check_entries, packed)
        return packed

    def _pack(self, tensor: Any) -> Packed:
        if not isinstance(tensor, torch.Tensor):
            raise self._error(f"expected a tensor, got {type(tensor).__name__}")
        if tensor.dim() != 2:
            raise self._error(f"expected a matrix (2 dims), got shape {tuple(tensor.shape)}")
        if tensor.device.type != "cpu":
            raise self._error(f"expected a CPU tensor, got one on {tensor.device}")
        if tensor.dtype != torch.float32:
            raise self._error(f"expected float32 values, got {tensor.dtype}")
        if tensor.requires_grad:
            raise self._error("its gradient is not computed (the gradient of a sparse input is not supported; "
                              "gradients flow to the dense operand): pass it without requires_grad")
        tensor = self._layout(tensor)
        if tensor.layout == torch.sparse_coo:
            return self._from_coo(tensor)
        if tensor.layout == torch.sparse_bsr:
            return self._from_bsr(tensor)
        return self._compressed(tensor, (1, 1))

    def _layout(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` in the encoding's torch layout (a dense tensor sparsified;
        a sparse_coo tensor also for CSR), or a SpecError for layouts that do not fit."""
        encoding = self.encoding
        want = {CSR: torch.sparse_csr, COO: torch.sparse_coo, BSR: torch.sparse_bsr}[type(encoding)]
        if tensor.layout == want:
            return tensor
        if tensor.layout == torch.strided:
            self._note("dense", "a dense tensor is sparsified and packed each call (O(rows x cols)); pass a torch "
                                f"{want} tensor to skip it")
            if not isinstance(encoding.effective_sparsifier, KeepAll):
                from sparse_mlir.compiler.weights import apply_sparsifier
                tensor = torch.from_numpy(apply_sparsifier(encoding.effective_sparsifier,
                                                           tensor.detach().contiguous().numpy(), self.name))
            if isinstance(encoding, BSR):
                rows, cols = tensor.shape
                r, c = encoding.block
                if rows % r or cols % c:
                    raise self._error(f"shape {tuple(tensor.shape)} is not a multiple of the block {(r, c)}")
                return tensor.to_sparse_bsr(tuple(encoding.block))
            return tensor.to_sparse() if want == torch.sparse_coo else tensor.to_sparse_csr()
        if tensor.layout == torch.sparse_coo and want == torch.sparse_csr:
            return tensor   # (its row positions are built as for a COO input)
        raise self._error(f"expected a torch {want} tensor (or a dense one, sparsified each call), got "
                          f"{tensor.layout}")

    def _index(self, index: torch.Tensor, field: str, what: str) -> tuple[torch.Tensor, bool]:
        """`index` as the encoding's index dtype (a copy only to convert it)."""
        if index.dtype not in (torch.int32, torch.int64):
            raise self._error(f"{what} must be int32 or int64, got {index.dtype}")
        want = _INDEX_TORCH[getattr(self.encoding, field)]
        if index.dtype == want and index.is_contiguous():
            return index, False
        self._note(f"{field}.{index.dtype}", f"{what} are {index.dtype}, the encoding's {field} is "
                                             f"{getattr(self.encoding, field)}: converted each call (a copy); "
                                             f"pass {want} indices (or set {field}) to read them in place")
        return index.to(want).contiguous(), True

    def _fits(self, largest: int, field: str, what: str) -> None:
        if largest >= 2 ** 31 and getattr(self.encoding, field) == 32:
            raise self._error(f"{what} {largest} does not fit {field}=32: use {field}=64")

    def _compressed(self, tensor: torch.Tensor, block: tuple[int, int]) -> Packed:
        rows, cols = tensor.shape
        r, c = block
        if rows % r or cols % c:
            raise self._error(f"shape {(rows, cols)} is not a multiple of the block {(r, c)}")
        outer, inner = rows // r, cols // c
        crow, col, values = tensor.crow_indices(), tensor.col_indices(), tensor.values()
        if crow.dim() != 1 or col.dim() != 1:
            raise self._error("batched sparse tensors are not supported: expected 1-D crow_indices / col_indices")
        nnz = col.numel()
        if crow.numel() != outer + 1:
            raise self._error(f"crow_indices has {crow.numel()} entries, expected {outer + 1} "
                              f"({'block rows' if r > 1 else 'rows'} + 1)")
        if values.shape[0] != nnz:
            raise self._error(f"col_indices has {nnz} entries but values {values.shape[0]}: nnz mismatch")
        self._fits(nnz, "pos_width", "nnz")
        self._fits(inner, "crd_width", "the column count")
        pos, copied_pos = self._index(crow, "pos_width", "crow_indices")
        crd, copied_crd = self._index(col, "crd_width", "col_indices")
        if self.check_entries:
            self._check_once(pos, crd, nnz, inner)
        values = values.contiguous()
        return Packed((pos, crd, values.reshape(-1)), (rows, cols), copied_pos or copied_crd)

    def _check_once(self, pos: torch.Tensor, crd: torch.Tensor, nnz: int, inner: int) -> None:
        """The O(nnz) check of compressed buffers, once per distinct buffers
        and version (see `_checked`; a converted copy is new each call)."""
        try:
            key = (pos.data_ptr(), pos._version, pos.numel(), pos.dtype, crd.data_ptr(), crd._version, nnz,
                   crd.dtype, inner)
        except RuntimeError:   # (inference tensors keep no version counter: checked every call)
            _check_compressed(self, pos, crd, nnz, inner)
            return
        with self._checked_lock:
            if key in self._checked:
                self._checked.move_to_end(key)
                return
        _check_compressed(self, pos, crd, nnz, inner)
        with self._checked_lock:
            self._checked[key] = (pos, crd)
            while len(self._checked) > CHECKED_MASKS:
                self._checked.popitem(last=False)

    def _from_coo(self, tensor: torch.Tensor) -> Packed:
        """A sparse_coo tensor as CSR buffers: its row indices as positions,
        checked in the same pass (always: the pass builds the positions). A
        tensor torch does not know to be coalesced whose entries are
        unsorted or repeated is coalesced first (duplicates summed, as
        torch does); one that claims to be coalesced is an error."""
        rows, cols = tensor.shape
        indices, values = tensor._indices(), tensor._values()
        if indices.dim() != 2 or indices.shape[0] != 2 or values.dim() != 1:
            raise self._error("expected a 2-D sparse_coo tensor of scalar values (no dense dims)")
        nnz = values.shape[0]
        if indices.shape[1] != nnz:
            raise self._error(f"indices hold {indices.shape[1]} entries but values {nnz}: nnz mismatch")
        if indices.dtype not in (torch.int32, torch.int64):
            raise self._error(f"indices must be int32 or int64, got {indices.dtype}")
        self._fits(nnz, "pos_width", "nnz")
        self._fits(cols, "crd_width", "the column count")
        status, pos, crd = self._coo(indices, (rows, cols))
        if status == COO_UNSORTED and not tensor.is_coalesced():
            self._note("coalesce", "an uncoalesced sparse_coo tensor (entries unsorted or repeated) is coalesced "
                                   "each call (a sort, O(nnz log nnz)); pass .coalesce()d tensors to skip it")
            return self._from_coo(tensor.coalesce())
        if status:
            found = COO_PROBLEMS.get(status, f"invalid (code {status})")
            raise self._error(f"{found} (expected 0 <= row < {rows}, 0 <= column < {cols}, entries sorted "
                              "row-major without duplicates: coalesce() it)")
        return Packed((pos, crd, values.contiguous()), (rows, cols), crd.dtype != indices.dtype)

    def _from_bsr(self, tensor: torch.Tensor) -> Packed:
        """A sparse_bsr tensor as CSR buffers: the block buffers are checked
        as a CSR of blocks, then each block is r rows of c entries (stored
        zeros inside a block included)."""
        block = tuple(self.encoding.block) if isinstance(self.encoding, BSR) else None
        if block is None or tuple(tensor.values().shape[1:]) != block:
            raise self._error(f"expected blocks of {block}, got a sparse_bsr tensor with blocks "
                              f"{tuple(tensor.values().shape[1:])}")
        blocks = self._compressed(tensor, block)
        r, c = block
        self._fits(blocks.buffers[1].numel() * r * c, "pos_width", "the stored entries (blocks x block size)")
        rows, cols = blocks.shape
        block_pos, block_crd = blocks.buffers[0], blocks.buffers[1]
        if block_pos.dtype != block_crd.dtype:
            block_pos = block_pos.to(block_crd.dtype)
        pos, crd, values = self._bsr(block_pos, block_crd, tensor.values())
        return Packed((pos, crd, values), (rows, cols), True)


def _check_compressed(owner: SparseInput, pos: torch.Tensor, crd: torch.Tensor, nnz: int, inner: int) -> None:
    """O(rows + nnz): positions start at 0, end at nnz and never decrease;
    coordinates in [0, inner), strictly increasing within each row (one
    pass in C; runtime/check_csr.py says what is wrong)."""
    problem = csr_problem(pos, crd, nnz, inner)
    if problem:
        raise owner._error(problem)


class SpMMRegion:
    """adj @ h for one encoded input `adj` [M, K] and a dense h [K, F]:
    the transpose-free SpMM kernel (`smlir.spmm`, spmm_kernel.py) on adj's
    CSR buffers (a COO or BSR input converted: input_formats.py), one per
    (F, index widths) for every graph and node count; y comes back row-major."""

    op_name = "adj @ h"

    def __init__(self, sparse_input: SparseInput, options: KernelOptions, cost_model: bool = True) -> None:
        self.input = sparse_input
        self.name = sparse_input.name
        self.encoding = sparse_input.encoding
        self._options = options
        self._cost_model = cost_model
        self._lock = threading.Lock()
        self._spmm: dict[int, SpMMKernel] = {}
        self.compile_seconds = 0.0
        # (rows, cols, features, threads) -> (ours: bool, why): with the cost
        # model, the first call of a shape times our kernel against torch.sparse.
        self.choices: dict[tuple[int, int, int, int], tuple[bool, str]] = {}

    @property
    def compiles(self) -> int:
        """Kernels this region built (one per feature count, any format)."""
        return len(self._spmm)

    @property
    def transpose_free(self) -> bool:
        """True: y comes back row-major (the SpMM kernel, every format)."""
        return True

    def spmm_kernel(self, features: int) -> SpMMKernel:
        """The CSR kernel for `features` (built on first use; any graph)."""
        kernel = self._spmm.get(features)
        if kernel is None:
            signature = SpMMSignature(features, self.encoding.pos_width, self.encoding.crd_width)
            compiled = SPMM_KERNELS.get(signature, self._options)
            with self._lock:
                if features not in self._spmm:
                    self.compile_seconds += compiled.seconds
                    self._spmm[features] = compiled.kernel
            kernel = self._spmm[features]
        return kernel

    def check(self, packed: Packed, h: torch.Tensor) -> None:
        if h.dim() != 2 or h.shape[0] != packed.shape[1]:
            raise SpecError(f"input {self.name!r} ({self.encoding.format_name}, shape {packed.shape}): {self.op_name} "
                            f"needs h of shape [{packed.shape[1]}, F], got {tuple(h.shape)}")
        if h.dtype != torch.float32:
            raise SpecError(f"input {self.name!r} ({self.encoding.format_name}): {self.op_name} runs on float32 h, "
                            f"got {h.dtype}")

    def __call__(self, buffers: Sequence[torch.Tensor], rows: int, h: torch.Tensor,
                 fake_strides: bool = False) -> torch.Tensor:
        """y [rows, F] = adj @ h for adj's validated `buffers`: our kernel,
        or torch.sparse where the cost model timed it faster at this shape."""
        cols, features = h.shape
        if self._cost_model and self._torch_side(buffers) is not None:
            key = (rows, cols, features, torch.get_num_threads())
            choice = self.choices.get(key)
            if choice is None:
                choice = self.choices[key] = self._decide(buffers, rows, h)
                log.info("input %r, adj @ h [%d, %d] x [%d, %d]: %s", self.name, rows, cols, cols, features, choice[1])
            y = self._torch(buffers, rows, h) if not choice[0] else self._ours(buffers, rows, h)
        else:
            y = self._ours(buffers, rows, h)
        # Through the dispatcher (torch.compile, autograd) the output has the
        # fake implementation's strides: row-major.
        return y.contiguous() if fake_strides else y

    def _torch_side(self, buffers: Sequence[torch.Tensor]) -> Any:
        """The torch sparse layout constructor torch.sparse runs on (None:
        index buffers of two dtypes, which torch's CSR cannot hold)."""
        return torch.sparse_csr_tensor if buffers[0].dtype == buffers[1].dtype else None

    def _torch(self, buffers: Sequence[torch.Tensor], rows: int, h: torch.Tensor) -> torch.Tensor:
        pos, crd, values = buffers
        return torch.sparse_csr_tensor(pos, crd, values, (rows, h.shape[0]), check_invariants=False) @ h

    def _decide(self, buffers: Sequence[torch.Tensor], rows: int, h: torch.Tensor) -> tuple[bool, str]:
        from sparse_mlir.compiler.regions.base import WIN_MARGIN, _timed_pair, call_overhead_ms
        h = h.detach().contiguous()
        self.spmm_kernel(h.shape[1])   # built before the timing
        # Ours pays its whole call from the module (validation aside): the
        # shape checks, the handle lookup and the kernel call.
        ours, theirs = _timed_pair(lambda: self._ours(buffers, rows, h), lambda: self._torch(buffers, rows, h),
                                   call_overhead_ms())
        wins = ours < WIN_MARGIN * theirs
        return wins, (f"{'ours' if wins else 'torch.sparse'} (ours {ours:.3f} ms, torch.sparse {theirs:.3f} ms, "
                      f"nnz {buffers[-1].numel()} at the first call)")

    def _ours(self, buffers: Sequence[torch.Tensor], rows: int, h: torch.Tensor) -> torch.Tensor:
        kernel = self.spmm_kernel(h.shape[1])
        h = h.detach()
        if not h.is_contiguous():
            h = h.contiguous()
        if torch.get_num_threads() > 1 and not shares_torch_threads():
            with single_threaded():   # (see Region._call: two OpenMP runtimes on shared cores)
                return kernel(buffers[0], buffers[1], buffers[2], h)
        return kernel(buffers[0], buffers[1], buffers[2], h)

    def transposed(self, buffers: Sequence[torch.Tensor], shape: tuple[int, int]) -> tuple[list[torch.Tensor], int]:
        """adj^T's CSR buffers (for dh = adj^T dy): sorted by column (a
        stable sort, O(nnz log nnz)); any input format (all are CSR here)."""
        rows, cols = shape
        pos, crd, values = buffers
        counts = torch.diff(pos.to(torch.int64))
        row_of = torch.repeat_interleave(torch.arange(rows), counts)
        order = torch.argsort(crd.to(torch.int64), stable=True)
        pos_t = torch.zeros(cols + 1, dtype=torch.int64)
        pos_t[1:] = torch.cumsum(torch.bincount(crd.to(torch.int64), minlength=cols), 0)
        return [pos_t.to(pos.dtype), row_of[order].to(crd.dtype), values[order]], cols


def split_inputs(model: torch.nn.Module, encodings: dict[str, Encoding], example_args: Sequence[Any],
                 example_kwargs: dict[str, Any]) -> dict[str, Encoding]:
    """The encodings that name the forward's inputs (its parameter names, or
    "args.<i>"), by input path; removed from `encodings`."""
    import inspect
    try:
        bound = inspect.signature(model.forward).bind(*example_args, **example_kwargs)
    except (TypeError, ValueError):
        return {}
    names = list(bound.arguments)
    positional = names[:len(example_args)]
    found: dict[str, Encoding] = {}
    for key in list(encodings):
        path = input_path(key, positional)
        if path in bound.arguments:
            value = bound.arguments[path]
            if not isinstance(value, torch.Tensor):
                raise SpecError(f"input {key!r}: encoded inputs must be tensors, got {type(value).__name__}")
            found[path] = encodings.pop(key)
            check_input_encoding(path, found[path])
    return found


def stand_ins(model: torch.nn.Module, inputs: dict[str, Encoding], example_args: Sequence[Any],
              example_kwargs: dict[str, Any]) -> tuple[tuple, dict]:
    """The examples torch.export captures: each encoded input as a dense
    stand-in of its shape that allocates nothing (a broadcast zero): a graph
    of 10^5 nodes has no room as a dense matrix."""
    import inspect
    bound = inspect.signature(model.forward).bind(*example_args, **example_kwargs)
    for path in inputs:
        value = bound.arguments[path]
        if value.dtype != torch.float32:
            raise SpecError(f"input {path!r} ({inputs[path].format_name}): expected float32 values, got {value.dtype}")
        if value.dim() != 2:
            raise SpecError(f"input {path!r} ({inputs[path].format_name}): expected a matrix, got shape "
                            f"{tuple(value.shape)}")
        bound.arguments[path] = torch.zeros((), dtype=torch.float32).expand(*value.shape)
    return tuple(bound.args), dict(bound.kwargs)


def export_examples(capture_args: Sequence[Any], positional: Sequence[str], inputs: dict[str, Encoding]) -> tuple:
    """The examples export() compiles the whole graph at: clones, but the
    sparse inputs' stand-ins (broadcast zeros) as they are."""
    return tuple(a.detach().clone() if isinstance(a, torch.Tensor) and (i >= len(positional) or positional[i] not in
                                                                        inputs) else a
                 for i, a in enumerate(capture_args))


MM = torch.ops.aten.mm.default
MATMUL = torch.ops.aten.matmul.default
# Ops reading only an input's metadata: they run on the sparse tensor itself.
_METADATA = {torch.ops.aten.sym_size.int, torch.ops.aten.size.default, torch.ops.aten.dim.default}


def replace_input_reads(graph_module: torch.fx.GraphModule, input_paths: Sequence[str],
                        inputs: dict[str, Encoding], options: KernelOptions, add_region: Any,
                        cost_model: bool = True) -> tuple[dict[int, SpMMRegion], list[str]]:
    """Each `adj @ h` (aten.mm / matmul, h a matrix) of an encoded input ->
    sparse_mlir_spmm; other readers get the input densified (a
    SparseFallbackWarning names each torch op). `input_paths`: the tensor
    placeholders' input paths, in order. Returns the regions by handle and
    the fallback ops."""
    import warnings

    from sparse_mlir.errors import SparseFallbackWarning
    from sparse_mlir.runtime import ops

    graph = graph_module.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)]
    # Lifted parameters and buffers come first: the user's inputs are the last ones.
    user = placeholders[len(placeholders) - len(input_paths):]
    regions: dict[int, SpMMRegion] = {}
    fallbacks: list[str] = []
    for node, path in zip(user, input_paths):
        if path not in inputs:
            continue
        region = SpMMRegion(SparseInput(path, inputs[path]), options, cost_model)
        handle = add_region(region)
        regions[handle] = region
        # SDDMM and sparse attention reading the input (sampled_readers.py).
        from sparse_mlir.compiler.regions import sampled_readers
        sampled, sparse_readers = sampled_readers.rewrite(graph, node, region, options, add_region)
        regions.update(sampled)
        dense: torch.fx.Node | None = None
        for reader in list(node.users):
            if reader in sparse_readers:
                continue
            args = reader.args
            if (reader.op == "call_function" and reader.target in (MM, MATMUL) and len(args) == 2
                    and args[0] is node and args[1] is not node and _rank(args[1]) == 2):
                with graph.inserting_before(reader):
                    call = graph.call_function(ops.sparse_mlir_spmm, (node, args[1], handle))
                call.meta.update(reader.meta)
                reader.replace_all_uses_with(call)
                graph.erase_node(reader)
                continue
            if (reader.op == "call_function" and reader.target in _METADATA) or (
                    reader.op == "call_module" and str(reader.target).startswith("_guards")):
                continue   # (export's shape guards read the input's sizes only)
            if dense is None:
                with graph.inserting_after(node):
                    dense = graph.call_function(ops.sparse_mlir_input_dense, (node, handle))
                dense.meta.update(node.meta)
            reader.replace_input_with(node, dense)
            op = str(reader.target) if reader.op == "call_function" else reader.op
            fallbacks.append(op)
            warnings.warn(f"no sparse kernel for '{op}' reading input '{path}' stored as "
                          f"{inputs[path].format_name}; torch runs it on the input made dense (to_dense() each "
                          "call)", SparseFallbackWarning, stacklevel=4)
    graph.eliminate_dead_code()
    graph.lint()
    graph_module.recompile()
    return regions, fallbacks


def _rank(node: Any) -> int | None:
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return value.dim() if isinstance(value, torch.Tensor) else None


def plan_entry(region: SpMMRegion, fallbacks: Sequence[str]) -> Any:
    """The input's line in sparsity_plan()."""
    from sparse_mlir.compiler.reports import PlanEntry
    sparsifier = region.encoding.effective_sparsifier
    return PlanEntry(name=region.name, role="input", shape=(), format=region.encoding.format_name,
                     stored_as=(f"{region.encoding.format_name} (the call's torch sparse tensor, read in place where "
                                "its index dtypes match the widths)" if isinstance(region.encoding, CSR) else
                                f"{region.encoding.format_name} (the call's torch sparse tensor, converted to CSR "
                                "buffers once per distinct graph)"),
                     sparsifier=sparsifier.attr_text(), kind=sparsifier.kind,
                     applied=getattr(region, "plan_applied", None) or (
                         "every call: validated in O(nnz) (once per distinct index buffers); a dense tensor "
                         "passed for it is sparsified; adj @ h "
                         "runs sparse_mlir::spmm (one kernel per feature count, any graph)"),
                     origin="user",
                     fallbacks=tuple(f"'{op}' runs on torch (input made dense)" for op in dict.fromkeys(fallbacks)))
