"""compile(..., target="cuda") without a GPU: everything up to PTX, and the
clear error a call gives where no driver or device exists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from mlir import ir

import sparse_mlir as sm
from sparse_mlir.compiler.cuda import CudaUnavailableError

from .cuda_env import cuda_unavailable_reason

MLIR_TRANSLATE = Path(ir.__file__).resolve().parent / "bin" / "mlir-translate"


def ffn(dtype: torch.dtype, hidden: int = 256, out: int = 128) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(128, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, out, bias=False)).to(dtype)


@pytest.mark.parametrize("dtype,ptx_type", [(torch.float16, "f16"), (torch.bfloat16, "bf16")])
def test_ptx_has_sparse_mma_for_every_2_4_linear(dtype: torch.dtype, ptx_type: str) -> None:
    x = torch.randn(64, 128, dtype=dtype)
    fn = sm.compile(ffn(dtype), {"0.weight": sm.NM(2, 4), "2.weight": sm.NM(2, 4)}, (x,), target="cuda",
                    cost_model=False)
    ptx = fn.ir("ptx")
    assert ".target sm_80" in ptx
    assert len(re.findall(r"\.entry nm24_linear_", ptx)) == 2
    # per kernel: 2 k-steps of 32 per 64-column stage x 4 x 8 fragments per warp
    assert ptx.count(f"mma.sp.sync.aligned.m16n8k32.row.col.f32.{ptx_type}.{ptx_type}.f32") == 2 * 64
    # x through shared memory by cp.async and ldmatrix; A fragments in 16-byte loads
    assert "cp.async.ca.shared.global" in ptx and "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert "ld.global.v4.b32" in ptx
    assert "nvgpu.mma.sp.sync" in fn.ir("gpu") if dtype == torch.float16 else "nvvm.mma.sp.sync" in fn.ir("gpu")
    assert all("sparse tensor cores (mma.sp m16n8k32" in p.stored_as for p in fn.sparsity_plan())


def test_mma_k_16_and_three_dimensional_inputs() -> None:
    from sparse_mlir.compiler.cuda import compile_cuda

    x = torch.randn(2, 32, 128, dtype=torch.float16)
    fn = compile_cuda(ffn(torch.float16), {"0.weight": sm.NM(2, 4)}, (x,), cost_model=False, mma_k=16)
    assert "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in fn.ir("ptx")
    assert "ldmatrix.sync.aligned.m8n8.x2.shared.b16" in fn.ir("ptx")
    assert 'smlir.mma_k = 16' in fn.ir("gpu")


def test_kernels_describe_their_launches() -> None:
    """fn.kernels(): what sparse_mlir.runtime.cuda.launch needs to run fn.ir("ptx") on
    device buffers: the 256 x 128 linear at 64 tokens is 2 x 1 blocks of 128 x 64
    (2 warps of 64 x 64), its arguments in fragment order; its bias and the
    truncation to f16 are the kernel's epilogue."""
    from sparse_mlir.compiler.cuda import compile_cuda

    x = torch.randn(64, 128, dtype=torch.float16)
    fn = compile_cuda(ffn(torch.float16), {"0.weight": sm.NM(2, 4)}, (x,), cost_model=False)
    (launch,) = fn.kernels()
    assert launch.tensor == "0.weight" and launch.kernel in fn.ir("ptx")
    assert launch.grid == (2, 1, 1) and launch.block == (32, 2, 1) and launch.dynamic_shared_bytes == 0
    assert [(a.role, a.shape, a.element) for a in launch.arguments] == [
        ("nm24_values", (16, 1024), "f16"), ("nm24_metadata", (16, 64), "i32"),
        ("x", (64, 128), "f16"), ("y", (64, 256), "f16"), ("bias", (256,), "f32")]
    assert launch.kernel == "nm24_linear_f16_k32_64x256x128_bias_f16"
    # A tile bound: 64 x 32 blocks of one 64 x 32 warp each.
    (small,) = compile_cuda(ffn(torch.float16), {"0.weight": sm.NM(2, 4)}, (x,), cost_model=False,
                            tile=(64, 32)).kernels()
    assert small.grid == (4, 2, 1) and small.block == (32, 1, 1)


