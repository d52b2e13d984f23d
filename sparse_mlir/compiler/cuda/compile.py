"""compile(..., target="cuda"): 2:4 f16/bf16 linears on sparse tensor cores.

Import (torch-mlir, as for the CPU) -> `smlir.sparsify` on the 2:4 weights
the cost model keeps sparse -> `smlir-nm-cuda-pipeline` (hoist, raise their
F.linear to `smlir.linear` f16/bf16 -> f32, then
`convert-smlir-to-nvgpu`: mma.sp kernels + launches; the rest of the model
as host code; PTX through gpu-module-to-binary{format=isa}). Everything up
to PTX, and `export()`, run without a GPU. A call checks for a driver and
device first, then runs the model's torch.export graph on the GPU with its
2:4 linears on their kernels (`graph.GraphExecutor`: activations stay on
the device, dense linears run on cuBLAS). An exported artifact runs the
host code instead (`host.HostProgram`: no torch graph needed, but x and y
cross to the host per linear and the rest runs on the CPU).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from mlir import ir, passmanager
from mlir.dialects import gpu

from sparse_mlir.runtime.callable import CheckedCallable, InputSpec
from sparse_mlir.compiler.pipeline import MLIR_VERSION, annotate, main_function, pipeline_error, single_result
from sparse_mlir.compiler.reports import CompileReports, PlanEntry, TensorStats
from sparse_mlir.dialects.smlir import ATTR, device_buffer, kernel_operand
from sparse_mlir.context import make_context
from sparse_mlir.encodings import NM, Dense, Encoding
from sparse_mlir.errors import SpecError
from sparse_mlir.compiler.importers.torch_fx import import_model
from sparse_mlir.compiler.propagation import linear_readers
from sparse_mlir.compiler.specs import parameters
from sparse_mlir.compiler.jit import jit
from sparse_mlir.compiler.weights import apply_sparsifier
from sparse_mlir.compiler.cuda.cost import choose_gpu
from sparse_mlir.runtime.cuda.driver import cuda_runtime_path, require_device
from sparse_mlir.runtime.cuda.graph import GraphExecutor, Kernels, Launcher, save_kernels
from sparse_mlir.runtime.cuda.host import Argument, HostProgram, as_array
from sparse_mlir.runtime.cuda.launch import PtxModule
from sparse_mlir.runtime.cuda.nm24 import MMA_K, compress

STAGES = ("linalg", "annotated", "gpu", "llvm", "ptx")
# The largest thread-block tile (weight rows, tokens) a linear gets: on an H100
# with 64 x 64 warps, 128 x 64 ran 4096^3 f16 at 481 TF/s, 128 x 128 at 466,
# 64 x 128 at 407, 256 x 64 at 370 (benchmarks/gpu_nm.py --tiles).
TILE = (128, 64)
WARP_TOKENS = 64    # tokens per warp (64 rows each): 32 or 64; 64 ran 4096^3 at 481 TF/s, 32 at 380
PIPELINE_STAGES = 2  # shared-memory stages of x (2 or 3)
_ELEMENT_DTYPES = {"f16": np.int16, "bf16": np.int16, "f32": np.float32, "i32": np.int32}


def _tiling(mma_k: int, tile: tuple[int, int], warp_tokens: int, stages: int) -> str:
    return (f"mma-k={mma_k} tile-rows={tile[0]} tile-tokens={tile[1]} warp-tokens={warp_tokens} "
            f"pipeline-stages={stages}")


def pipeline_for(mma_k: int, chip: str, tile: tuple[int, int] = TILE, warp_tokens: int = WARP_TOKENS,
                 stages: int = PIPELINE_STAGES) -> str:
    """The pass pipeline compile(target="cuda") runs (sparse-mlir-opt reproduces it)."""
    return f"builtin.module(smlir-nm-cuda-pipeline{{{_tiling(mma_k, tile, warp_tokens, stages)} chip={chip}}})"


def _lowering_passes(mma_k: int, tile: tuple[int, int], warp_tokens: int, stages: int) -> str:
    """The smlir part alone, for the "gpu" stage (kernels and launches, before bufferization)."""
    return (f"builtin.module(smlir-hoist-argument-sparsifiers, "
            f"func.func(smlir-raise-linear{{mixed-precision=true}}), "
            f"convert-smlir-to-nvgpu{{{_tiling(mma_k, tile, warp_tokens, stages)}}})")


@dataclass(frozen=True)
class KernelArgument:
    """One memref argument of a kernel: its role, shape and element type."""

    role: str                  # nm24_values | nm24_metadata | x | y | bias
    shape: tuple[int, ...]
    element: str               # f16 | bf16 | i32 | f32


@dataclass(frozen=True)
class KernelLaunch:
    """One sparse tensor-core kernel launch of a compiled model (its "gpu" stage):
    what a caller needs to run the kernel from `fn.ir("ptx")` on its own buffers
    (`sparse_mlir.runtime.cuda.launch`). Memref arguments are passed as MLIR's
    descriptors (allocated, aligned, offset, sizes, strides)."""

    kernel: str                # the PTX .entry name
    tensor: str                # the 2:4 weight it reads
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared_bytes: int
    arguments: tuple[KernelArgument, ...]

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "tensor": self.tensor, "grid": list(self.grid), "block": list(self.block),
                "dynamic_shared_bytes": self.dynamic_shared_bytes,
                "arguments": [{"role": a.role, "shape": list(a.shape), "element": a.element}
                              for a in self.arguments]}


def _constant_index(value: ir.Value) -> int:
    return ir.IntegerAttr(value.owner.attributes["value"]).value


def _typed(read: Callable[[ir.Attribute], str | None], attrs: ir.DictAttr, name: str) -> str:
    """The case name of the typed attribute `name` of a device argument, read
    through `read` (`device_buffer` or `kernel_operand`); an error when it is
    missing or of another kind (a compiler bug)."""
    value = read(attrs[name]) if name in attrs else None
    if value is None:
        got = str(attrs[name]) if name in attrs else "nothing"
        raise RuntimeError(f"convert-smlir-to-nvgpu left {got} in {name} of a device argument "
                           f"(expected an #smlir.{read.__name__})")
    return value


def _launches(module: ir.Module) -> list[KernelLaunch]:
    """The gpu.launch_func ops of @main in the "gpu" stage, in program order."""
    main = main_function(module)
    launches = []
    for op in main.regions[0].blocks[0].operations:
        if op.operation.name != "gpu.launch_func":
            continue
        arguments, tensor = [], ""
        for operand in op.kernelOperands:
            attrs = ir.DictAttr(main.arg_attrs[ir.BlockArgument(operand).arg_number])
            role = _typed(device_buffer, attrs, ATTR.device)
            tensor = ir.StringAttr(attrs[ATTR.tensor_name]).value
            if role == "scratch":   # which of the kernel's x, y, bias
                role = _typed(kernel_operand, attrs, ATTR.kernel_operand)
            shaped = ir.ShapedType(operand.type)
            arguments.append(KernelArgument(role, tuple(shaped.shape), str(shaped.element_type)))
        shared = op.dynamicSharedMemorySize
        launches.append(KernelLaunch(
            kernel=ir.SymbolRefAttr(op.kernel).value[-1], tensor=tensor,
            grid=tuple(_constant_index(v) for v in (op.gridSizeX, op.gridSizeY, op.gridSizeZ)),
            block=tuple(_constant_index(v) for v in (op.blockSizeX, op.blockSizeY, op.blockSizeZ)),
            dynamic_shared_bytes=_constant_index(shared) if shared is not None else 0,
            arguments=tuple(arguments)))
    return launches


def _prune(encoding: Encoding, weight: torch.Tensor, name: str) -> torch.Tensor:
    """The weight with the encoding's sparsifier applied, in its own dtype (bf16 too)."""
    kept = apply_sparsifier(encoding.effective_sparsifier, weight.detach().float().numpy(), name) != 0
    return torch.where(torch.from_numpy(kept), weight.detach(), torch.zeros((), dtype=weight.dtype))


