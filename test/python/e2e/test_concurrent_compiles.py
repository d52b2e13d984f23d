"""compile() from several threads at once: every compile succeeds and is
correct. torch.export is not thread-safe (its tracing modes live on one
global stack: "ProxyTorchDispatchMode slot already occupied"), so captures
are serialised; the MLIR work and the JIT run concurrently."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch

import sparse_mlir as sm


def _compile_and_check(seed: int) -> float:
    torch.manual_seed(seed)
    width = 16 + seed   # a different model (and graph) per thread
    model = torch.nn.Sequential(torch.nn.Linear(width, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    x = torch.randn(4, width)
    fn = sm.compile(model, {"0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.5))}, example_args=(x,), mode="graph")
    model.load_state_dict(fn.effective_state_dict(), strict=False)
    return float((fn(x) - model(x)).abs().max())


def test_six_threads_compile_at_once() -> None:
    with ThreadPoolExecutor(max_workers=6) as pool:
        errors = list(pool.map(_compile_and_check, range(6)))
    assert max(errors) < 1e-5


def test_one_model_compiled_from_two_threads() -> None:
    """The capture sets the model to eval and restores its flag: two
    captures of one model must not interleave."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Dropout(0.5), torch.nn.Linear(16, 4)).train()
    x = torch.randn(3, 16)

    def compile_once(_: int) -> torch.Tensor:
        return sm.compile(model, {"0.weight": sm.NM(2, 4)}, example_args=(x,), mode="graph")(x)

    with ThreadPoolExecutor(max_workers=2) as pool:
        first, second = pool.map(compile_once, range(2))
    torch.testing.assert_close(first, second)
    assert model.training   # the user's flag is back
