"""Sparse training on the CPU: one training step of transformer MLP linears
compiled by sparse_mlir (mode="regions") against eager dense torch.

Shapes: the linears of a BERT-base FFN (768 -> 3072 -> GELU -> 768, batch
8 x 128 tokens) and of a ViT-B MLP (the same widths, 16 x 197 tokens).
A step is: forward, loss.backward() (the input requires grad, as inside a
model: dx of both linears is computed), an SGD step (lr 1e-4, no momentum)
and zero_grad. The optimizer step is in so that runtime pruning prunes a
master that changed (MaskUpdate re-prunes only then): its cost is included.

- eager     the dense model (unpruned weights) on torch's kernels
- 90% CSR   sm.compile(..., CSR(ScalarFraction(0.9))): fixed mask, the stored values train
- 2:4       sm.compile(..., NM(2, 4)): fixed mask
- 2:4 runtime   NM(2, 4) with mask_update=MaskUpdate(every=1): the dense master
            is pruned to 2:4 before every step, forward and dx on the pruned
            weight, the master takes the dense gradient

Ours is compiled with the cost model at the thread count it runs at (torch's,
which our kernels share). Eager and ours alternate step by step (paired
medians of --repeats steps after --warmup steps each), so drift on a shared
machine hits both alike. Targets (issue 24): 90% CSR >= 2.5x eager dense,
2:4 >= 1.3x, 2:4 runtime >= 1.1x. Each compiled forward is first checked
against eager torch on the same pruned weights.

Writes results/training.{json,md,png}; --quick (small batches, few
repeats, 1 thread) prints the table only, unless --out is given.

    .venv/bin/python benchmarks/training.py                # ~10 min on 2 cores
    .venv/bin/python benchmarks/training.py --quick
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import platform
import time
import warnings
from pathlib import Path
from typing import Callable

import torch

import sparse_mlir as sm
from sparse_mlir.runtime.cpu import cpu_model, host_isa_flags
from sparse_mlir.testing import paired_medians_ms

RESULTS = Path(__file__).resolve().parent / "results"
log = logging.getLogger("benchmarks.training")

# name -> (batch, tokens per example); --quick shrinks them.
SHAPES = {"BERT-base FFN": (8, 128), "ViT-B MLP": (16, 197)}
QUICK_SHAPES = {"BERT-base FFN": (2, 32), "ViT-B MLP": (2, 49)}
VARIANTS: dict[str, tuple[Callable[[], sm.Encoding], bool, float]] = {
    # label -> (encoding, runtime pruning, target speedup over eager dense)
    "90% CSR": (lambda: sm.CSR(sparsifier=sm.ScalarFraction(0.9)), False, 2.5),
    "2:4": (lambda: sm.NM(2, 4), False, 1.3),
    "2:4 runtime": (lambda: sm.NM(2, 4), True, 1.1),
}
LR = 1e-4


class MLP(torch.nn.Module):
    """A transformer block's MLP: 768 -> 3072 -> GELU -> 768."""

    def __init__(self, hidden: int = 768, intermediate: int = 3072) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(hidden, intermediate)
        self.fc2 = torch.nn.Linear(intermediate, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


def _step(model: torch.nn.Module, x: torch.Tensor) -> Callable[[], float]:
    """One training step of `model` on x (its own optimizer); returns the loss."""
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)

    def run() -> float:
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        x.grad = None
        return loss.item()
    return run


def _measure(shape_name: str, batch: int, tokens: int, variant: str, threads: int, repeats: int,
             warmup: int) -> dict:
    make, runtime, target = VARIANTS[variant]
    torch.set_num_threads(threads)
    sm.set_num_threads(None)   # our kernels follow torch's count
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(batch, tokens, 768)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        start = time.perf_counter()
        fn = sm.compile(model, {"fc1.weight": make(), "fc2.weight": make()}, (x,), mode="regions",
                        mask_update=sm.MaskUpdate(every=1) if runtime else None)
        compile_s = time.perf_counter() - start
    pruned = copy.deepcopy(model)
    pruned.load_state_dict({**model.state_dict(), **fn.effective_state_dict()})
    with torch.no_grad():
        want = pruned(x)
        error = float((fn(x) - want).abs().max())
    if error > 1e-3 * max(1.0, float(want.abs().max())):
        raise AssertionError(f"{shape_name} {variant} {threads} thr: max error {error}")
    dense = copy.deepcopy(model)   # eager dense: the unpruned weights
    fn.train()
    eager_x, ours_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    eager_ms, ours_ms = paired_medians_ms(_step(dense, eager_x), _step(fn, ours_x), repeats, warmup)
    forward = [c for r in fn.regions() for c in r.choices.values()]
    row = dict(shape=shape_name, batch=batch, tokens=tokens, variant=variant, threads=threads, eager_ms=eager_ms,
               ours_ms=ours_ms, speedup=eager_ms / ours_ms, target=target, met=eager_ms / ours_ms >= target,
               compile_s=compile_s, max_error=error,
               forward_on_our_kernels=f"{sum(c.kernel is not None for c in forward)}/{len(forward)}")
    log.warning("%s %s, %d thr: eager dense %.1f ms, ours %.1f ms -> %.2fx (target %.1fx)", shape_name, variant,
                threads, eager_ms, ours_ms, eager_ms / ours_ms, target)
    return row


