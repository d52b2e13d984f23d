"""The Python extension API (issue 26): user sparsifiers, formats given as
`#sparse_tensor.encoding` text, Python formats with user op implementations.
Each path against eager PyTorch (values and gradients), and bad input."""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse
import torch

import sparse_mlir as sm
from sparse_mlir.compiler.weights import pack
from sparse_mlir.errors import SparseFallbackWarning, SpecError
from sparse_mlir.extensions.levels import pack_levels

DCSR = "#sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>"
CSC = "#sparse_tensor.encoding<{ map = (i, j) -> (j : dense, i : compressed) }>"
BLOCKED = ("#sparse_tensor.encoding<{ map = (i, j) -> (i floordiv 2 : dense, j floordiv 4 : compressed, "
           "i mod 2 : dense, j mod 4 : dense) }>")
COO_SOA = ("#sparse_tensor.encoding<{ map = (i, j) -> (i : compressed(nonunique), j : singleton(soa)), "
           "posWidth = 32, crdWidth = 16 }>")
LOOSE = "#sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : loose_compressed) }>"
FORMATS = {"DCSR": DCSR, "CSC": CSC, "BLOCKED": BLOCKED, "COO_SOA": COO_SOA, "LOOSE": LOOSE}


def _matches_eager_with_input_gradient(fn: torch.nn.Module, model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """fn(x) and x's gradient (for a random dy) against the eager model's;
    returns the eager output. The parameters' gradients are left in both."""
    x_ours, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    y, y_ref = fn(x_ours), model(x_ref)
    torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)
    dy = torch.randn_like(y)
    y.backward(dy)
    y_ref.backward(dy)
    torch.testing.assert_close(x_ours.grad, x_ref.grad, rtol=1e-5, atol=1e-5)
    return y_ref

def _sparse(shape: tuple[int, ...], density: float = 0.3, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g) * (torch.rand(shape, generator=g) < density)


class _Functional(torch.nn.Module):
    """x @ W (W stored [in, out]) beside an nn.Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 12)
        self.w = torch.nn.Parameter(_sparse((12, 8), seed=1))
        with torch.no_grad():
            self.fc.weight.copy_(_sparse((12, 16), seed=2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mm(torch.relu(self.fc(x)), self.w)


# --- formats as #sparse_tensor.encoding text -------------------------------------------------------------------

@pytest.mark.parametrize("name", FORMATS)
def test_sparse_tensor_format_linear_and_mm_match_eager_values_and_gradients(name: str) -> None:
    model = _Functional()
    fmt = sm.SparseTensorFormat(FORMATS[name], name=name)
    fn = sm.compile(model, {"fc.weight": fmt, "w": fmt}, example_args=(torch.randn(4, 16),))
    assert [r.runs for r in fn.extension_regions()] == [f"MLIR kernel ({name})"] * 2
    x = torch.randn(5, 16)
    _matches_eager_with_input_gradient(fn, model, x)
    for param in ("fc.weight", "w"):   # the weight's gradient where it stores values
        mask = model.get_parameter(param) != 0
        torch.testing.assert_close(fn.model.get_parameter(param).grad, model.get_parameter(param).grad * mask,
                                   rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fn.model.fc.bias.grad, model.fc.bias.grad, rtol=1e-5, atol=1e-5)


def test_sparse_tensor_format_kernel_refuses_inputs_it_would_misread() -> None:
    fn = sm.compile(_Functional(), {"fc.weight": sm.SparseTensorFormat(DCSR)}, example_args=(torch.randn(4, 16),))
    with pytest.raises(SpecError, match=r"linear reading fc.weight .*: expected x of shape \[..., 16\], dtype "
                                        r"torch.float32 on the CPU, got shape \(4, 16\), dtype torch.float64"):
        fn(torch.randn(4, 16, dtype=torch.float64))
    with pytest.raises(SpecError, match=r"got shape \(4, 9\)"):
        fn(torch.randn(4, 9))


def test_sparse_tensor_format_with_a_sparsifier_and_a_builtin_format_in_one_compile() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    dcsr = sm.SparseTensorFormat(DCSR, name="DCSR", sparsifier=sm.ScalarFraction(0.7))
    fn = sm.compile(model, {"0.weight": dcsr, "2.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.5))},
                    example_args=(torch.randn(4, 16),))
    state = fn.effective_state_dict()
    assert float((state["0.weight"] == 0).float().mean()) == pytest.approx(0.7, abs=0.01)
    with pytest.raises(SpecError, match="with user formats.*cannot be exported"):
        fn.export("unused")
    reference = copy.deepcopy(model)
    reference.load_state_dict(state, strict=False)
    x = torch.randn(6, 16)
    torch.testing.assert_close(fn(x), reference(x), rtol=1e-5, atol=1e-5)


def test_sparse_tensor_format_traced_by_torch_compile() -> None:
    model = _Functional()
    fn = sm.compile(model, {"fc.weight": sm.SparseTensorFormat(DCSR)}, example_args=(torch.randn(4, 16),))
    compiled = torch.compile(fn, backend="eager", fullgraph=True)
    x = torch.randn(3, 16)
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)


CSF = "#sparse_tensor.encoding<{ map = (i, j, k) -> (i : compressed, j : compressed, k : compressed) }>"
CSF_DENSE_BATCH = "#sparse_tensor.encoding<{ map = (i, j, k) -> (i : dense, k : dense, j : compressed) }>"


class _Experts(torch.nn.Module):
    """Per-expert weights [experts, in, out] read by torch.bmm (a rank-3 weight)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(_sparse((3, 16, 8), density=0.2, seed=5))
        with torch.no_grad():
            self.w[1, 4:9] = 0    # empty (expert, row) fibres

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.bmm(x, self.w)


