"""2:4 linears on sparse tensor cores: compile(..., target="cuda") against
torch dense (cuBLAS) and torch.sparse.to_sparse_semi_structured (cuSPARSELt /
CUTLASS), f16 and bf16, on an sm_80+ GPU.

    python benchmarks/gpu_nm.py [--repeat 50] [--out benchmarks/results/gpu_nm.json]

Our compiled function takes and returns host tensors: its time includes
copying x to the device and y back (the weights are uploaded once), which
torch's device-resident timings do not. `ours_estimated_kernel_s` subtracts
the time of the same two copies done by torch (an estimate, not a profile). Without a GPU the script says why and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

import sparse_mlir as sm
from sparse_mlir.cuda import CudaUnavailableError
from sparse_mlir.cuda.driver import require_device

# (tokens, in, out): BERT-base FFN up/down at 1024 tokens, a square 4096, decode-ish 64 tokens.
SHAPES = [(1024, 768, 3072), (1024, 3072, 768), (4096, 4096, 4096), (64, 4096, 4096)]


def cuda_time(fn, repeat: int) -> float:
    """Median seconds of `fn()` with the device synchronized around each call."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


def bench_shape(tokens: int, depth: int, rows: int, dtype: torch.dtype, repeat: int) -> dict:
    torch.manual_seed(0)
    model = torch.nn.Linear(depth, rows, bias=False).to(dtype)
    x = torch.randn(tokens, depth, dtype=dtype)
    fn = sm.compile(model, {"weight": sm.NM(2, 4)}, (x,), target="cuda", cost_model=False)
    weight = fn.effective_state_dict()["weight"].cuda()
    x_dev = x.cuda()
    result = {"tokens": tokens, "in": depth, "out": rows, "dtype": str(dtype).removeprefix("torch.")}
    result["torch_dense_s"] = cuda_time(lambda: torch.nn.functional.linear(x_dev, weight), repeat)
    try:
        semi = torch.sparse.to_sparse_semi_structured(weight)
        result["torch_semi_structured_s"] = cuda_time(lambda: torch.nn.functional.linear(x_dev, semi), repeat)
    except (RuntimeError, ValueError) as error:  # shape or dtype torch does not support
        result["torch_semi_structured_s"] = None
        result["torch_semi_structured_error"] = str(error)[:200]
    result["ours_with_copies_s"] = cuda_time(lambda: fn(x), repeat)
    y_dev = torch.empty(tokens, rows, dtype=torch.float32, device="cuda")

    def copies() -> None:  # what our host code copies per call: x in, the f32 y out
        x.cuda()
        y_dev.cpu()

    result["copies_only_s"] = cuda_time(copies, repeat)
    result["ours_estimated_kernel_s"] = max(result["ours_with_copies_s"] - result["copies_only_s"], 0.0)
    expected = torch.nn.functional.linear(x_dev.float(), weight.float()).cpu()
    result["max_abs_error"] = float((fn(x).float() - expected).abs().max())
    result["plan"] = str(fn.sparsity_plan()[0])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "gpu_nm.json")
    args = parser.parse_args()
    try:
        require_device()
    except CudaUnavailableError as error:
        print(f"gpu_nm: cannot run: {error}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpu_nm: cannot run: this torch build has no CUDA (install a CUDA build of torch)", file=sys.stderr)
        return 2
    rows = [bench_shape(t, k, n, dtype, args.repeat) for dtype in (torch.float16, torch.bfloat16)
            for t, k, n in SHAPES]
    for r in rows:
        semi = r["torch_semi_structured_s"]
        print(f"{r['dtype']:8} {r['tokens']:5}x{r['in']:5}->{r['out']:5}  dense {r['torch_dense_s'] * 1e3:8.3f} ms  "
              f"semi-structured {semi * 1e3 if semi else float('nan'):8.3f} ms  ours {r['ours_with_copies_s'] * 1e3:8.3f} "
              f"ms (kernel ~{r['ours_estimated_kernel_s'] * 1e3:.3f} ms)  max|err| {r['max_abs_error']:.3g}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "machine": platform.node(),
                                    "torch": torch.__version__, "results": rows}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
