"""Calls do not leak: RSS is flat across 10,000 calls."""

from __future__ import annotations

import gc
import resource

import torch

import sparse_mlir as sm


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def test_rss_is_flat_over_10000_calls() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32)).eval()
    x = torch.randn(16, 64)
    compiled = sm.compile(model, {"0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8)), "2.weight": sm.NM(2, 4)},
                          example_args=(x,), mode="graph")
    for _ in range(500):  # warm up allocator pools
        compiled(x)
    before = _rss_kib()
    for _ in range(10_000):
        compiled(x)
    grown = _rss_kib() - before
    # One leaked 16x32 f32 result per call would be 10,000 * 2 KiB = 20 MB.
    assert grown < 2048, f"RSS grew by {grown} KiB over 10,000 calls"


def _live_contexts() -> int:
    from mlir import ir

    gc.collect()
    return sum(isinstance(o, ir.Context) for o in gc.get_objects())


def test_dropped_compiled_model_releases_its_mlir_context() -> None:
    """Each compile's Context (~2.7 MB) lived on in a cycle through the
    diagnostic handler of `compiler.pipeline.Diagnostics` after the model was dropped."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    x = torch.randn(4, 32)
    encodings = {"0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.9))}
    sm.compile(model, encodings, example_args=(x,), mode="graph")(x)   # the process's long-lived contexts exist from here on
    before = _live_contexts()
    for _ in range(3):
        compiled = sm.compile(model, encodings, example_args=(x,), mode="graph")
        compiled(x)
        del compiled
    assert _live_contexts() == before