@pytest.mark.parametrize("text", [CSF, CSF_DENSE_BATCH], ids=["CSF", "dense-batch-CSC"])
def test_rank3_format_read_by_bmm_matches_eager_values_and_gradients(text: str) -> None:
    model = _Experts()
    fn = sm.compile(model, {"w": sm.SparseTensorFormat(text, name="F3")}, example_args=(torch.randn(3, 4, 16),))
    assert fn.extension_regions()[0].runs == "MLIR kernel (F3)"
    x = torch.randn(3, 5, 16)
    _matches_eager_with_input_gradient(fn, model, x)
    torch.testing.assert_close(fn.model.w.grad, model.w.grad * (model.w != 0), rtol=1e-5, atol=1e-5)
    with pytest.raises(SpecError, match=r"expected x of shape \[3, T, 16\]"):
        fn(torch.randn(2, 5, 16))


@pytest.mark.parametrize("builtin, text", [(sm.CSC(), CSC), (sm.BSR(block=(2, 4)), BLOCKED)])
def test_level_packer_agrees_with_the_builtin_packers(builtin: sm.Encoding, text: str) -> None:
    w = _sparse((8, 12), seed=3).numpy()
    w[:, 4:8] = 0   # an empty block column
    fmt = sm.SparseTensorFormat(text.replace("}>", ", posWidth = 32, crdWidth = 32 }>"))
    ours = pack_levels(fmt.layout, w, "w")
    theirs = pack(builtin, w, "w")
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


