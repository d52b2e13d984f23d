"""On an sm_80+ GPU: compiled 2:4 linears against eager PyTorch on the same
pruned weights (skipped, with the driver check's reason, elsewhere)."""

from __future__ import annotations

import pytest
import torch

import sparse_mlir as sm

pytestmark = [pytest.mark.cuda, pytest.mark.usefixtures("cuda_device")]

# f32 accumulation in both; the difference is rounding of the f16/bf16 output
# and the summation order (tolerances relative to the output's scale).
TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def reference(model: torch.nn.Module, effective: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    model.load_state_dict(effective, strict=False)
    return model.float()(x.float())


@pytest.mark.parametrize("mma_k", [16, 32])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_2_4_ffn_matches_eager(dtype: torch.dtype, mma_k: int) -> None:
    from sparse_mlir.compiler.cuda import compile_cuda

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                                torch.nn.Linear(512, 128)).to(dtype)
    x = torch.randn(2, 64, 256, dtype=dtype)
    fn = compile_cuda(model, {"0.weight": sm.NM(2, 4), "2.weight": sm.NM(2, 4)}, (x,), cost_model=False,
                      mma_k=mma_k)
    assert all("sparse tensor cores" in p.stored_as for p in fn.sparsity_plan())
    y = fn(x)
    expected = reference(model, fn.effective_state_dict(), x)
    assert y.dtype == dtype and y.shape == expected.shape
    scale = float(expected.abs().max())
    torch.testing.assert_close(y.float(), expected, rtol=0, atol=TOLERANCE[dtype] * scale * 4)
    # A second call reuses the uploaded weights and gives the same result.
    torch.testing.assert_close(fn(x), y, rtol=0, atol=0)


def test_large_linear_matches_eager() -> None:
    torch.manual_seed(1)
    model = torch.nn.Linear(768, 3072, bias=False).half()
    x = torch.randn(1024, 768, dtype=torch.float16)
    fn = sm.compile(model, {"weight": sm.NM(2, 4)}, (x,), target="cuda", cost_model=False)
    (entry,) = fn.sparsity_plan()
    assert "sparse tensor cores" in entry.stored_as
    expected = reference(model, fn.effective_state_dict(), x)
    torch.testing.assert_close(fn(x).float(), expected, rtol=0,
                               atol=TOLERANCE[torch.float16] * float(expected.abs().max()) * 4)


def test_torch_graph_and_host_code_agree_and_inputs_stay_on_their_device() -> None:
    """A call runs the torch graph on the GPU (kernels on CUDA tensors); the
    host code that export() ships computes the same."""
    from sparse_mlir.compiler.cuda import compile_cuda

    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256)).half()
    x = torch.randn(128, 256, dtype=torch.float16)
    fn = compile_cuda(model, {"0.weight": sm.NM(2, 4), "2.weight": sm.NM(2, 4)}, (x,), cost_model=False)
    y_cuda = fn(x.cuda())
    assert y_cuda.is_cuda
    y_host = fn.run_host_code([x])
    scale = float(y_host.float().abs().max())
    torch.testing.assert_close(y_cuda.cpu().float(), y_host.float(), rtol=0,
                               atol=TOLERANCE[torch.float16] * scale * 4)
