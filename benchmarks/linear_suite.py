"""Sparse linear layers on the CPU: sparse_mlir against torch and scipy.

One process, one thread count at a time for everyone (torch, libomp for
sparse_mlir; scipy's sparse @ dense is single-threaded whatever the count),
medians of --repeats runs (more for calls under ~40 ms: ~0.3 s of them) after a warm-up, the lower
of two passes' (interleaved with eager for the BERT layer).
For every shape and sparsity the same pruned weight goes to

- torch dense    F.linear(x, W)                       (MKL)
- torch CSR mm   torch.sparse.mm(W_csr, x.T).T
- torch CSR lin  F.linear(x, W_csr)
- scipy CSR      (W_csr @ x.T).T
- sparse_mlir    sm.compile(Linear, {"weight": CSR | NM(n, m[, rows=4])}) (the
                 compiler's cost model may store it densely: reported)

speedup = torch dense time / implementation time. Every compiled result is
checked against eager on the same weights before it is timed. Writes
results/linear_suite.{json,md,png} and prints the machine.

    .venv/bin/python benchmarks/linear_suite.py            # full suite
    .venv/bin/python benchmarks/linear_suite.py --quick    # 2 sparsities, 1 shape
    .venv/bin/python benchmarks/linear_suite.py --bert-only  # re-measure the BERT
                     # rows; the single-linear rows of the existing JSON are kept
    .venv/bin/python benchmarks/linear_suite.py --dtypes bfloat16 float16
                     # half precision (mode="regions"): 90% CSR and 2:4 on the
                     # single-linear shapes against eager torch in the same
                     # dtype and in f32; writes results/linear_suite_half.{json,md}
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import scipy.sparse
import torch
import torch.nn.functional as F

import sparse_mlir as sm
from sparse_mlir.runtime.cpu import cpu_model, host_isa_flags, vector_lanes
from sparse_mlir.models import BertLayer
from sparse_mlir.testing import write_results

RESULTS = Path(__file__).resolve().parent / "results"

# (label, encoding factory, nominal sparsity)
UNSTRUCTURED = [(f"{s}%", (lambda s=s: sm.CSR(sparsifier=sm.ScalarFraction(s / 100))), s / 100)
                for s in (50, 60, 70, 80, 90, 95)]
STRUCTURED = [(f"{n}:{m}", (lambda n=n, m=m: sm.NM(n, m)), 1 - n / m)
              for n, m in ((2, 4), (2, 5), (1, 4), (2, 8), (1, 10))]
# STen's grouped n:m: 4 weight rows share one pattern (a different pruning:
# each group keeps the positions of largest summed |w| over its rows).
SHARED_ROWS = [(f"{n}:{m} (4 rows)", (lambda n=n, m=m: sm.NM(n, m, rows=4)), 1 - n / m)
               for n, m in ((2, 4), (1, 4))]
LINEAR_SHAPES = [("FFN up M=1024", 1024, 768, 3072), ("FFN down M=1024", 1024, 3072, 768),
                 ("decode M=1", 1, 768, 3072)]


@dataclass
class Row:
    shape: str
    m: int
    k: int
    n: int
    threads: int
    sparsity: str
    density: float
    stored_as: str
    ms: dict[str, float] = field(default_factory=dict)
    speedup: dict[str, float] = field(default_factory=dict)
    compile_s: float = 0.0
    max_error: float = 0.0


def median_ms(impls: dict[str, Callable[[], object]], repeats: int, interleave: bool) -> dict[str, float]:
    """Median ms per implementation after two warm-up calls.

    interleave=False: each implementation's runs back to back (its weight
    stays in cache: a linear's steady state), at least ~0.3 s of them for
    short calls, in two passes (the lower median). interleave=True: one call of
    each per round, the order rotating, so a host whose speed drifts slows
    every implementation alike (the BERT layers, 100+ ms per call, whose
    weights do not stay cached anyway)."""
    names = list(impls)
    times: dict[str, list[float]] = {name: [] for name in names}

    def timed(name: str) -> None:
        start = time.perf_counter()
        impls[name]()
        times[name].append(time.perf_counter() - start)

    if interleave:
        for name in names:
            impls[name]()
            impls[name]()
        for round_ in range(repeats):
            for name in names[round_ % len(names):] + names[:round_ % len(names)]:
                timed(name)
    else:
        # Two passes over the implementations, each one's runs back to back;
        # an implementation's time is the lower of its two medians (every
        # implementation alike): a host hiccup during one pass (a 2-core VM
        # at 2 threads) then costs no row its figure.
        best: dict[str, float] = {}
        for _ in range(2):
            for name in names:
                times[name] = []
                impls[name]()
                start = time.perf_counter()
                impls[name]()
                once = time.perf_counter() - start
                # Short calls (decode: ~0.1 ms) get more runs, ~0.3 s of them.
                for _ in range(max(repeats, min(201, int(0.3 / max(once, 1e-6))))):
                    timed(name)
                median = statistics.median(times[name])
                best[name] = min(best.get(name, median), median)
        return {name: t * 1e3 for name, t in best.items()}
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def set_threads(threads: int) -> None:
    torch.set_num_threads(threads)
    sm.set_num_threads(threads)


def machine() -> dict[str, object]:
    flags = set(host_isa_flags())
    isa = [f for f in ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_bf16", "amx_tile")
           if f in flags]
    return {"cpu": cpu_model(), "isa": isa, "cores": os.cpu_count(), "vector_lanes": vector_lanes(),
            "torch": torch.__version__, "scipy": scipy.__version__, "sparse_mlir": sm.__version__,
            "python": platform.python_version()}


def first_compile_seconds() -> float:
    """The first compile of a process also starts the torch-mlir worker and
    warms torch.export: timed on a small linear, apart from the rows."""
    linear, x = torch.nn.Linear(64, 64, bias=False), torch.randn(8, 64)
    start = time.perf_counter()
    sm.compile(linear, {"weight": sm.NM(2, 4)}, example_args=(x,), mode="graph")
    return time.perf_counter() - start


def bench_linear(label: str, m: int, k: int, n: int, sparsity: str, make: Callable[[], sm.Encoding],
                 thread_counts: list[int], repeats: int) -> list[Row]:
    encoding = make()
    note = ""
    if isinstance(encoding, sm.NM) and k % encoding.m:
        # Groups must divide K (768 = 5 * 153.6): pad K with zero features,
        # for every implementation alike, and say so.
        k = -(-k // encoding.m) * encoding.m
        note = f" (K padded to {k})"
    torch.manual_seed(0)
    linear = torch.nn.Linear(k, n, bias=False)
    x = torch.randn(m, k)
    start = time.perf_counter()
    fn = sm.compile(linear, {"weight": encoding}, example_args=(x,), mode="graph")
    compile_s = time.perf_counter() - start
    weight = fn.effective_state_dict()["weight"]
    (entry,) = fn.sparsity_plan()
    expected = F.linear(x, weight)
    error = float((fn(x) - expected).abs().max())
    if not torch.allclose(fn(x), expected, rtol=1e-4, atol=1e-4):
        raise SystemExit(f"{label} {sparsity}: compiled result differs from eager (max |error| {error:.2e})")
    w_csr = weight.to_sparse_csr()
    w_scipy = scipy.sparse.csr_matrix(weight.numpy())
    x_np = x.numpy()
    density = float(torch.count_nonzero(weight)) / weight.numel()
    impls: dict[str, Callable[[], object]] = {
        "torch dense": lambda: F.linear(x, weight),
        "torch CSR mm": lambda: torch.sparse.mm(w_csr, x.T).T,
        "torch CSR linear": lambda: F.linear(x, w_csr),
        "scipy CSR": lambda: (w_scipy @ x_np.T).T,
        "sparse_mlir": lambda: fn(x),
    }
    rows = []
    for threads in thread_counts:
        set_threads(threads)
        row = Row(label, m, k, n, threads, sparsity + note, round(density, 4), entry.stored_as,
                  compile_s=round(compile_s, 2), max_error=error)
        row.ms = {name: round(ms, 4) for name, ms in median_ms(impls, repeats, interleave=False).items()}
        for name, ms in row.ms.items():
            row.speedup[name] = round(row.ms["torch dense"] / ms, 3)
        rows.append(row)
        print(f"  {label:16s} {row.sparsity:>4s} t={threads} {entry.stored_as:10.10s} "
              + "  ".join(f"{name} {ms:8.2f} ms" for name, ms in row.ms.items()), flush=True)
    return rows


def bench_bert(sparsity: str, make: Callable[[], sm.Encoding], thread_counts: list[int],
               repeats: int, batch: int, seq: int) -> list[Row]:
    torch.manual_seed(0)
    model = BertLayer().eval()
    encoding = make()
    if isinstance(encoding, sm.NM) and 768 % encoding.m:
        print(f"  BERT layer       {sparsity:>4s} skipped: groups of {encoding.m} do not divide 768 features")
        return []
    x = torch.randn(batch, seq, 768)
    start = time.perf_counter()
    fn = sm.compile(model, {name: make() for name in model.linear_names()}, example_args=(x,), mode="graph")
    compile_s = time.perf_counter() - start
    pruned = BertLayer().eval()
    pruned.load_state_dict({**model.state_dict(), **fn.effective_state_dict()})
    with torch.no_grad():
        expected = pruned(x)
    error = float((fn(x) - expected).abs().max())
    if error > 1e-3:
        raise SystemExit(f"BERT layer {sparsity}: compiled result differs from eager (max |error| {error:.2e})")
    stored = sorted({e.stored_as for e in fn.sparsity_plan()})
    density = statistics.mean(s.density for s in fn.stats().values())
    rows = []
    for threads in thread_counts:
        set_threads(threads)
        row = Row(f"BERT layer {batch}x{seq}", batch * seq, 768, 768, threads, sparsity, round(density, 4),
                  "/".join(stored), compile_s=round(compile_s, 2), max_error=error)
        with torch.no_grad():
            measured = median_ms({"torch dense": lambda: pruned(x), "sparse_mlir": lambda: fn(x)}, repeats,
                                 interleave=True)
        row.ms = {name: round(ms, 3) for name, ms in measured.items()}
        row.speedup = {name: round(row.ms["torch dense"] / ms, 3) for name, ms in row.ms.items()}
        rows.append(row)
        print(f"  BERT layer       {sparsity:>4s} t={threads} dense {row.ms['torch dense']:8.2f} ms  "
              f"sparse_mlir {row.ms['sparse_mlir']:8.2f} ms  compile {compile_s:.1f} s", flush=True)
    return rows


HALF_SPARSITIES = ("90%", "2:4")


def bench_half(label: str, m: int, k: int, n: int, sparsity: str, make: Callable[[], sm.Encoding],
               dtype: torch.dtype, thread_counts: list[int], repeats: int) -> list[dict]:
    """A bf16 / fp16 linear in mode="regions" on our kernel (cost_model=False:
    the cost model would keep torch's where ours is not faster; the ratio
    says which), against eager F.linear in the dtype and in f32 on the same
    pruned weight. Checked first: ours as close to the f32 result as eager
    in the dtype (twice its largest error plus 2 ulps of the dtype)."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(k, n, bias=False).to(dtype)
    x = torch.randn(m, k, dtype=dtype)
    start = time.perf_counter()
    fn = sm.compile(linear, {"weight": make()}, example_args=(x,), mode="regions", cost_model=False)
    compile_s = time.perf_counter() - start
    (region,) = fn.regions()
    weight = fn.effective_state_dict()["weight"]
    x32, weight32 = x.float(), weight.float()
    with torch.no_grad():
        reference, ours, eager = F.linear(x32, weight32), fn(x).float(), F.linear(x, weight).float()
    error, eager_error = float((ours - reference).abs().max()), float((eager - reference).abs().max())
    bound = 2 * eager_error + 2 * torch.finfo(dtype).eps * float(reference.abs().max())
    if error > bound:
        raise SystemExit(f"{label} {sparsity} {dtype}: max |error| vs f32 {error:.3e} > {bound:.3e}")
    name = str(dtype).removeprefix("torch.")
    impls = {f"torch {name}": lambda: F.linear(x, weight), "torch float32": lambda: F.linear(x32, weight32),
             "sparse_mlir": lambda: fn(x)}
    rows = []
    for threads in thread_counts:
        set_threads(threads)
        with torch.no_grad():
            ms = median_ms(impls, repeats, interleave=False)
        on_ours = all(c.kernel is not None for c in region.choices.values())
        row = dict(shape=label, m=m, k=k, n=n, dtype=name, sparsity=sparsity, threads=threads,
                   stored_bytes=region.values.nbytes + sum(t.nbytes for t in region.buffers[:-1]),
                   dense_bytes=weight.nbytes, ms={i: round(t, 4) for i, t in ms.items()},
                   vs_dtype=round(ms[f"torch {name}"] / ms["sparse_mlir"], 3),
                   vs_f32=round(ms["torch float32"] / ms["sparse_mlir"], 3), on_our_kernel=on_ours,
                   max_error_vs_f32=error, eager_max_error_vs_f32=eager_error, compile_s=round(compile_s, 2))
        rows.append(row)
        print(f"  {label:16s} {sparsity:>4s} {name:8s} t={threads} ours {ms['sparse_mlir']:8.3f} ms  torch {name} "
              f"{ms[f'torch {name}']:8.3f} ms  torch f32 {ms['torch float32']:8.3f} ms", flush=True)
    return rows