def test_level_packer_builds_dcsr_and_csf_levels() -> None:
    w = np.zeros((4, 5), np.float32)
    w[1, 2], w[3, 0], w[3, 4] = 1, 2, 3
    pos0, crd0, pos1, crd1, values = pack_levels(sm.SparseTensorFormat(DCSR).layout, w, "w")
    np.testing.assert_array_equal(pos0, [0, 2])
    np.testing.assert_array_equal(crd0, [1, 3])
    np.testing.assert_array_equal(pos1, [0, 1, 3])
    np.testing.assert_array_equal(crd1, [2, 0, 4])
    np.testing.assert_array_equal(values, [1, 2, 3])
    t = np.zeros((2, 3, 4), np.float32)
    t[0, 1, 2], t[1, 0, 0], t[1, 0, 3], t[1, 2, 1] = 1, 2, 3, 4
    csf = sm.SparseTensorFormat(CSF)
    buffers = pack_levels(csf.layout, t, "t")
    expected = [[0, 2], [0, 1], [0, 1, 3], [1, 0, 2], [0, 1, 3, 4], [2, 0, 3, 1], [1, 2, 3, 4]]
    assert len(buffers) == len(expected)
    for got, want in zip(buffers, expected):
        np.testing.assert_array_equal(got, want)


# --- user sparsifiers -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TopRows(sm.UserSparsifier):
    """Keeps the rows with the largest L1 norms (a fraction `fraction` dropped)."""

    fraction: float

    def keep(self, w: torch.Tensor) -> torch.Tensor:
        norms = w.abs().sum(dim=1)
        drop = int(self.fraction * w.shape[0])
        kept = torch.ones(w.shape[0], dtype=torch.bool)
        kept[torch.argsort(norms)[:drop]] = False
        return kept[:, None].expand_as(w).clone()


@pytest.mark.parametrize("mode", ["regions", "graph"])
@pytest.mark.parametrize("fmt", [sm.CSR, sm.COO, lambda **k: sm.SparseTensorFormat(DCSR, **k)])
def test_user_sparsifier_prunes_weights_in_any_format(mode: str, fmt) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 12), torch.nn.ReLU(), torch.nn.Linear(12, 4))
    encoding = fmt(sparsifier=TopRows(0.5))
    if mode == "graph" and isinstance(encoding, sm.SparseTensorFormat):
        with pytest.raises(SpecError, match="0.weight: user formats .* run in mode='regions'"):
            sm.compile(model, {"0.weight": encoding}, example_args=(torch.randn(4, 16),), mode=mode)
        return
    fn = sm.compile(model, {"0.weight": encoding}, example_args=(torch.randn(4, 16),), mode=mode)
    reference = copy.deepcopy(model)
    with torch.no_grad():
        reference[0].weight.mul_(TopRows(0.5).keep(reference[0].weight))
    assert int((reference[0].weight.abs().sum(1) == 0).sum()) == 6
    x = torch.randn(4, 16)
    torch.testing.assert_close(fn(x), reference(x), rtol=1e-5, atol=1e-5)


def test_numpy_function_sparsifier_and_values_results() -> None:
    name = "test_keep_positive_numpy"

    def keep_positive(w: np.ndarray) -> np.ndarray:
        assert isinstance(w, np.ndarray)
        return np.where(w > 0, w, 0).astype(w.dtype)       # the kept values, not a mask

    s = sm.register_sparsifier(keep_positive, name=name, array="numpy")
    try:
        model = torch.nn.Linear(8, 4)
        fn = sm.compile(model, {"weight": sm.CSR(sparsifier=s)}, example_args=(torch.randn(3, 8),))
        reference = copy.deepcopy(model)
        with torch.no_grad():
            reference.weight.clamp_(min=0)
        x = torch.randn(3, 8)
        torch.testing.assert_close(fn(x), reference(x), rtol=1e-5, atol=1e-5)
    finally:
        sm.unregister_sparsifier(name)


class _Act(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)
        self.out = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.fc(x)))


def _keep_large(x: torch.Tensor) -> torch.Tensor:
    return x.abs() >= 0.3


