"""What compiled and loaded models share: checked torch inputs -> kernel -> torch output.

No MLIR here: `compile()` results and artifacts from `load()` both use it.
"""

from __future__ import annotations

import abc
import itertools
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from sparse_mlir.runtime import csr_inputs
from sparse_mlir.runtime.memref import Kernel, row_major_strides
from sparse_mlir.errors import SpecError

InputSpec = tuple[tuple[int, ...], torch.dtype]
# An integer input that indexes a table: (exclusive upper bound of its values, what it indexes).
IndexBound = tuple[int, str]


class CheckedCallable(abc.ABC):
    """Torch inputs checked against the static signature a model was compiled
    for, then handed to `_run` (how a target calls its code)."""

    # Devices inputs may live on; "cpu" alone where compiled code reads them in place.
    _input_devices: tuple[str, ...] = ("cpu",)

    def __init__(self, input_specs: Sequence[InputSpec], index_bounds: Mapping[int, IndexBound] | None = None) -> None:
        self._input_specs = list(input_specs)
        # The compiled gathers abort the process on an index out of range: checked here first.
        self._index_bounds = dict(index_bounds or {})

    @property
    def input_specs(self) -> list[InputSpec]:
        """(shape, dtype) of each input, as in `example_args`."""
        return list(self._input_specs)

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():
            for index, tensor in enumerate(inputs):
                if isinstance(tensor, torch.Tensor) and tensor.requires_grad:
                    # The result would be a constant to autograd: a silently missing gradient.
                    raise SpecError(f"input {index} requires grad, but this compiled function runs inference only "
                                    f"(no gradient rule for its kernels{self._what_has_no_gradient()}); train with "
                                    "mode='regions' (a module-swapped model trains, see README), or call it under "
                                    "torch.no_grad() or with the input detached")
        return self._run(self._check_inputs(inputs))  # the checked tensors stay alive during the call

    def _what_has_no_gradient(self) -> str:
        """What the message above names (a compiled module: its encoded tensors)."""
        return ""

    @abc.abstractmethod
    def _run(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        """The model's output for inputs that passed `_check_input`."""

    def _check_inputs(self, inputs: Sequence[Any]) -> list[torch.Tensor]:
        if len(inputs) > len(self._input_specs):
            raise SpecError(f"expected {len(self._input_specs)} inputs, got more ({len(inputs)})")
        tensors = [self._check_input(i, t) for i, t in enumerate(inputs)]
        # Too few: a wrong input among those given is the more specific error, so it comes first.
        if len(tensors) != len(self._input_specs):
            raise SpecError(f"expected {len(self._input_specs)} inputs, got {len(inputs)}")
        return tensors

    def _check_input(self, index: int, tensor: Any) -> Any:
        """Input `index` once it matches its spec, with lazy negation/conjugation resolved."""
        shape, dtype = self._input_specs[index]
        if not isinstance(tensor, torch.Tensor):
            raise SpecError(f"input {index}: expected a torch.Tensor, got {type(tensor).__name__}")
        if tensor.device.type not in self._input_devices:
            expected = " or ".join(device.upper() for device in self._input_devices)
            raise SpecError(f"input {index}: expected a {expected} tensor, got device {tensor.device}")
        if tensor.layout != torch.strided:
            raise SpecError(f"input {index}: expected a dense (strided) tensor, got a {tensor.layout} tensor; "
                            "compiled models take dense inputs (pass .to_dense(); sparsity belongs in `encodings`)")
        if tensor.dtype != dtype:
            raise SpecError(f"input {index}: expected dtype {dtype}, got {tensor.dtype}")
        if tensor.shape != shape:
            raise SpecError(f"input {index}: expected shape {shape} (shapes are static, as in example_args), "
                            f"got {tuple(tensor.shape)}")
        self._check_memory(index, tensor)
        if index in self._index_bounds and tensor.numel():
            upper, what = self._index_bounds[index]
            low, high = (int(v) for v in torch.aminmax(tensor))
            if low < 0 or high >= upper:
                raise SpecError(f"input {index}: its values index the {what}: expected values in [0, {upper}), got "
                                f"{'min ' + str(low) if low < 0 else 'max ' + str(high)}")
        if tensor.is_neg() or tensor.is_conj():  # lazy views: the memory holds -x or conj(x)
            tensor = tensor.resolve_neg().resolve_conj()
        return tensor

    def _check_memory(self, index: int, tensor: torch.Tensor) -> None:
        """Raises where the target cannot use the tensor's memory as it is (any layout by default)."""


class ModelCallable(CheckedCallable):
    """Calls a CPU kernel on torch tensors, reading their memory in place."""

    def __init__(self, kernel: Kernel, input_specs: Sequence[InputSpec], counts_calls: bool,
                 index_bounds: Mapping[int, IndexBound] | None = None,
                 csr: Sequence[csr_inputs.CsrInput] = ()) -> None:
        super().__init__(input_specs, index_bounds)
        self._kernel = kernel
        self._counts_calls = counts_calls
        self._calls = itertools.count()
        # Inputs the program takes as CSR buffers (positions, coordinates, values; nnz per call).
        self._csr_inputs = {spec.index: spec for spec in csr}
        self._numpy_dtypes = [numpy_dtype(dtype) for _, dtype in self._input_specs]
        # Inputs are checked to be contiguous: row-major strides. A CSR
        # input's three buffers: their lengths are set each call.
        signature: list[tuple] = []
        for index, (shape, dtype) in enumerate(self._input_specs):
            spec = self._csr_inputs.get(index)
            if spec is None:
                signature.append((shape, row_major_strides(shape), numpy_dtype(dtype)))
            else:
                signature += [((0,), (1,), numpy_dtype(t)) for t in (spec.pos_dtype, spec.crd_dtype, spec.dtype)]
        self._signature = tuple(signature)

    @property
    def csr_inputs(self) -> list[csr_inputs.CsrInput]:
        """The inputs taken as CSR tensors (any nnz), by position."""
        return list(self._csr_inputs.values())

    def _run(self, tensors: list[Any]) -> torch.Tensor:
        scalars = (next(self._calls),) if self._counts_calls else ()
        flat: list[torch.Tensor] = []
        lengths: list[tuple[int, int]] = []
        for tensor in tensors:
            if isinstance(tensor, tuple):   # a CSR input's buffers
                lengths += [(len(flat) + i, t.shape[0]) for i, t in enumerate(tensor)]
                flat += tensor
            else:
                flat.append(tensor)
        return torch.from_numpy(self._kernel.call_addresses(self._signature, [t.data_ptr() for t in flat],
                                                            scalars, lengths))

    def _check_input(self, index: int, tensor: Any) -> Any:
        spec = self._csr_inputs.get(index)
        if spec is not None:   # its CSR buffers, validated
            return csr_inputs.pack(spec, tensor)
        return super()._check_input(index, tensor)

    def reset_call_number(self, call: int = 0) -> None:
        """The next call is number `call` (random-fraction masks depend on it; 0 after compile or load)."""
        if not isinstance(call, int) or not 0 <= call < 2**63:
            raise SpecError(f"call number must be an int in [0, 2**63), got {call!r}")
        self._calls = itertools.count(call)

    def _check_memory(self, index: int, tensor: torch.Tensor) -> None:
        """The kernel reads the tensor in place: row-major, in a dtype numpy has."""
        if not tensor.is_contiguous():
            raise SpecError(f"input {index}: expected a contiguous tensor; call .contiguous() first")
        if self._numpy_dtypes[index] is None:
            raise SpecError(f"input {index}: dtype {tensor.dtype} cannot be passed to compiled CPU code")


def numpy_dtype(dtype: torch.dtype) -> np.dtype | None:
    """numpy's dtype for `dtype` (None where numpy has none, e.g. bfloat16)."""
    try:
        return torch.empty(0, dtype=dtype).numpy().dtype
    except TypeError:
        return None
