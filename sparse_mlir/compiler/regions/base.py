"""What linear and conv regions share: the packed weight, the kernel per
input shape, and the cost model's choice between it and torch's op."""

from __future__ import annotations

import functools
import logging
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Callable, Hashable, Mapping, Sequence

import numpy as np
import torch

from sparse_mlir.runtime.memref import Kernel
from sparse_mlir.encodings import Encoding
from sparse_mlir.errors import CompileError, SparseFallbackWarning, SpecError
from sparse_mlir.runtime.threads import get_num_threads, shares_torch_threads, single_threaded
from sparse_mlir.runtime.versions import follow
from sparse_mlir.compiler.weights import stored_coordinates
from sparse_mlir.compiler.regions import half, sampled
from sparse_mlir.compiler.regions.kernels import KERNELS, CompiledLinear, KernelOptions, LinearSignature, median_seconds
from sparse_mlir.compiler.regions.routing import RoutedTokens
from sparse_mlir.compiler.regions.token_plan import Piece, plan

log = logging.getLogger("sparse_mlir.compiler.regions")


@dataclass(frozen=True)
class PieceKernels:
    """The kernels that run x[T, K]: one per piece of T's token plan."""

    pieces: tuple[Piece, ...]
    by_size: dict[int, Kernel]


@dataclass
class Choice:
    """What runs a region at one input shape and thread count, and why."""

    tokens: int
    kernel: PieceKernels | None    # None: torch's op on the pruned dense weight
    ours_ms: float | None
    torch_ms: float | None
    reason: str
    compiled: CompiledLinear | None = None
    # The kernel reads the region's own stored values (or its dense weight)
    # in place: it stays right when training changes them (else the choice
    # is made again after such a change).
    live: bool = True


# (signature, token plan, density, options, op parameters, torch threads, our threads)
# -> (ours ms, torch ms, reason):
# the cost model's measurements, shared by the weights they describe.
_DECISIONS: dict[tuple, tuple[float, float, str]] = {}


# Ours must beat torch by this much: a choice made on a few timed calls must
# not lose in the model to timing noise (a 2-core machine varies by ~5%).
WIN_MARGIN = 0.9


def _ours_wins(ours_ms: float, torch_ms: float) -> bool:
    return ours_ms < WIN_MARGIN * torch_ms


@functools.cache
def call_overhead_ms() -> float:
    """What an eager call of a region from the model costs beyond the
    region's own work (the traced check and the handle lookup of
    runtime/ops.py), charged to our side: torch's op, where it wins, goes
    back into the model and pays none. Under torch.compile the call goes
    through torch's dispatcher (~18 us more), not charged: choices are made
    for eager calls."""
    from sparse_mlir.runtime.ops import REGIONS, sparse_mlir_linear

    result = torch.empty(1)
    handle = REGIONS.add(lambda x, buffers, bias: result)
    x, buffers = torch.empty(1, 1), [torch.empty(1) for _ in range(3)]
    try:
        from_model = median_seconds(lambda: sparse_mlir_linear(x, buffers, None, 1, handle), repeats=201)
        bare = median_seconds(lambda: result, repeats=201)
    finally:
        REGIONS.remove(handle)
    return max(0.0, from_model - bare) * 1e3


# A pair of timings this far apart decides on a short measurement (3 runs
# each); closer ones are measured again on 5 runs each.
CLEAR_RATIO = 1.6


def _timed_pair(run_ours: Callable[[], object], run_torch: Callable[[], object],
                call_ms: float) -> tuple[float, float]:
    """Median ms of our kernel (plus the call overhead) and of torch's op, each
    timed right after the other, as they alternate in a model: the other
    side's threads may still be spinning."""
    for repeats in (3, 5):
        ours = median_seconds(run_ours, repeats, before=run_torch) * 1e3 + call_ms
        theirs = median_seconds(run_torch, repeats, before=run_ours) * 1e3
        if max(ours, theirs) > CLEAR_RATIO * min(ours, theirs):
            break
    return ours, theirs