def test_intermediate_sparsifier_with_a_dialect_keep_condition_runs_compiled() -> None:
    s = sm.register_sparsifier(_keep_large, name="test_keep_large_dialect", dialect=sm.Threshold(0.3))
    try:
        torch.manual_seed(0)
        model = _Act()
        with warnings.catch_warnings():
            warnings.simplefilter("error", SparseFallbackWarning)
            fn = sm.compile(model, {"tanh": sm.Dense(sparsifier=s)}, example_args=(torch.randn(4, 16),),
                            mode="graph")
        x = torch.randn(4, 16)
        h = torch.tanh(model.fc(x))
        torch.testing.assert_close(fn(x), model.out(h * _keep_large(h)), rtol=1e-5, atol=1e-5)
    finally:
        sm.unregister_sparsifier("test_keep_large_dialect")


def test_intermediate_sparsifier_without_one_runs_in_torch_with_one_warning_and_eager_gradients() -> None:
    s = sm.register_sparsifier(_keep_large, name="test_keep_large_torch")
    try:
        torch.manual_seed(0)
        model = _Act()
        with pytest.warns(SparseFallbackWarning, match="test_keep_large_torch .* runs in torch") as caught:
            fn = sm.compile(model, {"tanh": sm.Dense(sparsifier=s)}, example_args=(torch.randn(4, 16),))
        assert len([w for w in caught if issubclass(w.category, SparseFallbackWarning)]) == 1
        with pytest.raises(SpecError, match="run in mode='regions'"):
            sm.compile(model, {"tanh": sm.Dense(sparsifier=s)}, example_args=(torch.randn(4, 16),), mode="graph")
        x = torch.randn(4, 16)
        y = fn(x)
        h = torch.tanh(model.fc(x))
        y_ref = model.out(h * _keep_large(h))
        torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)
        y.sum().backward()
        y_ref.sum().backward()
        torch.testing.assert_close(fn.model.fc.weight.grad, model.fc.weight.grad, rtol=1e-5, atol=1e-5)
    finally:
        sm.unregister_sparsifier("test_keep_large_torch")


# --- Python formats and op implementations ------------------------------------------------------------------------

class ScipyCSR(sm.PythonFormat):
    def from_dense(self, tensor: torch.Tensor) -> scipy.sparse.csr_matrix:
        return scipy.sparse.csr_matrix(tensor.numpy())


def _mm(a, b):
    return torch.from_numpy(np.asarray(a @ b.numpy()))


def _mm_backward(grad, a, b):
    return grad @ b.t(), torch.from_numpy(np.asarray(a.T @ grad.numpy()))


