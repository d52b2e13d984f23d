"""compile(): errors, IR stages, the reproducible pipeline, stats, fallback."""

from __future__ import annotations

import copy
import logging
import subprocess
import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import sparse_mlir as sm
from sparse_mlir import _tools
from sparse_mlir.models import MLP


def _linear(bias: bool = True) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Linear(16, 8, bias=bias).eval()


def _x(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(2))


def test_unknown_name_lists_close_matches() -> None:
    model = MLP([8, 8, 4]).eval()
    with pytest.raises(sm.SpecError, match=r"unknown tensor name 'layers\.0\.weigth'; did you mean 'layers\.0\.weight'"):
        sm.compile(model, {"layers.0.weigth": sm.CSR()}, example_args=(_x(2, 8),), mode="graph")


@pytest.mark.parametrize("name,encoding,message", [
    ("bias", sm.CSR(), "tensor 'bias': encoding #smlir.csr needs a tensor of rank >= 2, got rank 1"),
    ("weight", sm.NM(2, 3), "tensor 'weight': encoding #smlir.nm<n = 2, m = 3> needs m = 3 to divide the last "
                            "dimension, got shape [8, 16]"),
    ("weight", sm.BSR(block=(3, 4)), "tensor 'weight': encoding #smlir.bsr<block = [3, 4]> needs block [3, 4] "
                                     "to divide the shape [8, 16]"),
    ("weight", sm.CSR(sparsifier=sm.NMMagnitude(2, 3)), "tensor 'weight': sparsifier #smlir.nm_magnitude<n = 2, m = 3> "
                                                      "needs m = 3 to divide dimension 1, got shape [8, 16]"),
])
def test_encoding_that_does_not_fit_the_tensor(name: str, encoding: sm.Encoding, message: str) -> None:
    with pytest.raises(sm.SpecError) as info:
        sm.compile(_linear(), {name: encoding}, example_args=(_x(3, 16),), mode="graph")
    assert message in str(info.value)


def test_not_an_encoding() -> None:
    with pytest.raises(sm.SpecError, match="weight: expected a sparse_mlir encoding"):
        sm.compile(_linear(), {"weight": "csr"}, example_args=(_x(3, 16),), mode="graph")


def test_bad_fallback_policy() -> None:
    with pytest.raises(sm.SpecError, match="on_fallback must be one of"):
        sm.compile(_linear(), {}, example_args=(_x(3, 16),), on_fallback="ignore", mode="graph")


@pytest.fixture(scope="module")
def compiled_linear() -> sm.CompiledModule:
    return sm.compile(_linear(), {"weight": sm.CSR(sparsifier=sm.ScalarFraction(0.5))}, example_args=(_x(3, 16),), mode="graph")


@pytest.mark.parametrize("make_input,message", [
    (lambda: _x(4, 16), r"input 0: expected shape \(3, 16\) \(shapes are static, as in example_args\), got \(4, 16\)"),
    (lambda: _x(3, 16).double(), "input 0: expected dtype torch.float32, got torch.float64"),
    (lambda: _x(16, 3).t(), r"input 0: expected a contiguous tensor; call \.contiguous\(\) first"),
    (lambda: _x(3, 16).numpy(), "input 0: expected a torch.Tensor, got ndarray"),
    (lambda: torch.empty(3, 16, device="meta"), "input 0: expected a CPU tensor, got device meta"),
])
def test_wrong_inputs_are_rejected(compiled_linear: sm.CompiledModule, make_input, message: str) -> None:
    with pytest.raises(sm.SpecError, match=message):
        compiled_linear(make_input())


def test_wrong_number_of_inputs(compiled_linear: sm.CompiledModule) -> None:
    with pytest.raises(sm.SpecError, match="expected 1 inputs"):
        compiled_linear(_x(3, 16), _x(3, 16))


def test_lazily_negated_input_is_read_as_its_values(compiled_linear: sm.CompiledModule) -> None:
    x = _x(3, 16)
    negated = x._neg_view()  # memory holds x, the tensor means -x
    assert negated.is_neg()
    torch.testing.assert_close(compiled_linear(negated), compiled_linear(-x), rtol=0, atol=0)


