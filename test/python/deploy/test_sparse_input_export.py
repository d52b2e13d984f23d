"""export() of models with sparse inputs (issue 26): a GCN's adjacency, an
SDDMM or attention mask. The artifact takes such an input as a CSR matrix
of the example's rows and columns and any nnz (format 3); `sm.load` accepts
torch sparse_csr tensors (sparse_coo / sparse_bsr converted) and validates
them before the program reads them. MoE routing still refuses (its sizes
depend on the input's values)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse
import torch

import sparse_mlir as sm
from sparse_mlir.errors import SpecError
from sparse_mlir.runtime import artifact

from inputs.test_sparse_attention import Attention, band_mask, csr, qkv
from regions.test_moe import MoE

NODES, FEATURES, HIDDEN, CLASSES = 40, 12, 16, 4


class GCN(torch.nn.Module):
    """examples/gcn.py's 2-layer GCN at a small size."""

    def __init__(self) -> None:
        super().__init__()
        self.layer1 = torch.nn.Linear(FEATURES, HIDDEN)
        self.layer2 = torch.nn.Linear(HIDDEN, CLASSES)

    def forward(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return adj @ self.layer2(torch.relu(adj @ self.layer1(x)))


class GCNLayer(torch.nn.Module):
    """One GCN layer: relu(adj @ (x @ W) + b)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(FEATURES, HIDDEN) / FEATURES ** 0.5)
        self.bias = torch.nn.Parameter(torch.randn(HIDDEN))

    def forward(self, adj: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(adj @ (x @ self.weight) + self.bias)


class SDDMM(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return (a @ b.T) * mask


def graph(density: float, seed: int, nodes: int = NODES) -> scipy.sparse.csr_matrix:
    matrix = scipy.sparse.random(nodes, nodes, density=density, format="csr", dtype=np.float32, random_state=seed)
    matrix.sort_indices()
    return matrix


def as_layout(matrix: scipy.sparse.csr_matrix, layout: str) -> torch.Tensor:
    dense = torch.from_numpy(matrix.toarray())
    if layout == "csr":
        return torch.sparse_csr_tensor(torch.from_numpy(matrix.indptr).int(), torch.from_numpy(matrix.indices).int(),
                                       torch.from_numpy(matrix.data), matrix.shape)
    if layout == "coo":
        return dense.to_sparse_coo().coalesce()
    return dense.to_sparse_bsr((2, 2))


ENCODINGS = {"csr": sm.CSR(), "coo": sm.COO(crd_width=64), "bsr": sm.BSR(block=(2, 2))}


def close(got: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", ENCODINGS)
def test_gcn_with_a_sparse_adjacency_exports_and_loads(layout: str, tmp_path: Path, one_thread) -> None:
    """Compiled with the input in any input format (regions), exported: the
    artifact takes a CSR adjacency; two graphs of other nnz, in every torch
    layout, match eager on the dense adjacency."""
    torch.manual_seed(0)
    model = GCN().eval()
    x = torch.randn(NODES, FEATURES)
    fn = sm.compile(model, {"adj": ENCODINGS[layout]}, (as_layout(graph(0.1, 0), layout), x), cost_model=False)
    loaded = sm.load(fn.export(tmp_path / "gcn.smlir"))
    manifest = json.loads((tmp_path / "gcn.smlir" / artifact.MANIFEST).read_text())
    assert manifest["format_version"] == 3
    assert manifest["signature"]["inputs"][0] == {"shape": [NODES, NODES], "dtype": "float32", "kind": "csr",
                                                  "name": "adj", "positions": "int32",
                                                  "coordinates": "int64" if layout == "coo" else "int32",
                                                  "nnz": "dynamic"}
    assert [spec.name for spec in loaded.csr_inputs] == ["adj"]
    for density, seed in [(0.25, 7), (0.05, 3)]:
        matrix, x2 = graph(density, seed), torch.randn(NODES, FEATURES)
        with torch.no_grad():
            expected = model(torch.from_numpy(matrix.toarray()), x2)
        for given in ENCODINGS:
            close(loaded(as_layout(matrix, given), x2), expected)
        close(fn(as_layout(matrix, layout), x2), expected)   # the module itself still runs


def test_graph_mode_takes_a_csr_input_of_any_nnz() -> None:
    """mode='graph' with {'adj': CSR()}: @main's argument is the CSR
    encoding (its buffers after the sparse assembler), nnz free per call."""
    torch.manual_seed(0)
    model = GCNLayer().eval()
    x = torch.randn(NODES, FEATURES)
    fn = sm.compile(model, {"adj": sm.CSR()}, (torch.from_numpy(graph(0.1, 0).toarray()), x), mode="graph")
    assert "tensor<40x40xf32, #sparse" in fn.ir("sparse").split("func.func @main", 1)[1].split("\n", 1)[0]
    assert "sparse_tensor.convert" not in fn.ir("sparse")   # adj @ h reads the stored entries: never made dense
    # ... with the SpMM kernel (smlir-raise-sparse-matmuls), not sparsification's scalar loops.
    assert f"call @smlir_spmm_csr_features{HIDDEN}(" in fn.ir("sparse")
    entry, = [e for e in fn.sparsity_plan() if e.role == "input"]
    assert (entry.name, entry.shape, entry.format, entry.fallbacks) == ("adj", (NODES, NODES), "csr", ())
    for density, seed in [(0.0, 1), (0.02, 2), (0.3, 3), (1.0, 4)]:
        matrix = graph(density, seed)
        with torch.no_grad():
            close(fn(as_layout(matrix, "csr"), x), model(torch.from_numpy(matrix.toarray()), x))
    # int64 indices (torch's default) are converted; a dense matrix is sparsified.
    matrix = graph(0.2, 5)
    with torch.no_grad():
        expected = model(torch.from_numpy(matrix.toarray()), x)
    close(fn(torch.from_numpy(matrix.toarray()).to_sparse_csr(), x), expected)
    close(fn(torch.from_numpy(matrix.toarray()), x), expected)


def _unsorted(matrix: scipy.sparse.csr_matrix) -> torch.Tensor:
    crd = matrix.indices.copy()
    row = int(np.argmax(np.diff(matrix.indptr) > 1))
    start = matrix.indptr[row]
    crd[start], crd[start + 1] = crd[start + 1], crd[start]
    return torch.sparse_csr_tensor(torch.from_numpy(matrix.indptr).int(), torch.from_numpy(crd).int(),
                                   torch.from_numpy(matrix.data), matrix.shape, check_invariants=False)


def _crafted(matrix: scipy.sparse.csr_matrix, pos: np.ndarray | None = None, crd: np.ndarray | None = None,
             values: np.ndarray | None = None, shape: tuple[int, int] | None = None) -> torch.Tensor:
    pos = matrix.indptr if pos is None else pos
    crd = matrix.indices if crd is None else crd
    values = matrix.data if values is None else values
    return torch.sparse_csr_tensor(torch.from_numpy(np.ascontiguousarray(pos)).int(),
                                   torch.from_numpy(np.ascontiguousarray(crd)).int(), torch.from_numpy(values),
                                   shape or matrix.shape, check_invariants=False)


BAD = {
    "unsorted": (_unsorted, "col_indices must be sorted"),
    "column_out_of_range": (lambda m: _crafted(m, crd=np.where(np.arange(m.nnz) == 3, NODES + 5, m.indices)),
                            f"col_indices out of range: expected 0 <= column < {NODES}"),
    "negative_column": (lambda m: _crafted(m, crd=np.where(np.arange(m.nnz) == 0, -1, m.indices)),
                        "col_indices out of range"),
    "positions_past_nnz": (lambda m: _crafted(m, pos=np.concatenate([m.indptr[:-1], [m.nnz + 9]])),
                           "crow_indices must start at 0 and end at nnz"),
    "positions_decrease": (lambda m: _crafted(m, pos=np.concatenate([[0], m.indptr[2:3], m.indptr[1:2],
                                                                     m.indptr[3:]])),
                           "crow_indices must not decrease"),
    "values_short": (lambda m: _crafted(m, values=m.data[:-1]), "nnz mismatch"),
    "wrong_shape": (lambda m: torch.sparse_csr_tensor(torch.zeros(NODES + 2, dtype=torch.int32),
                                                      torch.zeros(0, dtype=torch.int32), torch.zeros(0),
                                                      (NODES + 1, NODES)),
                    f"expected shape ({NODES}, {NODES})"),
    "float64": (lambda m: as_layout(m, "csr").to(torch.float64), "expected torch.float32 values"),
    "strided_int": (lambda m: torch.zeros(NODES, NODES, dtype=torch.int32), "expected torch.float32 values"),
    "not_a_tensor": (lambda m: m, "expected a torch sparse_csr tensor, got csr_matrix"),
}


def export_layer(folder: Path, seed: int) -> dict:
    """A GCN layer compiled with a CSR adjacency (regions mode) and exported to `folder`."""
    torch.manual_seed(seed)
    model = GCNLayer().eval()
    x = torch.randn(NODES, FEATURES)
    fn = sm.compile(model, {"adj": sm.CSR()}, (as_layout(graph(0.1, 0), "csr"), x), cost_model=False)
    return {"model": model, "x": x, "path": fn.export(folder / "layer.smlir")}


@pytest.fixture(scope="module")
def exported_layer(tmp_path_factory: pytest.TempPathFactory) -> dict:
    layer = export_layer(tmp_path_factory.mktemp("layer"), 1)
    return {**layer, "loaded": sm.load(layer["path"])}


@pytest.mark.parametrize("case", BAD)
def test_bad_sparse_inputs_are_spec_errors_naming_the_input(exported_layer: dict, case: str) -> None:
    make, words = BAD[case]
    matrix = graph(0.2, 11)
    with pytest.raises(SpecError) as caught:
        exported_layer["loaded"](make(matrix), exported_layer["x"])
    message = str(caught.value)
    assert message.startswith("input 0 'adj' (CSR, pos_width=32, crd_width=32): "), message
    assert words in message, message
    # The next good call runs (nothing was read out of bounds or left half-done).
    with torch.no_grad():
        expected = exported_layer["model"](torch.from_numpy(matrix.toarray()), exported_layer["x"])
    close(exported_layer["loaded"](as_layout(matrix, "csr"), exported_layer["x"]), expected)


def test_sddmm_exports_with_its_mask_densified_in_the_program(tmp_path: Path, one_thread) -> None:
    """(a @ b.T) * mask: graph mode has no sparse lowering of the mask's
    product, so the program converts the CSR mask to dense once per call
    (the plan and a SparseFallbackWarning say so); the artifact still takes
    a CSR mask of any nnz and matches eager."""
    a, b = torch.randn(16, 8), torch.randn(16, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(SDDMM(), {"mask": sm.CSR()}, (a, b, csr(band_mask(16, 2, density=0.1))), cost_model=False)
    with pytest.warns(sm.SparseFallbackWarning, match="aten.mul.Tensor"):
        graph_fn = sm.compile(SDDMM(), {"mask": sm.CSR()}, (a, b, band_mask(16, 2)), mode="graph")
    entry, = [e for e in graph_fn.sparsity_plan() if e.role == "input"]
    assert "Converted to dense once per call in the program" in entry.stored_as
    assert any("aten.mul.Tensor" in f for f in entry.fallbacks)
    loaded = sm.load(fn.export(tmp_path / "sddmm.smlir"))
    for seed, density in [(1, 0.05), (2, 0.3)]:
        mask, a2, b2 = band_mask(16, 3, density=density, seed=seed), torch.randn(16, 8), torch.randn(16, 8)
        close(loaded(a2, b2, csr(mask)), SDDMM()(a2, b2, mask))
        close(graph_fn(a2, b2, csr(mask)), SDDMM()(a2, b2, mask))


def test_sparse_attention_with_a_sparse_mask_input_exports(tmp_path: Path, one_thread) -> None:
    q, k, v = qkv(batch=(1, 2), seq=16, dim=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(Attention(divide=True), {"mask": sm.CSR()}, (q, k, v, csr(band_mask(16, 2, density=0.1))),
                        cost_model=False)
    loaded = sm.load(fn.export(tmp_path / "attention.smlir"))
    for seed, density in [(3, 0.2), (4, 0.02)]:
        other = band_mask(16, 3, density=density, seed=seed)   # another nnz
        q2, k2, v2 = qkv(batch=(1, 2), seq=16, dim=8, seed=seed)
        close(loaded(q2, k2, v2, csr(other)), Attention(divide=True)(q2, k2, v2, other))


@pytest.mark.parametrize("capture_by", ["modules", "graph"])
def test_moe_with_routed_experts_refuses_export_naming_the_routing(capture_by: str, tmp_path: Path,
                                                                  one_thread) -> None:
    torch.manual_seed(0)
    model = MoE().eval()
    encodings = {name: sm.CSR(sparsifier=sm.ScalarFraction(0.9)) for name, _ in model.named_parameters()
                 if name.startswith("experts.")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(model, encodings, (torch.randn(12, 32),), capture_by=capture_by, cost_model=False)
    target = tmp_path / "moe.smlir"
    with pytest.raises(SpecError) as caught:
        fn.export(target)
    message = str(caught.value)
    assert message.startswith("export() is refused"), message
    for phrase in ("the size of some results depends on the input's values", "MoE experts (experts.0.w1.weight",
                   "token count known only at run time", "Python service"):
        assert phrase in message, (phrase, message)
    assert "use mode='regions'" not in message   # this module is regions mode: no way to an artifact
    assert not target.exists()   # refused before anything is written
    twin = MoE()
    twin.load_state_dict(model.state_dict())
    twin.load_state_dict(fn.effective_state_dict(), strict=False)
    x = torch.randn(9, 32)
    with torch.no_grad():
        close(fn(x), twin.eval()(x))


@pytest.mark.parametrize("encoding", [sm.COO(), sm.BSR(block=(2, 2)), sm.CSR(sparsifier=sm.ScalarFraction(0.5))],
                         ids=["coo", "bsr", "csr-sparsifier"])
def test_graph_mode_takes_sparse_inputs_as_csr_only(encoding: sm.Encoding) -> None:
    adj = torch.from_numpy(graph(0.1, 0).toarray())
    with pytest.raises(SpecError, match=r"input 'adj' \(.*\): mode='graph' \(and export\(\)\) takes sparse inputs "
                                        r"as CSR only: encode it as sm.CSR\(\)"):
        sm.compile(GCN().eval(), {"adj": encoding}, (adj, torch.randn(NODES, FEATURES)), mode="graph")


def test_graph_mode_refuses_a_sparse_example_no_encoding_names() -> None:
    adj = as_layout(graph(0.1, 0), "csr")
    with pytest.raises(SpecError, match=r"example_args\[0\] \(torch.sparse_csr\): a sparse example for an input no "
                                        r"encoding names.*\{'adj': sm.CSR\(\)\}"):
        sm.compile(GCN().eval(), {}, (adj, torch.randn(NODES, FEATURES)), mode="graph")


def test_sparse_inputs_need_the_cpu_target() -> None:
    adj = torch.from_numpy(graph(0.1, 0).toarray())
    with pytest.raises(SpecError, match=r"inputs \['adj'\]: sparse inputs run on target='cpu'"):
        sm.compile(GCN().eval(), {"adj": sm.CSR()}, (adj, torch.randn(NODES, FEATURES)), target="cuda")