class _WeightFirst(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(_sparse((6, 8), seed=4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mm(self.w, x)


@pytest.fixture
def scipy_mm():
    sm.register_implementation(torch.mm, ScipyCSR, forward=_mm, backward=_mm_backward)
    yield
    sm.unregister_implementation(torch.mm, ScipyCSR)


def test_python_format_runs_the_registered_mm_with_eager_values_and_gradients(scipy_mm) -> None:
    model = _WeightFirst()
    fn = sm.compile(model, {"w": ScipyCSR()}, example_args=(torch.randn(8, 3),))
    assert fn.extension_regions()[0].runs == "user implementation (mm on ScipyCSR)"
    x = torch.randn(8, 5)
    y_ref = _matches_eager_with_input_gradient(fn, model, x)
    torch.testing.assert_close(fn.model.w.grad, model.w.grad * (model.w != 0), rtol=1e-5, atol=1e-5)
    compiled = torch.compile(fn, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(x.detach()), y_ref.detach(), rtol=1e-5, atol=1e-5)


def test_registration_keys_name_the_same_op(scipy_mm) -> None:
    for spelling in ("mm", torch.ops.aten.mm, torch.ops.aten.mm.default, torch.Tensor.mm):
        with pytest.raises(SpecError, match="implementation of mm on ScipyCSR is already registered"):
            sm.register_implementation(spelling, ScipyCSR, forward=_mm)
    sm.register_implementation("mm", ScipyCSR, forward=_mm, backward=_mm_backward, replace=True)


def test_a_reader_without_an_implementation_reads_densely_with_one_warning(scipy_mm) -> None:
    class TwoReaders(_WeightFirst):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.mm(self.w, x) + torch.matmul(self.w, x) + torch.matmul(self.w, x)

    model = TwoReaders()
    with pytest.warns(SparseFallbackWarning, match="no implementation of torch op 'matmul' for format ScipyCSR") as w:
        fn = sm.compile(model, {"w": ScipyCSR()}, example_args=(torch.randn(8, 3),))
    assert len([m for m in w if "matmul" in str(m.message)]) == 1
    x = torch.randn(8, 2)
    torch.testing.assert_close(fn(x), model(x), rtol=1e-5, atol=1e-5)


# --- bad input ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("result, match", [
    (lambda w: w[:2] != 0, r"w \(shape \(6, 8\)\): sparsifier bad returned shape \(2, 8\)"),
    (lambda w: (w != 0).int(), r"returned dtype int32; expected a bool mask or values of dtype float32"),
    (lambda w: w * 2, r"sparsifier bad changed \d+ values"),
    (lambda w: "nope", r"sparsifier bad returned str"),
    (lambda w: 1 / 0, r"sparsifier bad raised ZeroDivisionError"),
])
def test_bad_sparsifier_results_are_spec_errors_naming_the_tensor(result, match: str) -> None:
    s = sm.register_sparsifier(result, name="bad")
    try:
        with pytest.raises(SpecError, match=match):
            sm.compile(_WeightFirst(), {"w": sm.CSR(sparsifier=s)}, example_args=(torch.randn(8, 3),))
    finally:
        sm.unregister_sparsifier("bad")


def test_registering_a_sparsifier_twice_is_a_spec_error() -> None:
    sm.register_sparsifier(_keep_large, name="test_twice")
    try:
        with pytest.raises(SpecError, match="sparsifier 'test_twice' is already registered"):
            sm.register_sparsifier(_keep_large, name="test_twice")
    finally:
        sm.unregister_sparsifier("test_twice")
    with pytest.raises(SpecError, match="must subclass sm.UserSparsifier"):
        sm.register_sparsifier(int)


@pytest.mark.parametrize("text, match", [
    ("#sparse_tensor.encoding<{ map = (i, j) -> (i : bogus) }>", "MLIR rejects .*unknown level format: bogus"),
    ("#sparse_tensor.encoding<{ map = (i, j) -> (i : compressed) }>", "MLIR rejects"),
    ("#smlir.csr", "expected a #sparse_tensor.encoding"),
    ("#sparse_tensor.encoding<{ map = (i, j) -> (i : compressed(nonunique), j : singleton) }>",
     "singleton levels must be singleton\\(soa\\)"),
    ("#sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4]) }>",
     "structured n:m.*use sm.NM"),
    ("", "text must be a #sparse_tensor.encoding"),
])
def test_format_text_mlir_or_the_packer_rejects_is_a_spec_error(text: str, match: str) -> None:
    with pytest.raises(SpecError, match=match):
        sm.SparseTensorFormat(text, name="mine")


def test_format_of_the_wrong_rank_or_block_names_the_tensor() -> None:
    csf = sm.SparseTensorFormat("#sparse_tensor.encoding<{ map = (i, j, k) -> (i : compressed, j : compressed, "
                                "k : compressed) }>", name="CSF")
    with pytest.raises(SpecError, match=r"w \(shape \(6, 8\)\): the format CSF .* is for rank 3 tensors"):
        sm.compile(_WeightFirst(), {"w": csf}, example_args=(torch.randn(8, 3),))
    blocked = sm.SparseTensorFormat(BLOCKED.replace("floordiv 4", "floordiv 5").replace("mod 4", "mod 5"),
                                    name="B5")
    with pytest.raises(SpecError, match=r"w \(shape \(6, 8\)\): the format B5 .* blocks of 5, which does not divide 8"):
        sm.compile(_WeightFirst(), {"w": blocked}, example_args=(torch.randn(8, 3),))


def test_implementation_returning_the_wrong_shape_or_no_backward_is_a_spec_error() -> None:
    sm.register_implementation(torch.mm, ScipyCSR, forward=lambda a, b: torch.zeros(3, 3))
    try:
        fn = sm.compile(_WeightFirst(), {"w": ScipyCSR()}, example_args=(torch.randn(8, 3),))
        with pytest.raises(SpecError, match=r"mm reading w \(ScipyCSR\): the registered forward returned a tensor "
                                            r"of shape \(3, 3\) .* expected a tensor of shape \(6, 2\)"):
            fn(torch.randn(8, 2))
    finally:
        sm.unregister_implementation(torch.mm, ScipyCSR)
    sm.register_implementation(torch.mm, ScipyCSR, forward=_mm)
    try:
        fn = sm.compile(_WeightFirst(), {"w": ScipyCSR()}, example_args=(torch.randn(8, 3),))
        with torch.no_grad():
            fn(torch.randn(8, 2))   # inference needs no backward
        with pytest.raises(SpecError, match=r"no backward is registered for mm on ScipyCSR"):
            fn(torch.randn(8, 2)).sum().backward()
    finally:
        sm.unregister_implementation(torch.mm, ScipyCSR)
    sm.register_implementation(torch.mm, ScipyCSR, forward=_mm, backward=lambda g, a, b: (g,))
    try:
        fn = sm.compile(_WeightFirst(), {"w": ScipyCSR()}, example_args=(torch.randn(8, 3),))
        with pytest.raises(SpecError, match=r"one gradient \(or None\) per positional argument of the op \(2\)"):
            fn(torch.randn(8, 2)).sum().backward()
    finally:
        sm.unregister_implementation(torch.mm, ScipyCSR)


def test_user_formats_refuse_the_gpu_target() -> None:
    with pytest.raises(SpecError, match=r"w: user formats .* run on the CPU \(target='cpu'\), got target='cuda'"):
        sm.compile(_WeightFirst(), {"w": ScipyCSR()}, example_args=(torch.randn(8, 3),), target="cuda")


def test_bad_registrations_and_names() -> None:
    with pytest.raises(SpecError, match="format must be a sm.PythonFormat subclass or a sm.SparseTensorFormat"):
        sm.register_implementation(torch.mm, sm.CSR, forward=_mm)
    with pytest.raises(SpecError, match="give forward= .* or mlir= .*, one of them"):
        sm.register_implementation(torch.mm, ScipyCSR)
    with pytest.raises(SpecError, match="forward must be a function"):
        sm.register_implementation(torch.mm, ScipyCSR, forward=42)
    with pytest.raises(SpecError, match="mlir= kernels take a SparseTensorFormat weight"):
        sm.register_implementation(torch.mm, ScipyCSR, mlir=_TWICE_LINEAR)
    with pytest.raises(SpecError, match="unknown tensor name 'nope'"):
        sm.compile(_WeightFirst(), {"w": ScipyCSR(), "nope": ScipyCSR()}, example_args=(torch.randn(8, 3),))


def test_user_sparsifier_re_prunes_under_mask_update_as_eager_straight_through() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 12), torch.nn.Tanh(), torch.nn.Linear(12, 4))
    sparsifier = TopRows(0.5)
    x, target = torch.randn(8, 16), torch.randn(8, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SparseFallbackWarning)
        fn = sm.compile(model, {"0.weight": sm.CSR(sparsifier=sparsifier)}, (x,), mode="regions", cost_model=False,
                        mask_update=sm.MaskUpdate(every=1))
    eager = copy.deepcopy(model)
    ours_opt = torch.optim.SGD(fn.parameters(), lr=0.5)
    eager_opt = torch.optim.SGD(eager.parameters(), lr=0.5)
    fn.train()
    masks = []
    for _ in range(6):
        ours_opt.zero_grad()
        loss = torch.nn.functional.mse_loss(fn(x), target)
        loss.backward()
        ours_opt.step()
        eager_opt.zero_grad()
        w = eager[0].weight
        mask = sparsifier.keep(w.detach())
        masks.append(mask)
        pruned = w + (w * mask - w).detach()            # straight-through, as MaskUpdate trains
        y = eager[2](torch.tanh(torch.nn.functional.linear(x, pruned, eager[0].bias)))
        expected = torch.nn.functional.mse_loss(y, target)
        expected.backward()
        eager_opt.step()
        assert abs(loss.item() - expected.item()) <= 1e-5 * abs(expected.item())
    assert any(not torch.equal(masks[0], m) for m in masks[1:])   # the rows kept changed: re-pruned


