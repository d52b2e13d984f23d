"""bf16 / fp16 regions on the CPU: what crosses to the kernels and back.

A half-precision linear region stores its values in the model's dtype (half
the bytes of f32); its kernel reads x, the values and the bias in that
dtype, accumulates in f32 and returns y in the dtype. numpy has no
bfloat16: the buffers stay torch tensors, and the kernels' memref
descriptors see them through a 2-byte numpy view of the same memory
(`raw`), which only carries the address, shape and element size.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from sparse_mlir.errors import SparseFallbackWarning

HALF_DTYPES = (torch.bfloat16, torch.float16)
# The dtypes the linear kernels take (x, stored values, bias and y in one).
KERNEL_DTYPES = (torch.float32, *HALF_DTYPES)


def is_half(dtype: torch.dtype) -> bool:
    return dtype in HALF_DTYPES


def dtype_name(dtype: torch.dtype) -> str:
    """"float32", "bfloat16", "float16": a kernel signature's dtype."""
    return str(dtype).removeprefix("torch.")


def carrier(dtype: torch.dtype) -> np.dtype:
    """numpy's stand-in for `dtype` in a memref descriptor: itself for f32,
    2-byte float16 for both half types (only the element size matters)."""
    return np.dtype(np.float16) if is_half(dtype) else np.dtype(np.float32)


def raw(tensor: torch.Tensor) -> np.ndarray:
    """A numpy view of `tensor`'s memory (no copy) the kernels can be bound
    to: for bfloat16 its bits as float16 (never computed with)."""
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(np.float16)
    return tensor.numpy()


def from_kernel(array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """A kernel's result (numpy, carrier dtype) as a torch tensor of `dtype` (no copy)."""
    tensor = torch.from_numpy(array)
    return tensor.view(torch.bfloat16) if dtype == torch.bfloat16 else tensor


def packable(weight: torch.Tensor) -> torch.Tensor:
    """`weight` as the sparsifiers and packers compute on it: f32 for a half
    weight (every bf16/fp16 value is exact in f32, so pruning and packing in
    f32 and casting back loses nothing); other dtypes as they are."""
    return weight.float() if is_half(weight.dtype) else weight


def warn_no_half_kernel(op: str, name: str, dtype: torch.dtype, stacklevel: int = 3) -> None:
    """The one warning for an encoded weight whose op has no half kernel."""
    warnings.warn(f"no {dtype_name(dtype)} sparse kernel for {op} reading '{name}': torch's {op} runs it on the "
                  f"pruned weight (in {dtype_name(dtype)})", SparseFallbackWarning, stacklevel=stacklevel)



def reads_in_region(weight: torch.Tensor, encoding: object, op: str) -> bool:
    """Whether `op` ("linear", "conv2d") reading the encoded `weight` may run
    as a region, as far as its dtype goes: f32 always; bf16 / fp16 for
    linears (not hybrid formats). Elsewhere torch's op runs it: the caller
    lists it among the weight's readers (`reader`), warned about once."""
    from sparse_mlir.encodings import Hybrid

    if weight.dtype == torch.float32:
        return True
    return is_half(weight.dtype) and op == "linear" and not isinstance(encoding, Hybrid)


def reader(label: str, weight: torch.Tensor) -> str:
    """A torch reader's label in the plan and its warning, with the dtype
    where that is why it has no region ("Conv2d (conv) in bfloat16")."""
    return f"{label} in {dtype_name(weight.dtype)}" if is_half(weight.dtype) else label