def half_markdown(result: dict) -> str:
    info = result["info"]
    lines = ["# Half precision sparse linears (mode='regions', bf16 / fp16 values, f32 accumulation)", "",
             f"Machine: {info['cpu']}, ISA {', '.join(info['isa'])}, {info['cores']} cores; torch {info['torch']}; "
             f"load average {result['load_average_start']} at the start, {result['load_average_end']} at the end. "
             "Medians (each implementation's runs back to back, two passes, the lower median). speedup = eager "
             "F.linear time / ours, on the same pruned weight; ours on its kernel (cost_model=False: the cost "
             "model keeps torch's where ours is not at least 10% faster).", "",
             "| shape | dtype | sparsity | threads | ours ms | torch dtype ms | torch f32 ms | vs dtype | vs f32 | "
             "stored MB (dense) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['shape']} | {r['dtype']} | {r['sparsity']} | {r['threads']} | "
                     f"{r['ms']['sparse_mlir']:.3f} | {r['ms']['torch ' + r['dtype']]:.3f} | "
                     f"{r['ms']['torch float32']:.3f} | {r['vs_dtype']:.2f}x | {r['vs_f32']:.2f}x | "
                     f"{r['stored_bytes'] / 2**20:.2f} ({r['dense_bytes'] / 2**20:.2f}) |")
    return "\n".join(lines) + "\n"


