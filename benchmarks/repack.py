"""What re-pruning a weight costs in mask-updating training (`MaskUpdate`).

For each format, the time `LinearRegion.reprune` takes to prune a dense
master weight with the format's sparsifier and store the result where the
kernels read it (packed buffers and the dense copy torch's side reads), at
BERT-base FFN shapes ([3072, 768] and [768, 3072]), 1 and 2 threads;
against the eager way of doing the same (torch: top-k magnitude mask and a
multiply for n:m, `torch.kthvalue` threshold for a fraction) and, for 2:4,
the numpy sparsifier path the compiler uses at compile time. Medians.

    .venv/bin/python benchmarks/repack.py            # ~1 min
    .venv/bin/python benchmarks/repack.py --repeats 5

Writes results/repack.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
from pathlib import Path

import torch

import sparse_mlir as sm
from sparse_mlir.compiler.regions.kernels import KernelOptions
from sparse_mlir.compiler.regions.linear import LinearRegion
from sparse_mlir.compiler.weights import apply_sparsifier, pack
from sparse_mlir.runtime.cpu import cpu_model
from sparse_mlir.testing import median_ms

RESULTS = Path(__file__).resolve().parent / "results"
log = logging.getLogger("benchmarks.repack")
SHAPES = {"BERT FFN up [3072, 768]": (3072, 768), "BERT FFN down [768, 3072]": (768, 3072)}


def _eager_nm(weight: torch.Tensor) -> torch.Tensor:
    """2:4 magnitude pruning as a torch training loop writes it."""
    groups = weight.reshape(-1, 4)
    keep = torch.zeros_like(groups, dtype=torch.bool).scatter_(1, groups.abs().topk(2, dim=1).indices, True)
    return (groups * keep).reshape(weight.shape)


def _eager_fraction(weight: torch.Tensor, fraction: float) -> torch.Tensor:
    threshold = weight.abs().flatten().kthvalue(max(1, int(fraction * weight.numel()))).values
    return weight * (weight.abs() > threshold)


def _region(encoding: sm.Encoding, weight: torch.Tensor) -> LinearRegion:
    pruned = apply_sparsifier(encoding.effective_sparsifier, weight.numpy().copy(), "w")
    return LinearRegion("w", encoding, torch.from_numpy(pruned), pack(encoding, pruned, "w"), False,
                        KernelOptions(), cost_model=False)


def run(repeats: int, threads: list[int]) -> list[dict]:
    rows = []
    for shape_name, shape in SHAPES.items():
        torch.manual_seed(0)
        master = torch.randn(*shape)
        formats = {"2:4": sm.NM(2, 4), "90% CSR": sm.CSR(sparsifier=sm.ScalarFraction(0.9))}
        for t in threads:
            torch.set_num_threads(t)
            for label, encoding in formats.items():
                region = _region(encoding, master)
                ours = median_ms(lambda: region.reprune(master), repeats)
                if label == "2:4":
                    eager = median_ms(lambda: _eager_nm(master), repeats)
                    numpy_path = median_ms(lambda: pack(encoding, apply_sparsifier(
                        encoding.effective_sparsifier, master.numpy().copy(), "w"), "w"), max(3, repeats // 4))
                else:
                    eager = median_ms(lambda: _eager_fraction(master, 0.9), repeats)
                    numpy_path = None
                rows.append(dict(shape=shape_name, format=label, threads=t, ours_ms=round(ours, 2),
                                 eager_mask_ms=round(eager, 2),
                                 numpy_path_ms=None if numpy_path is None else round(numpy_path, 2)))
                log.info("%s", rows[-1])
    return rows


def _markdown(rows: list[dict], load: str) -> str:
    lines = [f"# Re-pruning a weight (MaskUpdate), {cpu_model()}", "",
             "ours: `LinearRegion.reprune` (prune + store into the kernels' buffers and the dense copy); "
             "eager mask: the same pruning as torch ops (mask only, nothing stored); numpy path: the "
             "compile-time sparsifier + pack. Medians.", "", f"Load average at the start: {load} (2 cores).", "",
             "| weight | format | threads | ours ms | eager mask ms | numpy path ms |", "|---|---|---|---|---|---|"]
    for r in rows:
        numpy_ms = "" if r["numpy_path_ms"] is None else f"{r['numpy_path_ms']:.1f}"
        lines.append(f"| {r['shape']} | {r['format']} | {r['threads']} | {r['ours_ms']:.2f} | "
                     f"{r['eager_mask_ms']:.2f} | {numpy_ms} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--threads", nargs="*", type=int, default=[1, 2])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    rows = run(args.repeats, args.threads)
    text = _markdown(rows, load)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "repack.md").write_text(text)
    (args.out / "repack.json").write_text(json.dumps(dict(cpu=cpu_model(), machine=platform.machine(),
                                                          load_average=load, rows=rows), indent=1))


if __name__ == "__main__":
    main()
