"""Artifact export and load: size, export time, and load / first-call time in fresh processes.

The BERT-base layer (examples/bert_layer.py's model) with 90% CSR and 2:4
weights is compiled, exported, then loaded `--runs` times, each in a new
Python process where importing mlir or torch_mlir fails (as in a service
without the compiler). Prints medians and writes
benchmarks/results/artifact_load.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import torch

import sparse_mlir as sm
from sparse_mlir.models import BertLayer

LOAD = textwrap.dedent("""
    import sys, time
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("mlir", "torch_mlir"):
                raise ImportError(name)
    sys.meta_path.insert(0, Block())
    import torch
    import sparse_mlir as sm
    x = torch.randn(*map(int, sys.argv[2].split("x")))
    start = time.perf_counter()
    fn = sm.load(sys.argv[1])
    loaded = time.perf_counter()
    fn(x)
    called = time.perf_counter()
    print((loaded - start) * 1e3, (called - loaded) * 1e3)
""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--shape", default="8x128x768")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = BertLayer().eval()
    x = torch.randn(*map(int, args.shape.split("x")))
    variants = {"90% CSR": lambda: sm.CSR(sparsifier=sm.ScalarFraction(0.9)), "2:4": lambda: sm.NM(2, 4)}
    results = {"machine": {"cpu": platform.processor() or platform.machine(), "python": sys.version.split()[0],
                           "threads": sm.get_num_threads()}, "shape": args.shape, "runs": args.runs, "variants": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for label, make in variants.items():
            fn = sm.compile(model, {name: make() for name in model.linear_names()}, example_args=(x,), mode="graph")
            start = time.perf_counter()
            path = fn.export(Path(tmp) / f"{label.replace('%', '').replace(' ', '_').replace(':', '_')}.smlir")
            export_s = time.perf_counter() - start
            size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            loads, calls = [], []
            for _ in range(args.runs):
                out = subprocess.run([sys.executable, "-c", LOAD, str(path), args.shape], capture_output=True,
                                     text=True, check=True, cwd=tmp).stdout.split()
                loads.append(float(out[0]))
                calls.append(float(out[1]))
            row = {"artifact_mb": size / 1e6, "export_s": export_s, "compile_s": fn.compile_seconds,
                   "load_ms_median": statistics.median(loads), "first_call_ms_median": statistics.median(calls)}
            results["variants"][label] = row
            print(f"{label}: artifact {row['artifact_mb']:.1f} MB, compile {row['compile_s']:.1f} s, export "
                  f"{export_s:.2f} s, load {row['load_ms_median']:.1f} ms, first call {row['first_call_ms_median']:.1f}"
                  f" ms (medians of {args.runs} fresh processes, x = {args.shape})")
    out = Path(__file__).parent / "results" / "artifact_load.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
