"""2:4 sparse tensor-core kernels of compile(..., target="cuda") against torch
dense (cuBLAS) and torch.sparse.to_sparse_semi_structured (cuSPARSELt),
f16 and bf16, on an sm_80+ GPU, with every result checked against an fp32
reference on the same pruned weight.

    python benchmarks/gpu_nm.py prepare KERNELS_DIR      # compiler, no GPU needed: PTX + launch specs
    python benchmarks/gpu_nm.py run KERNELS_DIR [--out benchmarks/results/gpu_nm.json]   # GPU, no compiler
    python benchmarks/gpu_nm.py all                      # both, on a machine with the compiler and a GPU
    python benchmarks/gpu_nm.py table [--out ...]        # the markdown table of a run's JSON
    python benchmarks/gpu_nm.py ptxas [--arch sm_90]     # no GPU: registers, spills and shared memory
                                                         # per kernel from the CUDA toolkit's ptxas

`run` generates each weight on the spot (seeded), prunes it 2:4 by
magnitude, packs it with `sparse_mlir.runtime.cuda.nm24.compress` (the layout the
compiler's kernels read) and launches the compiled PTX through the driver
(`sparse_mlir.runtime.cuda.launch`) on device tensors, on torch's stream: kernel time
only, as for torch's rows. Times are CUDA-event medians of `--rounds` rounds
of `--batch` back-to-back calls after warm-up. Like torch's, our kernels
write y in f16/bf16 (the linear's truncation fused into their epilogue).
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

# (tokens, in, out): the large GEMMs, BERT-base and -large FFNs, ViT-L MLP, a small decode batch.
SHAPES = [(4096, 4096, 4096), (8192, 4096, 4096), (16384, 4096, 4096),
          (1024, 768, 3072), (1024, 3072, 768), (4096, 1024, 4096), (4096, 4096, 1024),
          (8192, 1024, 4096), (8192, 4096, 1024), (64, 4096, 4096)]
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
MMA_K = (16, 32)
SPEC_FILE = "kernels.json"


def prepare(directory: Path, shapes: list[tuple[int, int, int]], mma_ks: tuple[int, ...],
            tiles: tuple[tuple[int, int], ...] | None = None, dtypes: tuple[str, ...] = tuple(DTYPES)
            ) -> list[dict[str, Any]]:
    """Compiles one linear per shape, dtype and mma_k; writes its PTX and launch spec."""
    import sparse_mlir as sm
    from sparse_mlir.compiler.cuda import compile_cuda

    directory.mkdir(parents=True, exist_ok=True)
    specs = []
    for dtype_name in dtypes:
        dtype = DTYPES[dtype_name]
        for mma_k, (tokens, depth, rows), tile in itertools.product(mma_ks, shapes, tiles or (None,)):
            model = torch.nn.Linear(depth, rows, bias=False).to(dtype)
            x = torch.zeros(tokens, depth, dtype=dtype)
            options = {"tile": tile[:2], "warp_tokens": tile[2], "pipeline_stages": tile[3]} if tile else {}
            fn = compile_cuda(model, {"weight": sm.NM(2, 4)}, (x,), cost_model=False, mma_k=mma_k, **options)
            (launch,) = fn.kernels()
            name = f"{dtype_name}_k{mma_k}_{tokens}x{depth}x{rows}" + (f"_t{tile[0]}x{tile[1]}w{tile[2]}s{tile[3]}" if tile else "")
            (directory / f"{name}.ptx").write_text(fn.ir("ptx"))
            specs.append({"name": name, "tokens": tokens, "in": depth, "out": rows, "dtype": dtype_name,
                          "mma_k": mma_k, "ptx": f"{name}.ptx", "launch": launch.to_json(),
                          "compile_s": fn.compile_seconds})
            print(f"prepared {name} ({fn.compile_seconds:.2f} s)", flush=True)
    (directory / SPEC_FILE).write_text(json.dumps(specs, indent=1))
    return specs


def prune_2_4(w: torch.Tensor) -> torch.Tensor:
    """`w` with the two largest |w| of every group of four along rows kept."""
    groups = w.reshape(w.shape[0], -1, 4)
    keep = torch.zeros_like(groups, dtype=torch.bool).scatter_(-1, groups.abs().float().topk(2, dim=-1).indices, True)
    return torch.where(keep, groups, torch.zeros((), dtype=w.dtype)).reshape(w.shape)


def event_time(fn: Callable[[], Any], batch: int, rounds: int) -> float:
    """Median seconds per call: CUDA events around `batch` back-to-back calls, `rounds` times."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / batch)
    return statistics.median(times)


