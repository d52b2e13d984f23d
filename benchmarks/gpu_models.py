"""Whole target="cuda" models, compiled and exported on one machine (no GPU
needed) and run on a GPU machine without the compiler, two ways: from their
artifacts (host code), and as the torch graph a call runs in process
(`sparse_mlir.runtime.cuda.graph`: the model re-exported there with torch, its 2:4
linears on the prepared kernels). Numerics against eager PyTorch on the
same pruned weights, call time against eager PyTorch on the GPU.

    python benchmarks/gpu_models.py prepare DIR    # compiler: artifacts, kernels + the models' weights and inputs
    python benchmarks/gpu_models.py run DIR [--out benchmarks/results/gpu_models.json]   # GPU, no compiler

An artifact's call takes and returns host-side copies (the host code copies
x in and y out per 2:4 linear, and runs biases and activations on the CPU);
the graph keeps everything on the device. Both are end-to-end call times,
not kernel times (benchmarks/gpu_nm.py has those).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import zlib
from pathlib import Path
from typing import Callable

import torch

# name -> (model builder, input shape, dtype, compile options)
MODELS: dict[str, tuple[Callable[[], torch.nn.Module], tuple[int, ...], torch.dtype, dict]] = {
    "ffn_f16": (lambda: torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 128)),
                (2, 64, 256), torch.float16, {}),
    "ffn_f16_k16": (lambda: torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                                                torch.nn.Linear(512, 128)),
                    (2, 64, 256), torch.float16, {"mma_k": 16}),
    "ffn_bf16": (lambda: torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                             torch.nn.Linear(512, 256, bias=False)),
                 (128, 256), torch.bfloat16, {}),
    "bert_base_ffn_f16": (lambda: torch.nn.Sequential(torch.nn.Linear(768, 3072), torch.nn.GELU(),
                                                      torch.nn.Linear(3072, 768)),
                          (8, 128, 768), torch.float16, {}),
    "linear_2048x1024x4096_bf16": (lambda: torch.nn.Linear(1024, 4096, bias=False), (2048, 1024), torch.bfloat16, {}),
}
# f32 accumulation in both; the difference is the rounding of f16/bf16 outputs
# and intermediates (relative to the output's largest magnitude).
TOLERANCE = {torch.float16: 8e-3, torch.bfloat16: 6.4e-2}


def build(name: str) -> tuple[torch.nn.Module, torch.Tensor]:
    builder, shape, dtype, _ = MODELS[name]
    torch.manual_seed(zlib.crc32(name.encode()))
    model = builder().to(dtype)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(7)).to(dtype)
    return model, x


def prepare(directory: Path) -> None:
    import sparse_mlir as sm
    from sparse_mlir.compiler.cuda import compile_cuda

    directory.mkdir(parents=True, exist_ok=True)
    for name, (_, _, _, options) in MODELS.items():
        model, x = build(name)
        encodings = {n: sm.NM(2, 4) for n, p in model.named_parameters() if p.dim() == 2}
        fn = compile_cuda(model, encodings, (x,), cost_model=False, **options)
        fn.export(directory / name)
        fn.save_kernels(directory / name / "graph")
        state = {**model.state_dict(), **fn.effective_state_dict()}   # biases too, and the pruned weights
        torch.save({"state": state, "x": x}, directory / name / "check.pt")
        print(f"prepared {name}: {[p.stored_as for p in fn.sparsity_plan()]} ({fn.compile_seconds:.2f} s)", flush=True)


def graph_executor(model: torch.nn.Module, x: torch.Tensor, kernels_dir: Path) -> Callable[[torch.Tensor], torch.Tensor]:
    """The torch graph a compiled model's call runs, rebuilt here with torch
    alone: the model exported on this machine, its 2:4 linears on the
    kernels prepared by the compiler."""
    from sparse_mlir.runtime.cuda.graph import GraphExecutor, load_kernels
    from sparse_mlir.runtime.cuda.launch import PtxModule
    from sparse_mlir.compiler.importers.torch_fx import export_program

    kernels, ptx = load_kernels(kernels_dir)
    module = PtxModule(ptx)
    program, names, params = export_program(model, (x,))
    return GraphExecutor(program, names, dict(zip(names, params)), kernels, module.launch)


def median_time(fn: Callable[[], object], rounds: int) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(directory: Path, out: Path, rounds: int, only: str | None = None) -> int:
    import sparse_mlir as sm

    torch.backends.cuda.matmul.allow_tf32 = False
    rows, ok = [], True
    for name in MODELS:
        if only and only not in name:
            continue
        model, _ = build(name)
        check = torch.load(directory / name / "check.pt")
        model.load_state_dict(check["state"])
        x = check["x"]
        loaded = sm.load(directory / name)
        reference = model.float().cuda()(x.float().cuda())
        y = loaded(x.cuda())
        scale = float(reference.abs().max())
        error = float((y.float() - reference).abs().max())
        good = y.device.type == "cuda" and y.dtype == x.dtype and error <= TOLERANCE[x.dtype] * scale
        ok &= good
        model = model.to(x.dtype)
        x_dev = x.cuda()
        graph = graph_executor(model, x_dev, directory / name / "graph")
        y_graph = graph(x_dev)
        graph_error = float((y_graph.float() - reference).abs().max())
        graph_good = y_graph.dtype == x.dtype and graph_error <= TOLERANCE[x.dtype] * scale
        ok &= graph_good
        eager = median_time(lambda: model(x_dev), rounds)
        ours = median_time(lambda: loaded(x_dev), rounds)
        ours_graph = median_time(lambda: graph(x_dev), rounds)
        rows.append({"model": name, "input": list(x.shape), "dtype": str(x.dtype).removeprefix("torch."),
                     "max_abs_error": error, "reference_scale": scale, "ok": good,
                     "graph_max_abs_error": graph_error, "graph_ok": graph_good,
                     "ours_call_s": ours, "graph_call_s": ours_graph, "eager_gpu_s": eager,
                     "kernels": loaded.manifest["cuda"]["kernels"]})
        print(f"{name:28} err {error:.2e} / {scale:.2f} {'ok' if good else 'WRONG'}, graph {graph_error:.2e} "
              f"{'ok' if graph_good else 'WRONG'} | artifact {ours * 1e3:8.3f} ms (host copies + host ops) | "
              f"graph {ours_graph * 1e3:8.3f} ms | eager GPU {eager * 1e3:8.3f} ms", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                               "rounds": rounds, "results": rows}, indent=2))
    print(f"wrote {out}")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("prepare", "run"))
    parser.add_argument("directory", type=Path)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "gpu_models.json")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--only", help="run: the models whose name contains this")
    args = parser.parse_args()
    if args.mode == "prepare":
        prepare(args.directory)
        return 0
    return run(args.directory, args.out, args.rounds, args.only)


if __name__ == "__main__":
    sys.exit(main())
