"""target="cuda" calls: the torch.export graph with 2:4 linears on their kernels.

Runs without a GPU: `fn.executor(launcher)` takes a launcher that does what
a kernel launch does from the launch's own description (its buffers by
role), here on the CPU from the independent metadata decoder. What this
checks is everything around the kernels: which linears are replaced, the
buffers each launch gets (shapes, dtypes, the fused bias), the reshapes and
casts back into the graph, and that the rest of the graph reads the
effective (pruned) parameters. The kernels themselves are checked against
eager on a GPU (test_cuda_device.py).
"""

from __future__ import annotations

from typing import Any, Mapping

import pytest
import torch

import sparse_mlir as sm

from .test_nm24_metadata import decode

# f32 accumulation in both; the difference is the f16/bf16 rounding of y.
TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


class ReferenceLauncher:
    """Computes a launch's y from its buffers on the CPU, as the kernel would."""

    def __init__(self, mma_k: int) -> None:
        self.mma_k = mma_k
        self.kernels: list[str] = []

    def __call__(self, launch: Mapping[str, Any], buffers: Mapping[str, torch.Tensor]) -> None:
        for argument in launch["arguments"]:   # what PtxModule.launch checks on the GPU
            tensor = buffers[argument["role"]]
            assert tuple(tensor.shape) == tuple(argument["shape"]) and tensor.is_contiguous()
        values, x = buffers["nm24_values"], buffers["x"]
        dense = decode(values.view(torch.int16).numpy(), buffers["nm24_metadata"].numpy(), self.mma_k, x.shape[1])
        w = torch.from_numpy(dense).view(values.dtype)
        y = x.float() @ w.float().T
        if "bias" in buffers:
            y = y + buffers["bias"].float()
        buffers["y"].copy_(y.to(buffers["y"].dtype))
        self.kernels.append(launch["kernel"])


def ffn(dtype: torch.dtype) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.GELU(), torch.nn.Linear(256, 128)).to(dtype)