def run_spec(spec: dict[str, Any], directory: Path, modules: dict[str, Any], batch: int, rounds: int) -> dict:
    from sparse_mlir.runtime.cuda.launch import TORCH_DTYPES, PtxModule
    from sparse_mlir.runtime.cuda.nm24 import compress

    dtype = DTYPES[spec["dtype"]]
    tokens, depth, rows = spec["tokens"], spec["in"], spec["out"]
    generator = torch.Generator().manual_seed(tokens * 7 + depth * 3 + rows)
    weight = prune_2_4(torch.randn(rows, depth, generator=generator).to(dtype))
    x = torch.randn(tokens, depth, generator=generator).to(dtype).cuda()
    values, metadata = compress(weight.view(torch.int16).numpy(), spec["mma_k"], "weight")
    launch = spec["launch"]
    (y_element,) = [a["element"] for a in launch["arguments"] if a["role"] == "y"]
    buffers = {"nm24_values": torch.from_numpy(values).view(dtype).cuda(),
               "nm24_metadata": torch.from_numpy(metadata).cuda(),
               "x": x, "y": torch.full((tokens, rows), float("nan"), device="cuda", dtype=TORCH_DTYPES[y_element])}
    if spec["ptx"] not in modules:
        modules[spec["ptx"]] = PtxModule((directory / spec["ptx"]).read_text())
    module = modules[spec["ptx"]]
    module.launch(launch, buffers)
    torch.cuda.synchronize()
    w_dev = weight.cuda()
    expected = x.float() @ w_dev.float().T   # fp32 (TF32 off), same pruned weight
    error = float((buffers["y"].float() - expected).abs().max())
    scale = float(expected.abs().max())
    # f32 accumulation in both (summation order), then the rounding of y to its element type.
    rounding = {"f32": 0.0, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}[y_element]
    flops = 2 * tokens * depth * rows
    result = {k: spec[k] for k in ("name", "tokens", "in", "out", "dtype", "mma_k")}
    result.update(max_abs_error=error, reference_scale=scale,
                  ok=bool(np.isfinite(error) and error <= scale * (rounding + 1e-5 * max(1.0, depth / 256))))
    result["ours_s"] = event_time(lambda: module.launch(launch, buffers), batch, rounds)
    result["torch_dense_s"] = event_time(lambda: torch.nn.functional.linear(x, w_dev), batch, rounds)
    try:
        semi = torch.sparse.to_sparse_semi_structured(w_dev)
        result["torch_semi_structured_s"] = event_time(lambda: torch.nn.functional.linear(x, semi), batch, rounds)
    except (RuntimeError, ValueError, NotImplementedError) as error_:  # shapes or dtypes torch rejects
        result["torch_semi_structured_s"] = None
        result["torch_semi_structured_error"] = str(error_)[:300]
    for key in ("ours", "torch_dense", "torch_semi_structured"):
        seconds = result[f"{key}_s"]
        result[f"{key}_tflops"] = flops / seconds / 1e12 if seconds else None
    result["speedup_vs_dense"] = result["torch_dense_s"] / result["ours_s"]
    if result["torch_semi_structured_s"]:
        result["speedup_vs_semi_structured"] = result["torch_semi_structured_s"] / result["ours_s"]
    return result