# A user's MLIR kernel: 2 * x W^T (twice F.linear, so the test sees that it ran), W in the registered format.
_TWICE_LINEAR = """
func.func @main(%w: tensor<${out}x${in}x${elem}, #ENC>, %x: tensor<?x${in}x${elem}>) -> tensor<?x${out}x${elem}>
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %x, %c0 : tensor<?x${in}x${elem}>
  %zero = arith.constant 0.0 : ${elem}
  %two = arith.constant 2.0 : ${elem}
  %empty = tensor.empty(%t) : tensor<?x${out}x${elem}>
  %init = linalg.fill ins(%zero : ${elem}) outs(%empty : tensor<?x${out}x${elem}>) -> tensor<?x${out}x${elem}>
  %y = linalg.generic {indexing_maps = [affine_map<(t, o, k) -> (t, k)>, affine_map<(t, o, k) -> (o, k)>,
                                        affine_map<(t, o, k) -> (t, o)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<?x${in}x${elem}>, tensor<${out}x${in}x${elem}, #ENC>) outs(%init : tensor<?x${out}x${elem}>) {
    ^bb0(%a: ${elem}, %b: ${elem}, %acc: ${elem}):
      %p = arith.mulf %a, %b : ${elem}
      %q = arith.mulf %p, %two : ${elem}
      %s = arith.addf %acc, %q : ${elem}
      linalg.yield %s : ${elem}
  } -> tensor<?x${out}x${elem}>
  return %y : tensor<?x${out}x${elem}>
}
"""


