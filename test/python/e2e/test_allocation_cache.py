"""The allocation cache compiled code takes its buffers from (sparse_mlir.runtime.memory)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import torch

import sparse_mlir as sm
from sparse_mlir.models import MLP

# Hidden activations of 64 x 1024 floats (256 KiB): above the cache's 64 KiB floor.
SCRIPT = textwrap.dedent("""
    import sys, torch, sparse_mlir as sm
    from sparse_mlir.models import MLP
    torch.manual_seed(0)
    model = MLP([256, 1024, 256]).eval()
    x = torch.randn(64, 256)
    fn = sm.compile(model, {"layers.0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8))}, (x,), mode="graph")
    outs = [fn(x * i) for i in range(3)]
    torch.save(outs, sys.argv[1])
    print(sm.cached_bytes())
""")


def _model_and_input() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return MLP([256, 1024, 256]).eval(), torch.randn(64, 256)


def test_temporaries_are_reused_and_results_stay_intact() -> None:
    model, x = _model_and_input()
    fn = sm.compile(model, {"layers.0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8))}, (x,), mode="graph")
    sm.release_cached_memory()
    assert sm.cached_bytes() == 0
    inputs = [torch.randn(64, 256) for _ in range(6)]
    # Results are held while later calls run: a cached block must never be
    # one a live result still uses.
    results = [fn(t) for t in inputs]
    held = sm.cached_bytes()
    assert held >= 64 * 1024 * 4, f"the 256 KiB hidden activation was not cached ({held} bytes)"
    reference = sm.compile(model, {"layers.0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8))}, (x,),
                           cost_model=False, mode="graph")
    for t, got in zip(inputs, results):
        torch.testing.assert_close(got, reference(t), rtol=1e-5, atol=1e-5)
    # Steady state: calls take from the cache and give back; it does not grow.
    for t in inputs:
        fn(t)
    assert sm.cached_bytes() <= held + 64 * 256 * 4 * len(inputs)


def test_release_returns_every_cached_byte() -> None:
    model, x = _model_and_input()
    fn = sm.compile(model, {}, (x,), mode="graph")
    fn(x)
    held = sm.cached_bytes()
    assert held > 0
    assert sm.release_cached_memory() == held
    assert sm.cached_bytes() == 0


def test_cache_off_gives_the_same_bits(tmp_path) -> None:
    results = {}
    for megabytes in ("0", "1024"):
        out = tmp_path / f"out{megabytes}.pt"
        env = {**os.environ, "SPARSE_MLIR_ALLOC_CACHE_MB": megabytes}
        done = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], capture_output=True, text=True, env=env,
                              cwd=tmp_path)  # not the source tree: the installed package
        assert done.returncode == 0, done.stderr
        cached = int(done.stdout.strip().splitlines()[-1])
        assert (cached == 0) == (megabytes == "0"), f"SPARSE_MLIR_ALLOC_CACHE_MB={megabytes}: {cached} bytes cached"
        results[megabytes] = torch.load(out)
    for off, on in zip(results["0"], results["1024"]):
        assert torch.equal(off, on)