def write_markdown(rows: list[Row], info: dict[str, object], path: Path) -> None:
    impls = ["torch CSR mm", "torch CSR linear", "scipy CSR", "sparse_mlir"]
    lines = ["# Sparse linear benchmark (speedup over torch dense at the same thread count)", "",
             f"Machine: {info['cpu']}, ISA {', '.join(info['isa'])}, {info['cores']} cores; "
             f"sparse_mlir's micro-kernels on {info.get('vector_lanes', 8)}-lane f32 vectors; "
             f"torch {info['torch']}, scipy {info['scipy']}; fp32, medians of {info['repeats']} runs "
             f"(of up to 201, ~0.3 s, for calls shorter than 40 ms) after warm-up; single linears: "
             f"each implementation's runs back to back, in two passes, the lower median (every "
             f"implementation alike); the BERT layer: interleaved with eager's, against host drift. scipy is "
             f"single-threaded at every thread count. \"compile s\" is with "
             f"the torch-mlir worker running; the first compile of a process, which starts it, took "
             f"{info.get('first_compile_s', float('nan')):.1f} s on a small linear.", ""]
    for shape in dict.fromkeys(r.shape for r in rows):
        lines += [f"## {shape}", "",
                  "| sparsity | threads | stored as | dense ms | " + " | ".join(f"{i} x" for i in impls)
                  + " | sparse_mlir ms | compile s |",
                  "|---|---|---|---|" + "---|" * len(impls) + "---|---|"]
        for r in (r for r in rows if r.shape == shape):
            cells = [f"{r.speedup[i]:.2f}" if i in r.speedup else "" for i in impls]
            lines.append(f"| {r.sparsity} | {r.threads} | {r.stored_as} | {r.ms['torch dense']:.2f} | "
                         + " | ".join(cells) + f" | {r.ms['sparse_mlir']:.2f} | {r.compile_s:.1f} |")
        lines.append("")
    path.write_text("\n".join(lines))