def run(directory: Path, out: Path, batch: int, rounds: int, only: str | None) -> int:
    from sparse_mlir.runtime.cuda.driver import CudaUnavailableError, require_device

    try:
        require_device()
    except CudaUnavailableError as error:
        print(f"gpu_nm: cannot run: {error}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpu_nm: cannot run: this torch build has no CUDA", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    specs = json.loads((directory / SPEC_FILE).read_text())
    modules: dict[str, Any] = {}
    rows = []
    for spec in specs:
        if only and only not in spec["name"]:
            continue
        r = run_spec(spec, directory, modules, batch, rounds)
        rows.append(r)
        semi = r["torch_semi_structured_s"]
        print(f"{r['name']:32} ours {r['ours_s'] * 1e3:8.3f} ms {r['ours_tflops']:6.1f} TF/s | dense "
              f"{r['torch_dense_s'] * 1e3:8.3f} ms {r['torch_dense_tflops']:6.1f} | semi "
              f"{semi * 1e3 if semi else float('nan'):8.3f} ms | x{r['speedup_vs_dense']:.2f} dense "
              f"| err {r['max_abs_error']:.2e} / {r['reference_scale']:.1f} {'ok' if r['ok'] else 'WRONG'}",
              flush=True)
    props = torch.cuda.get_device_properties(0)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {"device": props.name, "multiprocessors": props.multi_processor_count,
              "capability": list(torch.cuda.get_device_capability()), "torch": torch.__version__,
              "cuda": torch.version.cuda, "machine": platform.node(), "batch": batch, "rounds": rounds,
              "results": rows}
    out.write_text(json.dumps(report, indent=2))
    out.with_suffix(".md").write_text(markdown(report))
    print(f"wrote {out} and {out.with_suffix('.md')}")
    return 0 if all(r["ok"] for r in rows) else 1


def markdown(report: dict[str, Any]) -> str:
    """The results as a markdown table (ratios > 1: ours faster)."""
    lines = [f"2:4 linears on {report['device']} (torch {report['torch']}, CUDA {report['cuda']}): kernel time, "
             f"CUDA-event medians of {report['rounds']} rounds of {report['batch']} calls. TF/s counts the dense "
             "2 T K N flops. vs dense: cuBLAS time / ours; vs semi: torch.sparse.to_sparse_semi_structured "
             "(cuSPARSELt) time / ours. Every result checked against an fp32 reference on the same pruned weight.",
             "", "| dtype | mma | T x K -> N | ours ms | ours TF/s | cuBLAS ms | cuBLAS TF/s | semi ms | vs dense "
             "| vs semi | max abs err / scale |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["results"]:
        semi = r["torch_semi_structured_s"]
        semi_ms = f"{semi * 1e3:.3f}" if semi else "n/a"
        vs_semi = f"{r['speedup_vs_semi_structured']:.2f}x" if semi else "n/a"
        lines.append(f"| {r['dtype']} | k{r['mma_k']} | {r['tokens']} x {r['in']} -> {r['out']} | "
                     f"{r['ours_s'] * 1e3:.3f} | {r['ours_tflops']:.0f} | {r['torch_dense_s'] * 1e3:.3f} | "
                     f"{r['torch_dense_tflops']:.0f} | {semi_ms} | {r['speedup_vs_dense']:.2f}x | {vs_semi} | "
                     f"{r['max_abs_error']:.1e} / {r['reference_scale']:.0f} |")
    return "\n".join(lines) + "\n"


def ptxas_report(directory: Path, specs: list[dict[str, Any]], arch: str) -> int:
    """`ptxas -v` on each prepared kernel: what limits its occupancy, no GPU needed
    (254 registers for the default 64 x 64 warp tile: ncu measured the same on an H100)."""
    import re
    import shutil
    import subprocess

    ptxas = shutil.which("ptxas")
    if ptxas is None:
        print("ptxas not found: it comes with the CUDA toolkit (nvcc); put it on PATH", file=sys.stderr)
        return 2
    for spec in specs:
        result = subprocess.run([ptxas, f"-arch={arch}", "-v", str(directory / spec["ptx"]), "-o", "/dev/null"],
                                capture_output=True, text=True)
        if result.returncode != 0:
            print(f"{spec['name']}: ptxas failed:\n{result.stderr[-2000:]}", file=sys.stderr)
            return 1
        info = " ".join(result.stderr.split())
        registers = re.search(r"Used (\d+) registers", info)
        spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", info)
        smem = re.search(r"(\d+) bytes smem", info)
        print(f"{spec['name']:48} {arch}: {registers.group(1) if registers else '?'} registers, "
              f"spills {spills.group(1) if spills else '?'}/{spills.group(2) if spills else '?'} bytes "
              f"(stores/loads), {smem.group(1) if smem else '0'} bytes shared, block {spec['launch']['block']}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("prepare", "run", "all", "table", "ptxas"))
    parser.add_argument("directory", type=Path, nargs="?")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "gpu_nm.json")
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", help="run the kernels whose name contains this")
    parser.add_argument("--mma-k", type=int, nargs="+", default=list(MMA_K))
    parser.add_argument("--tiles", nargs="+", help="prepare: kernel variants to compare, as ROWSxTOKENSxWARP_TOKENSxSTAGES "
                        "(block tile, tokens per warp, shared-memory stages)")
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=list(DTYPES))
    parser.add_argument("--shapes", nargs="+", help="prepare: TOKENSxINxOUT shapes instead of the suite's")
    parser.add_argument("--arch", default="sm_90", help="ptxas: the GPU architecture to assemble for")
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes] if args.shapes else SHAPES
    tiles = tuple(tuple(int(v) for v in t.split("x")) for t in args.tiles) if args.tiles else None
    if args.mode == "prepare":
        prepare(args.directory, shapes, tuple(args.mma_k), tiles, tuple(args.dtypes))
        return 0
    if args.mode == "table":   # the markdown table of an earlier run's JSON (--out)
        args.out.with_suffix(".md").write_text(markdown(json.loads(args.out.read_text())))
        return 0
    if args.mode == "run":
        return run(args.directory, args.out, args.batch, args.rounds, args.only)
    if args.mode == "ptxas":
        with tempfile.TemporaryDirectory() as scratch:
            specs = prepare(Path(scratch), shapes, tuple(args.mma_k), tiles, tuple(args.dtypes))
            return ptxas_report(Path(scratch), specs, args.arch)
    with tempfile.TemporaryDirectory() as scratch:
        prepare(Path(scratch), shapes, tuple(args.mma_k), tiles, tuple(args.dtypes))
        return run(Path(scratch), args.out, args.batch, args.rounds, args.only)


if __name__ == "__main__":
    sys.exit(main())