def test_calls_from_several_threads(compiled_linear: sm.CompiledModule) -> None:
    """Each call takes its own argument block: concurrent calls do not mix inputs."""
    inputs = [_x(3, 16) * (i + 1) for i in range(8)]
    expected = [compiled_linear(x) for x in inputs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(5):
            got = list(pool.map(compiled_linear, inputs))
            for g, e in zip(got, expected):
                torch.testing.assert_close(g, e, rtol=0, atol=0)


def test_importer_process_is_reused_and_restarted() -> None:
    """torch-mlir runs in one long-lived worker; a worker that died is replaced."""
    from sparse_mlir.compiler.importers import torch_fx

    sm.compile(_linear(), {}, example_args=(_x(3, 16),), mode="graph")
    worker = torch_fx._SERVER._process
    assert worker is not None and worker.poll() is None
    sm.compile(_linear(), {}, example_args=(_x(5, 16),), mode="graph")  # another graph: sent to the worker
    assert torch_fx._SERVER._process is worker
    worker.kill()
    worker.wait()
    fn = sm.compile(_linear(), {}, example_args=(_x(7, 16),), mode="graph")
    assert torch_fx._SERVER._process is not worker
    torch.testing.assert_close(fn(_x(7, 16)), _linear()(_x(7, 16)), rtol=1e-5, atol=1e-6)


def test_imported_graphs_are_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same graph and constants import to the same text: the worker is
    asked once; other weights, encodings or buffers still compile right."""
    from sparse_mlir.compiler.importers import torch_fx

    requests: list[object] = []
    request = torch_fx._SERVER.request
    monkeypatch.setattr(torch_fx._SERVER, "request", lambda *a: requests.append(a) or request(*a))

    def model(seed: int, mean: float) -> torch.nn.Module:
        torch.manual_seed(seed)
        layers = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.BatchNorm1d(24)).eval()
        with torch.no_grad():
            layers[1].running_mean.fill_(mean)
        return layers

    x = _x(6, 12)
    for seed, mean, encodings, asked in [(0, 0.5, {}, 1), (1, 0.5, {"0.weight": sm.NM(2, 4)}, 1),
                                         (2, -2.0, {}, 2)]:  # a new constant: imported again
        m = model(seed, mean)
        fn = sm.compile(m, encodings, example_args=(x,), mode="graph")
        assert len(requests) == asked
        reference = copy.deepcopy(m)
        reference.load_state_dict({**m.state_dict(), **fn.effective_state_dict()})
        with torch.no_grad():
            torch.testing.assert_close(fn(x), reference(x), rtol=1e-5, atol=1e-6)


def test_model_that_torch_export_cannot_capture() -> None:
    class DataDependent(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.sum() > 0:  # data-dependent control flow
                return x * 2
            return x

    with pytest.raises(sm.SparseMLIRError, match="torch.export / torch-mlir could not capture DataDependent"):
        sm.compile(DataDependent(), {}, example_args=(_x(3, 16),), mode="graph")


def test_ir_stages(compiled_linear: sm.CompiledModule) -> None:
    assert "linalg.matmul" in compiled_linear.ir("linalg") and "smlir" not in compiled_linear.ir("linalg")
    annotated = compiled_linear.ir("annotated")
    assert 'smlir.sparsify' in annotated and 'tensor_name = "weight"' in annotated
    sparse = compiled_linear.ir("sparse")
    assert "call @smlir_linear_csr_3x16x8(" in sparse and "smlir.sparsify" not in sparse
    assert "llvm.func @_mlir_ciface_main" in compiled_linear.ir("llvm")
    with pytest.raises(ValueError, match="unknown stage 'ptx'"):
        compiled_linear.ir("ptx")


def test_pipeline_reproduces_with_sparse_mlir_opt(compiled_linear: sm.CompiledModule, tmp_path) -> None:
    source = tmp_path / "annotated.mlir"
    source.write_text(compiled_linear.ir("annotated"))
    result = subprocess.run([str(_tools.opt_path()), str(source), f"--pass-pipeline={compiled_linear.pipeline}"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == compiled_linear.ir("llvm").strip()


def test_stats(compiled_linear: sm.CompiledModule) -> None:
    stats = compiled_linear.stats()["weight"]
    assert stats.shape == (8, 16) and stats.format == "csr" and stats.nnz == 64 and stats.density == 0.5
    assert stats.sparsifier == "#smlir.scalar_fraction<0.5>"


class _TransposedUse(torch.nn.Module):
    """Reads its weight through an op with no sparse lowering (a plain add)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(16, 16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.weight


def test_fallback_warns_once_and_computes_densely() -> None:
    torch.manual_seed(0)
    model = _TransposedUse().eval()
    x = _x(16, 16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = sm.compile(model, {"weight": sm.CSR(sparsifier=sm.ScalarFraction(0.5))}, example_args=(x,), mode="graph")
    fallback = [w for w in caught if issubclass(w.category, sm.SparseFallbackWarning)]
    assert len(fallback) == 1
    assert "reading tensor 'weight' stored as csr; computing it densely" in str(fallback[0].message)
    assert compiled.stats()["weight"].format == "dense (fallback from csr)"
    expected = x + compiled.effective_state_dict()["weight"]
    torch.testing.assert_close(compiled(x), expected)


def test_fallback_as_error(tmp_path) -> None:
    with pytest.raises(sm.CompileError, match="no sparse lowering for .* reading tensor 'weight'") as info:
        sm.compile(_TransposedUse().eval(), {"weight": sm.CSR()}, example_args=(_x(16, 16),), on_fallback="error", mode="graph")
    assert "fail-on-fallback=true" in str(info.value)
    # There is no compiled module after a failure: the error carries the IR its reproducer reads.
    annotated = tmp_path / "annotated.mlir"
    annotated.write_text(info.value.annotated_ir)
    assert "smlir.sparsify" in info.value.annotated_ir and "annotated_ir" in info.value.reproducer
    run = subprocess.run([str(_tools.opt_path()), str(annotated), f"--pass-pipeline={info.value.pipeline}"],
                         capture_output=True, text=True)
    assert run.returncode != 0 and "no sparse lowering" in run.stderr


def test_bfloat16_on_the_cpu_is_refused_up_front() -> None:
    model = torch.nn.Linear(32, 16).to(torch.bfloat16)
    with pytest.raises(sm.SpecError, match="parameter 'weight': target='cpu' cannot pass torch.bfloat16 tensors"):
        sm.compile(model, {"weight": sm.CSR()}, example_args=(torch.randn(4, 32, dtype=torch.bfloat16),), mode="graph")
    with pytest.raises(sm.SpecError, match="input 0: target='cpu' cannot pass torch.bfloat16"):
        sm.compile(torch.nn.ReLU(), {}, example_args=(torch.randn(4, 32, dtype=torch.bfloat16),), mode="graph")


def test_ops_torch_mlir_keeps_outside_linalg_are_named() -> None:
    class Cumsum(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x).cumsum(-1)

    with pytest.raises(sm.SparseMLIRError, match=r"tm_tensor.scan \(fx node 'cumsum', aten.cumsum.default\)"):
        sm.compile(Cumsum(), {"fc.weight": sm.CSR()}, example_args=(_x(2, 8),), mode="graph")


def test_tied_weights_are_encoded_under_either_name(caplog) -> None:
    class Tied(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(64, 16)
            self.out = torch.nn.Linear(16, 64, bias=False)
            self.out.weight = self.embed.weight

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.out(self.embed(ids))

    ids = torch.randint(0, 64, (8,))
    with caplog.at_level(logging.INFO, logger="sparse_mlir.compiler"), warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)   # the embedding's gather (tensor.extract)
        fn = sm.compile(Tied(), {"out.weight": sm.CSR()}, example_args=(ids,), mode="graph")
    assert any("'out.weight' is a tied alias of 'embed.weight'" in r.getMessage() for r in caplog.records)
    assert "embed.weight" in fn.stats() and "out.weight" not in fn.stats()


def test_buffers_and_training_flag() -> None:
    """Buffers (BatchNorm's running statistics) are compiled in as constants;
    the model is traced in eval mode (dropout off) and keeps its own flag."""
    torch.manual_seed(8)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.BatchNorm1d(32), torch.nn.ReLU(),
                                torch.nn.Dropout(0.5), torch.nn.Linear(32, 8))
    with torch.no_grad():
        model[1].running_mean.uniform_(-1.0, 1.0)
        model[1].running_var.uniform_(0.5, 2.0)
    model.train()
    x = _x(4, 16)
    fn = sm.compile(model, {"0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.5))}, example_args=(x,), mode="graph")
    assert model.training and all(layer.training for layer in model)
    reference = copy.deepcopy(model).eval()
    reference.load_state_dict({**model.state_dict(), **fn.effective_state_dict()})
    with torch.no_grad():
        torch.testing.assert_close(fn(x), reference(x), rtol=1e-5, atol=1e-6)