def test_user_mlir_kernel_for_a_sparse_tensor_format() -> None:
    fmt = sm.SparseTensorFormat(DCSR, name="DCSR_twice")

    def twice_backward(grad, x, w, b):
        return 2 * grad @ w, 2 * grad.t() @ x, grad.sum(0)

    sm.register_implementation("linear", fmt, mlir=_TWICE_LINEAR, backward=twice_backward)
    try:
        model = _Functional()
        fn = sm.compile(model, {"fc.weight": fmt}, example_args=(torch.randn(4, 16),))
        assert fn.extension_regions()[0].runs == "user MLIR kernel (linear on DCSR_twice)"
        x = torch.randn(5, 16, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_()
        fc = model.fc
        h = torch.nn.functional.linear(x_ref, 2 * fc.weight, fc.bias)
        y_ref = torch.mm(torch.relu(h), model.w)
        y = fn(x)
        torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)
        y.sum().backward()
        y_ref.sum().backward()
        torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(fn.model.fc.weight.grad, fc.weight.grad * (fc.weight != 0), rtol=1e-5,
                                   atol=1e-5)
    finally:
        sm.unregister_implementation("linear", fmt)
    sm.register_implementation("linear", fmt, mlir="func.func @main(%w: tensor<$out x$in x$elem, #ENC>) { bogus }")
    try:
        with pytest.raises(SpecError, match="fc.weight: the MLIR kernel for linear reading fc.weight .* does not "
                                            "parse"):
            sm.compile(_Functional(), {"fc.weight": fmt}, example_args=(torch.randn(4, 16),))
    finally:
        sm.unregister_implementation("linear", fmt)