def eager(model: torch.nn.Module, effective: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    model.load_state_dict(effective, strict=False)
    with torch.no_grad():
        return model.float()(x.float())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mma_k", [16, 32])
def test_2_4_linears_run_their_kernels_inside_the_torch_graph(dtype: torch.dtype, mma_k: int) -> None:
    from sparse_mlir.compiler.cuda import compile_cuda

    model = ffn(dtype)
    x = torch.randn(2, 32, 128, dtype=dtype)   # 3-d: the kernel sees 64 x 128
    fn = compile_cuda(model, {"0.weight": sm.NM(2, 4), "2.weight": sm.NM(2, 4)}, (x,), cost_model=False,
                      mma_k=mma_k)
    launcher = ReferenceLauncher(mma_k)
    y = fn.executor(launcher)(x)
    assert launcher.kernels == [k.kernel for k in fn.kernels()]
    assert all(k.endswith("_bias_" + {torch.float16: "f16", torch.bfloat16: "bf16"}[dtype]) for k in launcher.kernels)
    expected = eager(model, fn.effective_state_dict(), x)
    assert y.dtype == dtype and y.shape == expected.shape
    scale = float(expected.abs().max())
    torch.testing.assert_close(y.float(), expected, rtol=0, atol=TOLERANCE[dtype] * scale * 4)


def test_linears_the_cost_model_keeps_dense_run_in_torch_with_pruned_weights() -> None:
    """By default (our kernels measured slower than cuBLAS) no linear is
    replaced: the graph is torch's F.linear on the pruned weights."""
    model = ffn(torch.float16)
    x = torch.randn(64, 128, dtype=torch.float16)
    fn = sm.compile(model, {"0.weight": sm.NM(2, 4)}, (x,), target="cuda")
    (entry,) = fn.sparsity_plan()
    assert entry.stored_as.startswith("dense, cuBLAS through torch") and "cost model" in entry.stored_as
    assert fn.kernels() == [] and fn.ir("ptx") == ""

    def no_launch(launch: Mapping[str, Any], buffers: Mapping[str, torch.Tensor]) -> None:
        raise AssertionError("no kernel should run")

    y = fn.executor(no_launch)(x)
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    with torch.no_grad():
        torch.testing.assert_close(y, model(x))
    w = fn.effective_state_dict()["0.weight"].reshape(256, -1, 4)
    assert int((w != 0).sum(-1).max()) <= 2


def test_one_linear_on_its_kernel_the_other_dense() -> None:
    from sparse_mlir.compiler.cuda import compile_cuda

    model = ffn(torch.bfloat16)
    x = torch.randn(64, 128, dtype=torch.bfloat16)
    fn = compile_cuda(model, {"2.weight": sm.NM(2, 4)}, (x,), cost_model=False)
    launcher = ReferenceLauncher(32)
    y = fn.executor(launcher)(x)
    (kernel,) = launcher.kernels
    assert kernel == fn.kernels()[0].kernel and fn.kernels()[0].tensor == "2.weight"
    expected = eager(model, fn.effective_state_dict(), x)
    scale = float(expected.abs().max())
    torch.testing.assert_close(y.float(), expected, rtol=0, atol=TOLERANCE[torch.bfloat16] * scale * 4)


def test_a_kernel_refuses_another_shape() -> None:
    from sparse_mlir.compiler.cuda import compile_cuda
    from sparse_mlir.runtime.cuda.graph import NM24Linear

    x = torch.randn(64, 128, dtype=torch.float16)
    fn = compile_cuda(ffn(torch.float16), {"0.weight": sm.NM(2, 4)}, (x,), cost_model=False)
    executor = fn.executor(ReferenceLauncher(32))
    (linear,) = [m for m in executor._module.modules() if isinstance(m, NM24Linear)]
    with pytest.raises(sm.SpecError, match=r"compiled for x of 64 x 128 \(tokens x in-features\), got \(32, 128\)"):
        linear(torch.randn(32, 128, dtype=torch.float16), torch.zeros(256, dtype=torch.float16))


def test_saved_kernels_run_the_graph_rebuilt_with_torch_alone(tmp_path) -> None:
    """The GPU-machine flow (benchmarks/gpu_models.py): kernels saved where
    the compiler is, the model exported again with torch, the graph built
    from the two."""
    from sparse_mlir.compiler.cuda import compile_cuda
    from sparse_mlir.runtime.cuda.graph import GraphExecutor, load_kernels
    from sparse_mlir.compiler.importers.torch_fx import export_program

    model = ffn(torch.float16)
    x = torch.randn(64, 128, dtype=torch.float16)
    fn = compile_cuda(model, {"0.weight": sm.NM(2, 4), "2.weight": sm.NM(2, 4)}, (x,), cost_model=False)
    kernels, ptx = load_kernels(fn.save_kernels(tmp_path / "graph"))
    assert ptx == fn.ir("ptx") and set(kernels) == {"0.weight", "2.weight"}
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    program, names, params = export_program(model, (x,))
    launcher = ReferenceLauncher(32)
    y = GraphExecutor(program, names, dict(zip(names, params)), kernels, launcher)(x)
    expected = fn.executor(ReferenceLauncher(32))(x)
    torch.testing.assert_close(y, expected, rtol=0, atol=0)
    assert len(launcher.kernels) == 2


class SharedWeight(torch.nn.Module):
    """One 2:4 weight read by two linears of different shapes and epilogues."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(128, 128)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)                                           # 128 tokens, with the bias
        y = torch.nn.functional.linear(h[:64].relu(), self.fc.weight)   # 64 tokens, no bias
        return torch.cat([y, h[64:]])


def test_a_weight_read_by_two_linears_runs_each_on_its_own_kernel() -> None:
    from sparse_mlir.compiler.cuda import compile_cuda

    model = SharedWeight().half()
    x = torch.randn(128, 128, dtype=torch.float16)
    fn = compile_cuda(model, {"fc.weight": sm.NM(2, 4)}, (x,), cost_model=False)
    first, second = fn.kernels()
    assert first.kernel.endswith("128x128x128_bias_f16") and second.kernel.endswith("64x128x128_f16")
    launcher = ReferenceLauncher(32)
    y = fn.executor(launcher)(x)
    assert launcher.kernels == [first.kernel, second.kernel]
    expected = eager(model, fn.effective_state_dict(), x)
    torch.testing.assert_close(y.float(), expected, rtol=0, atol=TOLERANCE[torch.float16] * float(expected.abs().max()) * 4)


def test_a_weight_with_a_reader_that_is_not_a_linear_stays_on_cublas() -> None:
    class AlsoSummed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(128, 128)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x) + self.fc.weight.abs().sum()

    x = torch.randn(64, 128, dtype=torch.float16)
    fn = sm.compile(AlsoSummed().half(), {"fc.weight": sm.NM(2, 4)}, (x,), target="cuda", cost_model=False)
    (entry,) = fn.sparsity_plan()
    assert fn.kernels() == [] and "not read only as x @ W^T by F.linears" in entry.stored_as


def test_kernels_and_graph_that_disagree_are_errors() -> None:
    """Kernels saved for another model: too few or too many launches for a weight's linears."""
    from sparse_mlir.compiler.cuda import compile_cuda
    from sparse_mlir.runtime.cuda.graph import GraphExecutor

    model = SharedWeight().half()
    x = torch.randn(128, 128, dtype=torch.float16)
    fn = compile_cuda(model, {"fc.weight": sm.NM(2, 4)}, (x,), cost_model=False)
    program, names, params = fn._graph
    (launches, values, metadata), = fn._kernels().values()
    with pytest.raises(sm.SpecError, match=r"fc.weight: read by more F.linears than it has kernels \(1\)"):
        GraphExecutor(program, names, params, {"fc.weight": (launches[:1], values, metadata)}, ReferenceLauncher(32))
    with pytest.raises(sm.SpecError, match=r"kernels without an F.linear to run them .*\{'fc.weight': 2\}"):
        GraphExecutor(program, names, params, {"fc.weight": (launches * 2, values, metadata)}, ReferenceLauncher(32))