def torch_won_everywhere(regions: Mapping[int, "Region"]) -> set[int]:
    """Handles of the live regions whose every choice so far is torch's op."""
    return {handle for handle, region in regions.items() if not region.handed_back and region.choices
            and all(choice.kernel is None for choice in region.choices.values())}


def mark_handed_back(handle: int, region: "Region", readers: dict[str, list[str]]) -> None:
    """Records that torch's op reads the region's weight again (the plan says why)."""
    region.handed_back = True
    op = f"sparse_mlir::{'conv2d' if region.op_name == 'conv2d' else 'linear'} (region {handle})"
    readers[region.name] = [f"torch's {region.op_name} (region {handle} handed back: torch won at the "
                            f"compile-time shapes)" if r == op else r for r in readers[region.name]]


class Region:
    """One encoded weight read through the linear kernels (y[T, N] = x[T, K] W2^T + bias).

    Subclasses say how an input becomes the kernel's x (`_tokens`), how the
    kernel's result becomes the op's (`_ours`) and what torch runs instead
    (`_torch`). The kernel for an input shape is built on the first call
    with it (shared by every weight of the same signature) and, with the
    cost model on, timed against torch's op on that call's input: the faster
    one runs every later call with that shape.

    Training: the stored values are a parameter (`values`, the packed
    values buffer itself, which the kernels read in place). An optimizer
    updates them in place; the region's dense copies (torch's side, dense
    stored kernels) follow on the next call (`sync`, by the parameter's
    version counter). Gradients (`backward`) are dx and the values'
    gradient at the stored positions (`_rows`, `_cols`)."""

    op_name = "op"
    # Whether the region's kernels take bf16 / fp16 (else torch's op runs a
    # half weight, with one warning).
    half_kernels = False

    def __init__(self, name: str, encoding: Encoding, effective: torch.Tensor, matrix: torch.Tensor,
                 packed: Sequence[np.ndarray], bias: bool, options: KernelOptions, cost_model: bool) -> None:
        self.name = name
        self.encoding = encoding
        out_features, in_features = matrix.shape
        # The model's dtype: a half weight's values are stored in it (packed in f32, cast).
        self.dtype = matrix.dtype if matrix.dtype in half.KERNEL_DTYPES else torch.float32
        self.signature = LinearSignature(in_features, out_features, encoding.attr_text(), bias,
                                         half.dtype_name(self.dtype))
        self._weight = effective          # what torch's op reads
        self._matrix = matrix             # W2 [N, K]: what the kernel reads when stored densely
        self._packed = [np.ascontiguousarray(a) for a in packed]
        tensors = [torch.from_numpy(a) for a in self._packed] or [torch.empty(0)]   # [] in unit tests
        if half.is_half(self.dtype) and self._packed:
            tensors[-1] = tensors[-1].to(self.dtype)   # exact: the packed values came from this dtype
            self._packed[-1] = half.raw(tensors[-1])   # the kernels read the tensor's memory
        self._indices = tensors[:-1]
        self.values = torch.nn.Parameter(tensors[-1], requires_grad=False)
        follow(self.values)   # (fused optimizers change it without a new version)
        self._coordinates: tuple[torch.Tensor, torch.Tensor] | None = None   # (rows, cols), made on first use
        self._synced = self.values._version
        self._options = options
        self._cost_model = cost_model
        self._lock = threading.Lock()
        self.choices: dict[Hashable, Choice] = {}
        self._warned = False
        # Token counts with kernels of their own: those seen before freeze()
        # (the example's); later ones run on the token plan's buckets.
        self._exact: set[int] = set()
        self._frozen = False
        # Set for a routed weight (an MoE expert's, moe.py): counts pad to fixed sizes, prepared at compile time.
        self.routing: RoutedTokens | None = None
        # Set when torch won every shape seen at compile time: the graph then
        # calls torch's op directly (the region no longer runs).
        self.handed_back = False
        self.force_torch = False   # set while the whole model is timed with torch's ops
        self.decide_ms = 0.0       # spent measuring and building kernels (compile time, not a call's)
        self.density = float(torch.count_nonzero(matrix)) / max(1, matrix.numel())
        # The stored values' gradient (a sampled product): our kernel or torch's, per token range.
        self.sampled_choices: dict[tuple, SampledChoice] = {}

    def kernel_encoding(self) -> Encoding:
        """The encoding the kernels are compiled for: the stored one (an ELL
        part's buffers are CSR's, its kernel ELL's: regions/ell.py)."""
        return self.encoding

    @property
    def matrix_shape(self) -> tuple[int, int]:
        """W2's [N, K], without touching its dense copy (a shared weight makes that on demand: tied.py)."""
        return (self.signature.out_features, self.signature.in_features)

    @property
    def _rows(self) -> torch.Tensor:
        """Each stored value's row in W2 [N, K] (int64)."""
        return self._stored_coordinates()[0]

    @property
    def _cols(self) -> torch.Tensor:
        """Each stored value's column in W2 [N, K] (int64)."""
        return self._stored_coordinates()[1]

    def _stored_coordinates(self) -> tuple[torch.Tensor, torch.Tensor]:
        # Made when first asked for: a weight pruned again each training
        # step (MaskUpdate) may not need them before the next pruning.
        coordinates = self._coordinates
        if coordinates is None:
            rows, cols = (stored_coordinates(self.encoding, self._packed, self.matrix_shape) if self._packed
                          else (np.empty(0, np.int64), np.empty(0, np.int64)))
            coordinates = self._coordinates = (torch.from_numpy(rows), torch.from_numpy(cols))
        return coordinates

    @property
    def buffers(self) -> list[torch.Tensor]:
        """The packed weight as tensors (zero-copy views of the kernel's
        arguments), the stored values (`values`, a parameter) last."""
        return [*self._indices, self.values]

    def sync(self) -> None:
        """The dense copies follow stored values that changed in place
        (an optimizer step, load_state_dict); kernels reading copies made
        before are chosen again."""
        self._follow_replaced_values()
        version = self.values._version
        if version == self._synced:
            return
        with self._lock, torch.no_grad():
            if version != self._synced:
                self._store_dense(self.values)
                self.choices = {key: choice for key, choice in self.choices.items()
                                if choice.kernel is None or choice.live}
                self._synced = version

    def _store_dense(self, values: torch.Tensor) -> None:
        """Writes `values` into the dense weight torch's side reads."""
        self._matrix[self._rows, self._cols] = values

    def dense_matrix(self, values: torch.Tensor) -> torch.Tensor:
        """W2 [N, K] holding `values` at the stored positions (differentiable)."""
        matrix = values.new_zeros(self.matrix_shape)
        return matrix.index_put((self._rows, self._cols), values)

    def load_matrix(self, matrix: torch.Tensor) -> int:
        """Sets the stored values from a dense W2 [N, K] (the mask stays);
        returns how many nonzeros of `matrix` lie outside it (dropped)."""
        if tuple(matrix.shape) != self.matrix_shape:
            raise SpecError(f"{self.name} ({self.encoding.format_name}): expected a weight of shape "
                            f"{list(self.matrix_shape)}, got {list(matrix.shape)}")
        kept = self.gather_values(matrix)
        return int(torch.count_nonzero(matrix)) - int(torch.count_nonzero(kept))

    def gather_values(self, matrix: torch.Tensor) -> torch.Tensor:
        """Sets the stored values to a dense W2 [N, K]'s at the stored positions (returned)."""
        with torch.no_grad():
            kept = matrix[self._rows, self._cols]
            self.values.copy_(kept)
            return kept

    # (the stored buffer and values pointer last found to agree: `.ctypes` costs ~1 us a call)
    _agreed: tuple[np.ndarray | None, int] | None = None

    def _follow_replaced_values(self) -> None:
        """The kernels read the values' memory: where the parameter's data
        was replaced (`values.data = ...`, `fn.to(dtype)`) they are bound to
        the new memory, which must hold what they read (else a SpecError)."""
        values, stored = self.values, (self._packed[-1] if self._packed else None)
        pointer = values.data_ptr()
        agreed = self._agreed
        if agreed is not None and agreed[0] is stored and agreed[1] == pointer:   # as last checked (every call's case)
            return
        if stored is None or not stored.size or pointer == stored.ctypes.data:
            self._agreed = (stored, pointer)
            return
        if (values.dtype != self.dtype or tuple(values.shape) != stored.shape or not values.is_contiguous()
                or values.device.type != "cpu"):
            raise SpecError(f"{self.name} ({self.encoding.format_name}): its stored values were replaced (their "
                            f".data set, or the module converted by .to() / .double() / .half()) by a "
                            f"{values.dtype} {list(values.shape)} tensor on {values.device}; its kernels read "
                            f"{half.dtype_name(self.dtype)} [{stored.size}] on the CPU, contiguous (the mask is "
                            "fixed at compile time): "
                            "update the values in place (copy_) or compile the converted model again")
        with self._lock:
            self._packed[-1] = half.raw(values.detach())
            self.choices = {}   # kernels bound to the old memory: bound again on the next call
        # Dense copies and dx's W^T follow the values by their version counter.
        torch.autograd.graph.increment_version(values)

    def _own(self, values: torch.Tensor) -> bool:
        """True when `values` is the region's own stored values (what its kernels read)."""
        if values is self.values:   # (its callers sync next, which follows replaced values)
            return True
        if values.data_ptr() == self.values.data_ptr() and values.dtype == self.values.dtype:
            return True
        if tuple(values.shape) != tuple(self.values.shape) or not values.is_floating_point():
            raise SpecError(f"{self.name} ({self.encoding.format_name}): its stored values are "
                            f"{self.values.dtype} {list(self.values.shape)} (the mask is fixed at compile time), "
                            f"got {values.dtype} {list(values.shape)}; update them in place (copy_) or compile "
                            "again for another mask")
        return False

    def backward(self, dy: torch.Tensor, x: torch.Tensor, values: torch.Tensor,
                 needs: Sequence[bool]) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """(dx, d values, d bias) for the gradients `needs` asks (x, values, bias)."""
        weight = None   # the region's own: `_gradients` reads the dense copy only where torch's dx needs it
        if self._own(values):
            self.sync()
        else:
            weight = self._weight_of(self.dense_matrix(values.detach())).to(dy.dtype)
        dx, dvalues, dbias = self._gradients(dy, x, weight, needs)
        return dx, (dvalues.to(values.dtype) if dvalues is not None else None), dbias

    def _gradients(self, dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None,
                   needs: Sequence[bool]) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """`weight`: the op's weight in dy's dtype, or None for the region's own stored values."""
        raise NotImplementedError

    def _weight_of(self, matrix: torch.Tensor) -> torch.Tensor:
        """The op's weight (torch's layout) for a dense W2."""
        return matrix

    def __call__(self, x: torch.Tensor, buffers: Sequence[torch.Tensor], bias: torch.Tensor | None) -> torch.Tensor:
        self._check(x)
        if not x.is_floating_point():   # torch's op would compute in x's dtype with the weight cast to it
            raise SpecError(f"{self.name} ({self.encoding.format_name}): {self.op_name} expects a floating-point "
                            f"input (its weight is float32), got {x.dtype} (integer ids go through an embedding "
                            "first)")
        if buffers and not self._own(buffers[-1]):
            # Another tensor than the kernels' (gradcheck's, a copy): torch's op on it.
            return self._torch(x, bias, self._weight_of(self.dense_matrix(buffers[-1])))
        if self._tokens(x) == 0:   # an expert the router sent no token: no kernel has 0 rows
            return self._torch(x, bias)
        self.sync()
        key = self._choice_key(x)
        choice = self.choices.get(key)
        if choice is None:
            with self._lock:
                if key not in self.choices:
                    start = time.perf_counter()
                    self.choices[key] = self._decide(x, bias)
                    self.decide_ms += (time.perf_counter() - start) * 1e3
                    log.info("%s, input %s, threads %d / %d: %s", self.name, list(x.shape), torch.get_num_threads(),
                             get_num_threads(),
                             self.choices[key].reason)
                choice = self.choices[key]
        if choice.kernel is None or self.force_torch or x.dtype != self.dtype or x.device.type != "cpu":
            return self._torch(x, bias)
        kernel = choice.kernel
        if self.routing is not None:   # the choice serves every count padding to its sizes: this count's rows
            kernel = PieceKernels(self.routing.plan(self._tokens(x)), kernel.by_size)
        return self._ours(kernel, x, bias)

    def _choice_key(self, x: torch.Tensor) -> Hashable:
        """What a choice depends on: x's shape (a routed weight: the kernel
        sizes its count pads to), layout and the threads each side may use."""
        threads = (torch.get_num_threads(), get_num_threads())
        if self.routing is not None:
            return ("routed", self.routing.key(self._tokens(x)), self._layout(x), *threads)
        return (tuple(x.shape), self._layout(x), *threads)

    def _plan(self, tokens: int) -> tuple[Piece, ...]:
        if self.routing is not None:
            return self.routing.plan(tokens)
        if not self._frozen:
            self._exact.add(tokens)
        return plan(tokens, frozenset(self._exact))

    def freeze(self) -> None:
        """Later token counts run on bucket-sized kernels (no compile on the call path)."""
        self._frozen = True

    def _tokens(self, x: torch.Tensor) -> int:
        raise NotImplementedError

    def _check(self, x: torch.Tensor) -> None:
        """A SpecError naming the weight when x cannot be its op's input."""
        raise NotImplementedError

    def _ours(self, kernel: PieceKernels, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        raise NotImplementedError

    def _torch(self, x: torch.Tensor, bias: torch.Tensor | None, weight: torch.Tensor | None = None) -> torch.Tensor:
        """Torch's op on the region's pruned weight (or on `weight`)."""
        raise NotImplementedError

    def _linear(self, kernels: PieceKernels, columns: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """The kernels on x[T, K] (made contiguous) and the bias: y[T, N]."""
        columns = columns.contiguous()
        pieces = kernels.pieces
        if len(pieces) == 1 and pieces[0].rows == pieces[0].size:
            return self._call(kernels.by_size[pieces[0].size], columns, bias)
        y = columns.new_empty(columns.shape[0], self.signature.out_features)
        for piece in pieces:
            rows = columns[piece.start:piece.start + piece.rows]
            if piece.rows < piece.size:
                padded = columns.new_zeros(piece.size, columns.shape[1])
                padded[:piece.rows] = rows
                rows = padded
            y[piece.start:piece.start + piece.rows] = self._call(kernels.by_size[piece.size], rows, bias)[:piece.rows]
        return y

    def _call(self, kernel: Kernel, columns: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """One kernel on contiguous x[T, K]."""
        tokens, depth = columns.shape
        element = half.carrier(self.dtype)
        signature = [((tokens, depth), (depth, 1), element)]
        addresses = [columns.data_ptr()]
        if bias is not None:
            bias = bias.contiguous()
            signature.append(((bias.shape[0],), (1,), element))
            addresses.append(bias.data_ptr())
        if torch.get_num_threads() > 1 and not shares_torch_threads():
            # With libomp, torch's intra-op threads (libgomp) spin after each
            # torch op and ours after each kernel: on shared cores the two
            # runtimes slow each other more than our second thread gains
            # (BERT, 4 layers, 90% CSR, 2 threads: 1.39-1.85x eager with our
            # threads, 2.07x without). Our kernels then run on the calling
            # thread. (On torch's libgomp, the default, they share its pool.)
            with single_threaded():
                return half.from_kernel(kernel.call_addresses(tuple(signature), addresses), self.dtype)
        return half.from_kernel(kernel.call_addresses(tuple(signature), addresses), self.dtype)

    def _decide(self, x: torch.Tensor, bias: torch.Tensor | None) -> Choice:
        if half.is_half(self.dtype) and not self.half_kernels:
            self._warn_half()
            return Choice(0, None, None, None, f"torch: no {self.dtype} kernel for {self.op_name}")
        if x.dtype != self.dtype or (bias is not None and bias.dtype != self.dtype):
            return Choice(0, None, None, None, f"torch: {x.dtype} input (the kernels of this weight take "
                                               f"{half.dtype_name(self.dtype)})")
        tokens = self._tokens(x)
        pieces = self._plan(tokens)
        try:
            built = {size: KERNELS.get(self.signature, self.kernel_encoding(), size, self._options)
                     for size in dict.fromkeys(piece.size for piece in pieces)}
        except CompileError as error:
            self._warn(f"no sparse kernel for {self.op_name} reading '{self.name}' stored as "
                       f"{self.encoding.format_name}: {error}; torch's {self.op_name} runs it on the pruned weight")
            return Choice(tokens, None, None, None, f"torch: the kernel did not compile ({error})")
        compiled = built[pieces[0].size]
        for message in dict.fromkeys(m for c in built.values() for m in c.fallbacks):
            self._warn(message.replace("tensor 'weight'", f"tensor '{self.name}'"))
        bound = self._bound(x, compiled.stored_sparse)
        in_place = {a.ctypes.data for a in self._packed}
        if self._matrix.is_contiguous():
            in_place.add(self._matrix.data_ptr())
        live = all(a.ctypes.data in in_place for a in bound)
        kernel = PieceKernels(pieces, {size: Kernel(c.function, bound, 2, half.carrier(self.dtype), owner=c)
                                       for size, c in built.items()})
        if not self._cost_model:
            return Choice(tokens, kernel, None, None, "ours (cost_model=False)", compiled, live)
        # Weights of one signature and density run alike: measured once.
        key = (self.signature, tuple((p.rows, p.size) for p in pieces), round(self.density, 2), self._options,
               self._measure_key(x), torch.get_num_threads(), get_num_threads())
        if key not in _DECISIONS:
            x = x.contiguous()
            run_ours, run_torch = (lambda: self._ours(kernel, x, bias)), (lambda: self._torch(x, bias))
            call = call_overhead_ms()
            ours, theirs = _timed_pair(run_ours, run_torch, call)
            _DECISIONS[key] = (ours, theirs, f"{'ours' if _ours_wins(ours, theirs) else 'torch'} "
                                             f"(ours {ours:.3f} ms incl. {call * 1e3:.0f} us for the custom op "
                                             f"call, torch {theirs:.3f} ms)")
            shared = ""
        else:
            shared = ", measured on a weight of the same shape, format and density"
        ours, theirs, reason = _DECISIONS[key]
        return Choice(tokens, kernel if _ours_wins(ours, theirs) else None, ours, theirs, reason + shared, compiled,
                      live)

    def _layout(self, x: torch.Tensor) -> Hashable:
        """What of x's memory layout the kernel path depends on."""
        return None

    def _bound(self, x: torch.Tensor, stored_sparse: bool) -> list[np.ndarray]:
        """The weight arguments the kernel is called with for inputs like x."""
        return self._packed if stored_sparse else [half.raw(self._matrix.contiguous())]

    def _measure_key(self, x: torch.Tensor) -> Hashable:
        """What else the measurement depends on (the op's own parameters)."""
        return self.op_name

    def _warn_half(self) -> None:
        if not self._warned:
            self._warned = True
            half.warn_no_half_kernel(self.op_name, self.name, self.dtype, stacklevel=6)

    def _warn(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(message, SparseFallbackWarning, stacklevel=5)

    def _sampled(self, dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """dW2 = dy^T x at the stored positions only: our SDDMM kernel
        (sampled.py) where it has one (CSR, n:m) and, with the cost model,
        beats torch's dense product and gather at this size (timed once
        per shape, format, density, token range and threads); else torch's."""
        kernel = self._sampled_kernel(dy, x) if dy.shape[0] else None
        if kernel is None:
            return self._sampled_torch(dy, x)
        return sampled.run(kernel, dy, x)

    def _sampled_torch(self, dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return (dy.t() @ x)[self._rows, self._cols]

    def _sampled_kernel(self, dy: torch.Tensor, x: torch.Tensor) -> Kernel | None:
        """The bound gradient kernel the choice for dy's shape runs (None: torch's)."""
        if (not sampled.supported(self.encoding) or dy.dtype != torch.float32 or x.dtype != torch.float32
                or dy.device.type != "cpu" or not self._packed):
            return None
        key = _sampled_key(dy.shape[0])
        choice = self.sampled_choices.get(key)
        if choice is None:
            with self._lock:
                if key not in self.sampled_choices:
                    start = time.perf_counter()
                    self.sampled_choices[key] = self._decide_sampled(dy, x)
                    self.decide_ms += (time.perf_counter() - start) * 1e3
                    log.info("%s, weight gradient, %d tokens, threads %d / %d: %s", self.name, dy.shape[0],
                             key[1], key[2], self.sampled_choices[key].reason)
                choice = self.sampled_choices[key]
        return choice.kernel

    def sampled_choice(self, tokens: int) -> "SampledChoice | None":
        """The weight gradient's choice for `tokens` tokens at the current
        thread counts (None: not made yet)."""
        return self.sampled_choices.get(_sampled_key(tokens))

    def _decide_sampled(self, dy: torch.Tensor, x: torch.Tensor) -> "SampledChoice":
        signature = sampled.SampledSignature(self.signature.out_features, self.signature.in_features,
                                             self.signature.encoding)
        try:
            compiled = sampled.SAMPLED_KERNELS.get(signature, self.encoding, self._options)
        except CompileError as error:
            self._warn(f"no sparse weight gradient for '{self.name}' stored as {self.encoding.format_name}: "
                       f"{error}; torch's (dy^T @ x)[rows, cols] computes it")
            return SampledChoice(None, f"torch: the kernel did not compile ({error})")
        kernel = sampled.bind(compiled, self._packed)
        if not self._cost_model:
            return SampledChoice(kernel, "ours (cost_model=False)")
        key = ("sampled", signature, round(self.density, 2), self._options, *_sampled_key(dy.shape[0]))
        if key not in _DECISIONS:
            dy, x = dy.contiguous(), x.contiguous()
            ours, theirs = _timed_pair(lambda: sampled.run(kernel, dy, x), lambda: self._sampled_torch(dy, x), 0.0)
            _DECISIONS[key] = (ours, theirs, f"{'ours' if _ours_wins(ours, theirs) else 'torch'} "
                                             f"(ours {ours:.3f} ms, torch's dense dy^T x and gather {theirs:.3f} ms)")
        ours, theirs, reason = _DECISIONS[key]
        return SampledChoice(kernel if _ours_wins(ours, theirs) else None, reason)


def _sampled_key(tokens: int) -> tuple[int, int, int]:
    """What the weight gradient's choice depends on: token counts within a
    factor of 2 share it (one kernel serves every count, and its time's
    ratio to torch's barely moves in such a range: a model with varying
    sequence lengths times log2 of them, not each), and the threads."""
    return tokens.bit_length(), torch.get_num_threads(), get_num_threads()


@dataclass
class SampledChoice:
    """What computes a weight's gradient at one token count and thread count, and why."""

    kernel: Kernel | None    # None: torch's dense product and gather
    reason: str