def write_plot(rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(shape, t) for shape in dict.fromkeys(r.shape for r in rows)
              for t in sorted({r.threads for r in rows})]
    cols = 2
    fig, axes = plt.subplots((len(panels) + cols - 1) // cols, cols, figsize=(12, 3.6 * ((len(panels) + 1) // 2)),
                             squeeze=False)
    for ax, (shape, threads) in zip(axes.flat, panels):
        selected = [r for r in rows if r.shape == shape and r.threads == threads]
        lines = [("sparse_mlir", "sparse_mlir", False), ("sparse_mlir", "sparse_mlir, n:m shared by 4 rows", True),
                 ("torch CSR mm", "torch CSR mm", False), ("torch CSR linear", "torch CSR linear", False),
                 ("scipy CSR", "scipy CSR", False)]
        for impl, label, shared in lines:
            points = sorted((1 - r.density, r.speedup[impl], r.sparsity) for r in selected
                            if impl in r.speedup and ("rows)" in r.sparsity) == shared)
            if points:
                ax.plot([p[0] * 100 for p in points], [p[1] for p in points], "o-", label=label, markersize=3)
        ax.axhline(1.0, color="gray", linewidth=0.8, linestyle="--")
        ax.set_yscale("log")
        ax.set_title(f"{shape}, {threads} thread{'s' if threads > 1 else ''}", fontsize=9)
        ax.set_xlabel("sparsity (%)")
        ax.set_ylabel("speedup over torch dense")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--quick", action="store_true", help="90%%, 2:4 and shared-row 2:4 on the FFN up shape only")
    parser.add_argument("--no-bert", action="store_true")
    parser.add_argument("--bert-only", action="store_true",
                        help="only the BERT layer; keep the other rows of the existing results JSON")
    parser.add_argument("--bert-batch", type=int, default=8)
    parser.add_argument("--bert-seq", type=int, default=128)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--dtypes", nargs="+", default=["float32"], choices=["float32", "bfloat16", "float16"],
                        help="float32: the suite above (mode='graph'); bfloat16 / float16: 90%% CSR and 2:4 on the "
                             "single-linear shapes in mode='regions' (results/linear_suite_half.*)")
    args = parser.parse_args()
    halves = [getattr(torch, d) for d in args.dtypes if d != "float32"]
    if halves:
        load_start = os.getloadavg()
        info = {**machine(), "threads": args.threads, "repeats": args.repeats}
        print("machine:", json.dumps(info))
        half_rows: list[dict] = []
        for label, m, k, n in LINEAR_SHAPES[:1] if args.quick else LINEAR_SHAPES:
            for dtype in halves:
                for sparsity, make, _ in (s for s in UNSTRUCTURED + STRUCTURED if s[0] in HALF_SPARSITIES):
                    half_rows += bench_half(label, m, k, n, sparsity, make, dtype, args.threads, args.repeats)
                    write_results(args.out / "linear_suite_half", half_rows, load_start, half_markdown, info=info)
        print(f"wrote {args.out}/linear_suite_half.{{json,md}}")
        if "float32" not in args.dtypes:
            return

    info = {**machine(), "threads": args.threads, "repeats": args.repeats,
            "first_compile_s": round(first_compile_seconds(), 2)}
    print("machine:", json.dumps(info))
    sparsities = UNSTRUCTURED + STRUCTURED + SHARED_ROWS
    shapes = LINEAR_SHAPES
    if args.quick:
        sparsities = [s for s in sparsities if s[0] in ("90%", "2:4", "2:4 (4 rows)")]
        shapes = shapes[:1]
    rows: list[Row] = []
    if args.bert_only:
        shapes = []
        previous = json.loads((args.out / "linear_suite.json").read_text())["rows"]
        rows = [Row(**r) for r in previous if not r["shape"].startswith("BERT layer")]
    for label, m, k, n in shapes:
        for sparsity, make, _ in sparsities:
            rows += bench_linear(label, m, k, n, sparsity, make, args.threads, args.repeats)
    if not args.no_bert and not args.quick:
        for sparsity, make, _ in sparsities:
            rows += bench_bert(sparsity, make, args.threads, args.repeats, args.bert_batch, args.bert_seq)

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "linear_suite.json").write_text(json.dumps({"machine": info, "rows": [asdict(r) for r in rows]},
                                                           indent=1))
    write_markdown(rows, info, args.out / "linear_suite.md")
    write_plot(rows, args.out / "linear_suite.png")
    print(f"wrote {args.out}/linear_suite.{{json,md,png}}")


if __name__ == "__main__":
    main()