def _check_encodings(encodings: Mapping[str, Encoding], params: Mapping[str, torch.Tensor]) -> None:
    for name, encoding in encodings.items():
        if name not in params:
            raise SpecError(f"{name}: target='cuda' encodes parameters only (2:4 weights); intermediate "
                            f"tensors are not supported on the GPU yet (got {encoding!r})")
        if isinstance(encoding, Dense):
            continue
        if not isinstance(encoding, NM) or (encoding.n, encoding.m) != (2, 4):
            raise SpecError(f"{name}: target='cuda' supports NM(2, 4) (sparse tensor cores) and Dense(), "
                            f"got {encoding!r}")
        if params[name].dim() != 2:
            raise SpecError(f"{name}: NM(2, 4) on the GPU needs a matrix, got shape {tuple(params[name].shape)}")


class CudaCompiledModule(CompileReports, CheckedCallable):
    """The torch-callable result of `compile(..., target="cuda")`.

    Inputs are checked as for the CPU (`CheckedCallable`) but may be CPU or
    CUDA tensors in any layout: they run on the GPU (CPU inputs are copied
    there) and the result comes back on the first input's device.
    """

    _input_devices = ("cpu", "cuda")
    _openmp = False          # for the artifact manifest: host code is single-threaded
    _counts_calls = False
    _mlir_version = MLIR_VERSION

    def __init__(self, module: ir.Module, context: ir.Context, arguments: list[Argument],
                 data: dict[tuple[str, str], np.ndarray], input_specs: list[InputSpec],
                 result: tuple[tuple[int, ...], torch.dtype], effective: dict[str, torch.Tensor],
                 stats: dict[str, TensorStats], plan: list[PlanEntry], stages: dict[str, str],
                 launches: list[KernelLaunch], pipeline: str, opt_level: int, chip: str,
                 compile_seconds: float, graph: tuple[Any, list[str], dict[str, torch.Tensor]]) -> None:
        super().__init__(input_specs)
        self._module, self._context = module, context
        self._arguments = arguments
        self._data = data
        self._result_shape, self._result_dtype = result
        self._effective, self._stats, self._plan, self._stages = effective, stats, plan, stages
        self._launches = launches
        self.pipeline = pipeline
        self.compile_seconds = compile_seconds
        self._opt_level = opt_level
        self.chip = chip
        self._engine: Any = None
        self._program: HostProgram | None = None
        self._graph = graph   # (torch.export program, parameter names, effective parameters)
        self._executor: GraphExecutor | None = None
        self._ptx_module: PtxModule | None = None

    def _jit(self) -> Any:
        """The host code, JIT-compiled once (no GPU needed: the runtime opens the
        driver at its first call)."""
        if self._engine is None:
            with self._context:
                self._engine = jit(self._module, opt_level=self._opt_level,
                                   shared_libs=[str(cuda_runtime_path())])
        return self._engine

    def _run(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        if self._executor is None:
            require_device()   # a clear error without a GPU, before torch's
            self._executor = self.executor()
        device = tensors[0].device
        cuda = [t if t.is_cuda else t.cuda() for t in tensors]
        return self._executor(*cuda).to(device)

    def executor(self, launcher: Launcher | None = None) -> GraphExecutor:
        """The torch graph a call runs: the model's torch.export program on
        its inputs' device, each 2:4 linear replaced by its kernel, launched
        by `launcher(launch, buffers)` (by default the CUDA driver on
        `ir("ptx")`, loaded at the first launch; a test or a profiler may
        pass its own)."""
        program, names, params = self._graph
        return GraphExecutor(program, names, params, self._kernels(), launcher or self._launch)

    def save_kernels(self, directory: str | os.PathLike) -> Path:
        """The kernels' launches, compressed weights and PTX, for running the
        torch graph where the compiler is not (`graph.load_kernels`, then
        `GraphExecutor` on the model's `export_program` there)."""
        return save_kernels(directory, self._kernels(), self._stages["ptx"])

    def _kernels(self) -> Kernels:
        launches: dict[str, list[dict[str, Any]]] = {}
        for launch in self._launches:   # program order: the linears' order in the graph
            launches.setdefault(launch.tensor, []).append(launch.to_json())
        return {name: (ordered, self._data[("nm24_values", name)], self._data[("nm24_metadata", name)])
                for name, ordered in launches.items()}

    def _launch(self, launch: Mapping[str, Any], buffers: Mapping[str, torch.Tensor]) -> None:
        if self._ptx_module is None:
            self._ptx_module = PtxModule(self._stages["ptx"])
        self._ptx_module.launch(launch, buffers)

    def run_host_code(self, tensors: Sequence[torch.Tensor]) -> torch.Tensor:
        """Runs the compiled host code (what `export()` ships) instead of the
        torch graph: for comparing the two; needs a GPU."""
        tensors = self._check_inputs(tensors)
        if self._program is None:
            require_device()   # once: the program keeps its device buffers
            engine = self._jit()
            # Runs the module's constructors, which load the kernels' PTX: the
            # JIT does not run them by itself (an export links them as DT_INIT).
            engine.initialize()
            self._program = HostProgram(engine.lookup("main"), self._arguments, self._data,
                                        (len(self._result_shape), self._result_dtype), cuda_runtime_path(),
                                        owner=engine)
        return self._program(tensors)

    def export(self, path: str | os.PathLike) -> Path:
        """Writes an artifact directory (host code with the kernels' PTX, packed
        weights, manifest) that `sparse_mlir.load()` runs on a machine with a GPU
        and without the compiler; no GPU is needed to export."""
        from sparse_mlir.compiler.export import export_cuda
        return export_cuda(self, path)

    def kernels(self) -> list[KernelLaunch]:
        """The sparse tensor-core kernel launches, in call order (their code: `ir("ptx")`)."""
        return list(self._launches)

    def ir(self, stage: str = "gpu") -> str:
        """linalg | annotated | gpu (kernels + launches) | llvm | ptx (the kernels' PTX)."""
        if stage not in self._stages:
            raise ValueError(f"unknown stage {stage!r}; choose one of {STAGES}")
        return self._stages[stage]


def _ptx(module: ir.Module) -> str:
    texts = []
    for op in module.body.operations:
        if op.operation.name == "gpu.binary":
            for attr in op.attributes["objects"]:
                texts.append(gpu.ObjectAttr(attr).object.decode())
    return "\n".join(texts)


def _arguments(module: ir.Module, param_names: Sequence[str], num_inputs: int) -> list[Argument]:
    """The leading (non-input) arguments of @main after convert-smlir-to-nvgpu:
    parameters in order, each 2:4 one replaced by its device arguments."""
    main = main_function(module)
    block = main.regions[0].blocks[0]
    pending = list(param_names)
    out = []
    for index, arg in enumerate(list(block.arguments)[:len(block.arguments) - num_inputs]):
        attrs = ir.DictAttr(main.arg_attrs[index])
        if ATTR.device in attrs:
            role = _typed(device_buffer, attrs, ATTR.device)
            name = ir.StringAttr(attrs[ATTR.tensor_name]).value
            if pending and pending[0] == name:
                pending.pop(0)
        else:
            role, name = "host", pending.pop(0)
        shaped = ir.ShapedType(arg.type)
        element = str(shaped.element_type)
        out.append(Argument(role, name, tuple(shaped.shape), np.dtype(_ELEMENT_DTYPES.get(element, np.float32))))
    return out


def _checked_pipeline(mma_k: int, chip: str, tile: tuple[int, int], warp_tokens: int, stages: int) -> str:
    """The pipeline for these options, or a SpecError naming the bad one
    (before the model is imported: the ranges are convert-smlir-to-nvgpu's,
    the chips smlir-nm-cuda-pipeline's)."""
    if mma_k not in MMA_K:
        raise SpecError(f"mma_k must be one of {MMA_K}, got {mma_k!r}")
    if (not isinstance(tile, tuple) or len(tile) != 2 or not all(type(v) is int for v in tile)
            or tile[0] not in (64, 128, 256, 512) or not (32 <= tile[1] <= 128 and tile[1] % 32 == 0)):
        raise SpecError(f"tile must be (weight rows, tokens) with rows 64, 128, 256 or 512 and tokens a "
                        f"multiple of 32 up to 128, got {tile!r}")
    if warp_tokens not in (32, 64):
        raise SpecError(f"warp_tokens must be 32 or 64, got {warp_tokens!r}")
    if stages not in (2, 3):
        raise SpecError(f"pipeline_stages must be 2 or 3, got {stages!r}")
    if not isinstance(chip, str):
        raise SpecError(f"chip must be a CUDA architecture name such as 'sm_80' or 'sm_90a', got {chip!r}")
    pipeline = pipeline_for(mma_k, chip, tile, warp_tokens, stages)
    with make_context():
        try:
            passmanager.PassManager.parse(pipeline)
        except ValueError as error:
            raise SpecError(str(error).splitlines()[0]) from None   # the pipeline's own message
    return pipeline


def compile_cuda(model: torch.nn.Module, encodings: Mapping[str, Encoding] | None = None,
                 example_args: Sequence[torch.Tensor] = (), *, cost_model: bool = True, mma_k: int = 32,
                 chip: str = "sm_80", opt_level: int = 2, tile: tuple[int, int] = TILE,
                 warp_tokens: int = WARP_TOKENS, pipeline_stages: int = PIPELINE_STAGES) -> CudaCompiledModule:
    """Compiles `model` with its NM(2, 4) f16/bf16 weights on sparse tensor cores.

    `cost_model=False` keeps 2:4 wherever the kernel can run (whole tiles,
    f16/bf16), however small; by default small linears stay dense. `tile`
    bounds a thread block's (weight rows, tokens): rows 64/128/256/512,
    tokens a multiple of 32 up to 128; each linear gets the largest tile
    within it that divides its shape. `warp_tokens` (32 or 64): tokens per
    warp, each warp computing 64 weight rows.
    """
    start = time.perf_counter()
    pipeline = _checked_pipeline(mma_k, chip, tile, warp_tokens, pipeline_stages)
    encodings = dict(encodings or {})
    for name, encoding in encodings.items():
        if not isinstance(encoding, Encoding):
            raise SpecError(f"{name}: expected a sparse_mlir encoding (NM(2, 4), ...), got {encoding!r}")
    params = parameters(model, encodings)
    _check_encodings(encodings, params)
    example_args = tuple(example_args)
    effective = {name: _prune(e, params[name], name) for name, e in encodings.items()}

    imported = import_model(model, example_args)
    readers = linear_readers(imported.graph, imported.param_names, imported.num_inputs,
                             {name: node.shape for name, node in imported.nodes.items()})
    choices = {}
    for name, encoding in encodings.items():
        if isinstance(encoding, NM):
            rows, depth = params[name].shape
            choices[name] = choose_gpu(str(params[name].dtype).removeprefix("torch."), rows, depth,
                                       readers.get(name, []), check_speed=cost_model)
    sparse = {name: encodings[name] for name, c in choices.items() if c.sparse}

    stages = {"linalg": imported.text}
    context = make_context()
    with context, ir.Location.unknown():
        module = ir.Module.parse(imported.text)
        single_result(module)
        annotate(module, imported.param_names, sparse)
        stages["annotated"] = str(module)
        lowered = ir.Module.parse(stages["annotated"])
        try:
            passmanager.PassManager.parse(_lowering_passes(mma_k, tile, warp_tokens, pipeline_stages)).run(lowered.operation)
            stages["gpu"] = str(lowered)
            passmanager.PassManager.parse(pipeline).run(module.operation)
        except ir.MLIRError as error:
            raise pipeline_error(error, pipeline, stages["annotated"]) from None
        stages["llvm"] = str(module)
        stages["ptx"] = _ptx(module)
        arguments = _arguments(lowered, imported.param_names, imported.num_inputs)
        launches = _launches(lowered)
        result = single_result(lowered)

    data = {}   # (role, parameter) -> contents of @main's leading arguments
    for name, value in zip(imported.param_names, imported.params):
        array = as_array(effective.get(name, value))
        if name in sparse:
            data[("nm24_values", name)], data[("nm24_metadata", name)] = compress(array, mma_k, name)
        else:
            data[("host", name)] = array
    result_dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[str(result.element_type)]
    stats, plan = {}, []
    for name, encoding in encodings.items():
        nnz = int(torch.count_nonzero(effective[name]))
        choice = choices.get(name)
        stored = ("2:4 on sparse tensor cores (mma.sp m16n8k{}, f32 accumulate)".format(mma_k)
                  if name in sparse else
                  f"dense, cuBLAS through torch ({choice.reason})" if choice else
                  "dense, cuBLAS through torch")
        stats[name] = TensorStats(shape=tuple(effective[name].shape), format=stored, nnz=nnz,
                                  sparsifier=encoding.effective_sparsifier.attr_text(),
                                  density=nnz / max(1, effective[name].numel()))
        plan.append(PlanEntry(name=name, role="weight", shape=stats[name].shape, format=encoding.format_name,
                              stored_as=stored, sparsifier=stats[name].sparsifier,
                              kind=encoding.effective_sparsifier.kind, applied="once, at compile time",
                              origin="user", fallbacks=()))
    input_specs = [(tuple(a.shape), a.dtype) for a in example_args]
    graph = (imported.program, imported.param_names,
             {**dict(zip(imported.param_names, imported.params)), **effective})
    return CudaCompiledModule(module, context, arguments, data, input_specs, (tuple(result.shape), result_dtype),
                              effective, stats, plan, stages, launches, pipeline, opt_level, chip,
                              time.perf_counter() - start, graph)