def test_cost_model_keeps_linears_on_cublas_and_says_why() -> None:
    x = torch.randn(64, 128, dtype=torch.float16)
    fn = sm.compile(ffn(torch.float16), {"0.weight": sm.NM(2, 4)}, (x,), target="cuda")
    (entry,) = fn.sparsity_plan()
    assert entry.stored_as.startswith("dense, cuBLAS through torch") and "at most 0.74x of cuBLAS" in entry.stored_as
    assert "gpu.launch_func" not in fn.ir("gpu") and fn.ir("ptx") == ""
    # Still pruned 2:4, as requested.
    w = fn.effective_state_dict()["0.weight"].reshape(256, -1, 4)
    assert int((w != 0).sum(-1).max()) <= 2


def test_host_code_translates_to_llvm_ir_calling_the_cuda_runtime() -> None:
    """What the JIT would compile on a GPU machine: launches become mgpu* calls
    of libmlir_cuda_runtime.so, the PTX is loaded by the driver (JIT)."""
    x = torch.randn(64, 128, dtype=torch.float16)
    fn = sm.compile(ffn(torch.float16), {"0.weight": sm.NM(2, 4)}, (x,), target="cuda", cost_model=False)
    result = subprocess.run([str(MLIR_TRANSLATE), "--mlir-to-llvmir"], input=fn.ir("llvm"), capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    for call in ("@mgpuModuleLoadJIT", "@mgpuLaunchKernel", "@mgpuMemcpy"):
        assert call in result.stdout


@pytest.mark.skipif(cuda_unavailable_reason() is None,
                    reason="a usable CUDA GPU is present; this checks the error raised without one")
def test_call_without_a_gpu_raises_a_clear_error() -> None:
    x = torch.randn(64, 128, dtype=torch.float16)
    fn = sm.compile(ffn(torch.float16), {"0.weight": sm.NM(2, 4)}, (x,), target="cuda", cost_model=False)
    with pytest.raises(CudaUnavailableError, match="libcuda.so.1|no CUDA device|cuInit"):
        fn(x)
    assert issubclass(CudaUnavailableError, sm.SparseMLIRError)


def test_unsupported_encodings_and_targets_are_errors() -> None:
    x = torch.randn(64, 128, dtype=torch.float16)
    with pytest.raises(sm.SpecError, match=r"0.weight: target='cuda' supports NM\(2, 4\).*got CSR"):
        sm.compile(ffn(torch.float16), {"0.weight": sm.CSR()}, (x,), target="cuda")
    with pytest.raises(sm.SpecError, match="relu: target='cuda' encodes parameters only"):
        sm.compile(ffn(torch.float16), {"relu": sm.NM(2, 4)}, (x,), target="cuda")
    with pytest.raises(sm.SpecError, match="target must be 'cpu' or 'cuda', got 'tpu'"):
        sm.compile(ffn(torch.float16), {}, (x,), target="tpu")


@pytest.mark.parametrize("chip,version", [("sm_86", "7.1"), ("sm_90", "7.8"), ("sm_90a", "8.0"), ("sm_100", "8.6")])
def test_each_chip_gets_its_oldest_ptx_isa(chip: str, version: str) -> None:
    """sm_90 needs PTX 7.8: with sm_80's 7.1 the NVPTX backend aborted the process."""
    from sparse_mlir.compiler.cuda import compile_cuda

    x = torch.randn(64, 128, dtype=torch.float16)
    ptx = compile_cuda(ffn(torch.float16), {"0.weight": sm.NM(2, 4)}, (x,), cost_model=False, chip=chip).ir("ptx")
    assert f".version {version}" in ptx and f".target {chip}" in ptx and "mma.sp.sync.aligned" in ptx


@pytest.mark.parametrize("options,message", [
    ({"chip": "sm_75"}, "chip 'sm_75' has no sparse tensor cores"),
    ({"chip": "bogus"}, "chip 'bogus' has no sparse tensor cores"),
    ({"tile": (128,)}, r"tile must be \(weight rows, tokens\).*got \(128,\)"),
    ({"tile": (96, 64)}, r"rows 64, 128, 256 or 512"),
    ({"warp_tokens": 16}, "warp_tokens must be 32 or 64, got 16"),
    ({"pipeline_stages": 4}, "pipeline_stages must be 2 or 3, got 4"),
])
def test_bad_gpu_options_are_errors_before_any_work(options: dict, message: str) -> None:
    from sparse_mlir.compiler.cuda import compile_cuda

    x = torch.randn(64, 128, dtype=torch.float16)
    with pytest.raises(sm.SpecError, match=message):
        compile_cuda(ffn(torch.float16), {"0.weight": sm.NM(2, 4)}, (x,), **options)


@pytest.mark.parametrize("option", [{"vector_lanes": 8}, {"on_fallback": "error"}, {"fuse_sparsifiers": False}])
def test_cpu_options_are_refused_for_the_gpu(option: dict) -> None:
    x = torch.randn(64, 128, dtype=torch.float16)
    (name,) = option
    with pytest.raises(sm.SpecError, match=f"{name}=.* applies to target='cpu' only"):
        sm.compile(ffn(torch.float16), {"0.weight": sm.NM(2, 4)}, (x,), target="cuda", **option)


def test_three_stages_keep_x_within_48_kb_of_shared_memory() -> None:
    """3 stages of 128 tokens (54 KB) were more than a kernel may declare
    statically: ptxas (and the driver) rejected them. The tile shrinks."""
    from sparse_mlir.compiler.cuda import compile_cuda

    x = torch.randn(128, 128, dtype=torch.float16)
    fn = compile_cuda(torch.nn.Linear(128, 256).half(), {"weight": sm.NM(2, 4)}, (x,), cost_model=False,
                      tile=(128, 128), warp_tokens=64, pipeline_stages=3)
    (launch,) = fn.kernels()
    assert launch.grid == (2, 2, 1)   # 128 x 64 blocks: 3 x 64 x 72 halves = 27 KB
    shared = re.search(r"\.shared \.align 16 \.b8 \S+\[(\d+)\]", fn.ir("ptx"))
    assert shared and int(shared.group(1)) <= 48 * 1024


def test_models_returning_several_tensors_are_refused() -> None:
    class TwoResults(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(128, 128)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            y = self.fc(x)
            return y, y.relu()

    x = torch.randn(64, 128, dtype=torch.float16)
    with pytest.raises(sm.SpecError, match="models returning one tensor for now; this one returns 2"):
        sm.compile(TwoResults().half(), {"fc.weight": sm.NM(2, 4)}, (x,), target="cuda", cost_model=False)


def test_f32_weights_stay_dense_on_the_gpu_path() -> None:
    x = torch.randn(64, 128)
    fn = sm.compile(ffn(torch.float32), {"0.weight": sm.NM(2, 4)}, (x,), target="cuda", cost_model=False)
    (entry,) = fn.sparsity_plan()
    assert "float16/bfloat16, the weight is float32" in entry.stored_as


# ------------------------------------------------- CUDA artifacts (no GPU needed to export)


@pytest.fixture(scope="module")
def cuda_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    x = torch.randn(64, 128, dtype=torch.float16)
    fn = sm.compile(ffn(torch.float16), {"0.weight": sm.NM(2, 4), "2.weight": sm.NM(2, 4)}, (x,), target="cuda",
                    cost_model=False)
    return fn.export(tmp_path_factory.mktemp("cuda") / "ffn.smlir")


def test_export_writes_host_code_weights_and_the_cuda_runtime(cuda_artifact: Path) -> None:
    import json

    assert sorted(p.name for p in cuda_artifact.iterdir()) == ["lib", "manifest.json", "model.so", "weights.bin"]
    assert [p.name for p in (cuda_artifact / "lib").iterdir()] == ["libsparse_mlir_cuda_runtime.so"]
    manifest = json.loads((cuda_artifact / "manifest.json").read_text())
    roles = [(a["role"], a["tensor"]) for a in manifest["cuda"]["arguments"]]
    assert roles == [("nm24_values", "0.weight"), ("nm24_metadata", "0.weight"), ("scratch", "0.weight"),
                     ("scratch", "0.weight"), ("scratch", "0.weight"), ("host", "0.bias"),
                     ("nm24_values", "2.weight"), ("nm24_metadata", "2.weight"), ("scratch", "2.weight"),
                     ("scratch", "2.weight")]
    assert manifest["signature"]["inputs"] == [{"shape": [64, 128], "dtype": "float16"}]
    assert [k["kernel"] for k in manifest["cuda"]["kernels"]] == ["nm24_linear_f16_k32_64x256x128_bias_f16",
                                                                  "nm24_linear_f16_k32_64x128x256_f16"]
    # Scratch buffers are recorded by shape only: weights.bin holds values, metadata and the bias.
    stored = sum(np.prod(a["shape"]) * np.dtype(a["dtype"]).itemsize for a in manifest["cuda"]["arguments"]
                 if a["role"] != "scratch")
    assert stored <= (cuda_artifact / "weights.bin").stat().st_size < stored + 64 * 1024
    # Only our runtime (which opens libcuda.so.1 itself) and libc/libm are needed.
    needed = subprocess.run(["readelf", "-d", str(cuda_artifact / "model.so")], capture_output=True,
                            text=True).stdout
    libraries = set(re.findall(r"Shared library: \[(.*?)\]", needed))
    assert "libsparse_mlir_cuda_runtime.so" in libraries
    assert libraries <= {"libc.so.6", "libm.so.6", "libsparse_mlir_cuda_runtime.so"}


def test_exported_library_loads_its_kernels_when_loaded(cuda_artifact: Path) -> None:
    """The JIT hands module constructors to ORC; the export makes them model.so's
    DT_INIT, so loading the library loads the kernels' PTX (here, without a
    driver, the runtime says it cannot)."""
    import os
    import sys

    code = (f"import ctypes; ctypes.CDLL({str(cuda_artifact / 'lib' / 'libsparse_mlir_cuda_runtime.so')!r}, "
            f"mode=ctypes.RTLD_GLOBAL); ctypes.CDLL({str(cuda_artifact / 'model.so')!r})")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "SPARSE_MLIR_CUDA_TRACE": "1"})
    assert done.returncode == 0, done.stderr
    assert "mgpuModuleLoadJIT(" in done.stderr


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a GPU is present: the artifact loads")
def test_loading_a_cuda_artifact_without_a_gpu_says_why(cuda_artifact: Path) -> None:
    with pytest.raises(CudaUnavailableError, match="libcuda.so.1|no CUDA device|cuInit"):
        sm.load(cuda_artifact)


def test_c_loader_refuses_cuda_artifacts(cuda_artifact: Path, tmp_path: Path) -> None:
    import ctypes
    import shutil

    from sparse_mlir.runtime import artifact

    cc = shutil.which("cc") or shutil.which("gcc")
    library = tmp_path / "libsparse_mlir_runtime.so"
    subprocess.run([cc, "-O1", "-std=c11", "-shared", "-fPIC", f"-I{artifact.c_dir()}", "-o", str(library),
                    str(artifact.c_dir() / "sparse_mlir_runtime.c"), "-ldl", "-lm"], check=True)
    runtime = ctypes.CDLL(str(library))
    runtime.smlir_load.restype = ctypes.c_void_p
    runtime.smlir_load.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    error = ctypes.create_string_buffer(1024)
    assert runtime.smlir_load(str(cuda_artifact).encode(), error, len(error)) is None
    assert 'a target="cuda" artifact' in error.value.decode() and "sparse_mlir.load" in error.value.decode()