def run(shapes: dict[str, tuple[int, int]], variants: list[str], threads: list[int], repeats: int,
        warmup: int) -> list[dict]:
    return [_measure(name, batch, tokens, variant, t, repeats, warmup)
            for name, (batch, tokens) in shapes.items() for t in threads for variant in variants]


def _machine(threads: list[int]) -> dict:
    return dict(cpu=cpu_model(), isa=" ".join(host_isa_flags()), cores=os.cpu_count(),
                python=platform.python_version(), torch=torch.__version__, threads=threads,
                load_average=os.getloadavg())


def _table(rows: list[dict], machine: dict) -> str:
    lines = [f"# Sparse training step, sparse_mlir mode='regions' vs eager dense ({machine['cpu']}; {machine['isa']})",
             "", "A step: forward, loss.backward() (dx of both linears), SGD step, zero_grad. speedup = eager dense "
             "ms / ours ms, paired medians. Runtime 2:4 includes pruning the master each step.", "",
             f"Load average at the start: {', '.join(f'{v:.2f}' for v in machine['load_average'])} "
             f"({machine['cores']} cores).", "",
             "| shape | tokens | format | threads | eager dense ms | ours ms | speedup | target | met | "
             "forward on our kernels | compile s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['shape']} | {r['batch']} x {r['tokens']} | {r['variant']} | {r['threads']} | "
                     f"{r['eager_ms']:.1f} | {r['ours_ms']:.1f} | {r['speedup']:.2f}x | {r['target']:.1f}x | "
                     f"{'yes' if r['met'] else 'no'} | {r['forward_on_our_kernels']} | {r['compile_s']:.1f} |")
    return "\n".join(lines) + "\n"


def _write(rows: list[dict], machine: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "training.json").write_text(json.dumps(dict(machine=machine, rows=rows), indent=1) + "\n")
    (out / "training.md").write_text(_table(rows, machine))
    _plot(rows, machine["threads"], out)


def _plot(rows: list[dict], threads: list[int], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    figure, axes = plt.subplots(1, len(threads), figsize=(6 * len(threads), 4.5), squeeze=False)
    width = 0.8 / max(1, len(variants))
    for axis, t in zip(axes[0], threads):
        for i, variant in enumerate(variants):
            values = [next((r["speedup"] for r in rows if r["shape"] == s and r["variant"] == variant
                            and r["threads"] == t), 0.0) for s in shapes]
            bars = axis.bar([x + i * width for x in range(len(shapes))], values, width, label=variant)
            axis.hlines(VARIANTS[variant][2], -0.5 * width, len(shapes) - 1 + (len(variants) - 0.5) * width,
                        colors=bars.patches[0].get_facecolor(), linestyles="dashed", linewidth=0.8)
        axis.axhline(1.0, color="black", linewidth=0.8)
        axis.set_xticks([x + width * (len(variants) - 1) / 2 for x in range(len(shapes))])
        axis.set_xticklabels(shapes)
        axis.set_ylabel("training step speedup over eager dense")
        axis.set_title(f"{t} thread{'s' if t > 1 else ''} (dashed: targets)")
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out / "training.png", dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--threads", nargs="*", type=int)
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps of each side first")
    parser.add_argument("--quick", action="store_true",
                        help="small batches, 3 repeats, 1 thread; prints the table (writes only with --out)")
    parser.add_argument("--out", type=Path, help="results folder (default benchmarks/results; none with --quick)")
    options = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    threads = options.threads or ([1] if options.quick else [1, 2])
    repeats = options.repeats or (3 if options.quick else 7)
    shapes = {name: (QUICK_SHAPES if options.quick else SHAPES)[name] for name in options.shapes}
    machine = _machine(threads)
    rows = run(shapes, options.variants, threads, repeats, options.warmup)
    print(_table(rows, machine))
    out = options.out or (None if options.quick else RESULTS)
    if out is not None:
        _write(rows, machine, out)


if __name__ == "__main__":
    main()
