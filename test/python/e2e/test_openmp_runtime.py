"""Compiled kernels' OpenMP runtime: LLVM's `__kmpc_*` ABI on torch's libgomp
(lib/Runtime/OpenMPOnGomp.c), so our parallel loops share torch's thread
pool; libomp where asked. Every iteration runs once at any thread count and
trip count."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir.runtime import threads


def _needs_torch_libgomp() -> None:
    if threads.torch_libgomp_path() is None:
        pytest.skip("this torch build ships no libgomp (not the Linux CPU wheel)")


def test_kernels_run_on_torchs_libgomp_and_follow_its_thread_count() -> None:
    _needs_torch_libgomp()
    assert threads.runtime_kind() == "gomp"
    assert threads.runtime_library().endswith("libsparse_mlir_omp.so")
    before = torch.get_num_threads()
    sm.set_num_threads(None)   # follow torch (earlier tests may have set a count)
    try:
        torch.set_num_threads(1)
        assert sm.get_num_threads() == 1
        torch.set_num_threads(2)
        assert sm.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_set_num_threads_overrides_torchs_count_for_our_kernels() -> None:
    _needs_torch_libgomp()
    before_torch = torch.get_num_threads()
    sm.set_num_threads(None)
    try:
        torch.set_num_threads(2)
        sm.set_num_threads(1)
        assert sm.get_num_threads() == 1 and torch.get_num_threads() == 2
        with threads.single_threaded():
            assert sm.get_num_threads() == 1
        assert sm.get_num_threads() == 1
    finally:
        sm.set_num_threads(None)   # back to following torch
        torch.set_num_threads(before_torch)
    assert sm.get_num_threads() == before_torch


@pytest.mark.parametrize("out_features,tokens", [(1, 1), (7, 3), (13, 5), (33, 2)])
def test_every_iteration_runs_once_at_any_thread_count(out_features: int, tokens: int) -> None:
    """Trip counts below, at and above the team size (3 threads on 2 cores
    included): the static schedule gives each iteration to one thread."""
    torch.manual_seed(out_features)
    model = torch.nn.Linear(24, out_features)
    x = torch.randn(tokens, 24)
    fn = sm.compile(model, {"weight": sm.CSR(sparsifier=sm.ScalarFraction(0.5))}, example_args=(x,), mode="graph")
    model.load_state_dict(fn.effective_state_dict(), strict=False)   # the pruned weight
    before = sm.get_num_threads()
    results = []
    try:
        for count in (1, 2, 3):
            sm.set_num_threads(count)
            results.append(fn(x))
    finally:
        sm.set_num_threads(before)
    with torch.no_grad():
        torch.testing.assert_close(results[0], model(x), rtol=1e-5, atol=1e-5)
    assert all(torch.equal(results[0], other) for other in results[1:])


def test_static_schedule_outside_a_team_takes_the_whole_range() -> None:
    _needs_torch_libgomp()
    library = ctypes.CDLL(threads.runtime_library())
    last = ctypes.c_int32(0)
    lower, upper, stride = ctypes.c_uint64(0), ctypes.c_uint64(9), ctypes.c_int64(1)
    library.__kmpc_for_static_init_8u(None, 0, 34, ctypes.byref(last), ctypes.byref(lower), ctypes.byref(upper),
                                      ctypes.byref(stride), ctypes.c_int64(1), ctypes.c_int64(0))
    assert (lower.value, upper.value, last.value) == (0, 9, 1)


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env={**os.environ, **env}, cwd="/")


def test_libomp_can_be_chosen_and_computes_the_same() -> None:
    if threads.libomp_path() is None:
        pytest.skip("no libomp on this machine (bash dev.sh installs Debian's libomp5)")
    result = _run("""
        import torch, sparse_mlir as sm
        from sparse_mlir.runtime import threads
        torch.manual_seed(0)
        model = torch.nn.Linear(40, 17)
        x = torch.randn(9, 40)
        fn = sm.compile(model, {"weight": sm.CSR(sparsifier=sm.ScalarFraction(0.7))}, example_args=(x,))
        model.load_state_dict(fn.effective_state_dict(), strict=False)
        sm.set_num_threads(2)
        torch.testing.assert_close(fn(x), model(x).detach(), rtol=1e-5, atol=1e-5)
        print(threads.runtime_kind())
    """, SPARSE_MLIR_OPENMP="libomp")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "libomp"


def test_an_unknown_runtime_choice_is_a_clear_error() -> None:
    result = _run("import sparse_mlir.runtime.threads as t; t.openmp_available()", SPARSE_MLIR_OPENMP="intel")
    assert result.returncode != 0
    assert "SPARSE_MLIR_OPENMP='intel'" in result.stderr and "'torch'" in result.stderr
