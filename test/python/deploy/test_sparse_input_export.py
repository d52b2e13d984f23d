"""export() of models with sparse inputs (GCN, sparse attention) and MoE
routing (issue 26): refused at export time, before anything is written,
with a SpecError saying what and why; the compiled module keeps working
(against eager on a new graph / routing). An artifact is one static-shape
program of dense inputs (sm.load and the C loader's smlir_run), which can
hold neither a per-call nnz nor a per-call expert token count."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse
import torch

import sparse_mlir as sm
from sparse_mlir.errors import SpecError

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


def _graph(density: float, seed: int) -> scipy.sparse.csr_matrix:
    matrix = scipy.sparse.random(NODES, NODES, density=density, format="csr", dtype=np.float32, random_state=seed)
    matrix.sort_indices()
    return matrix


def _as_layout(matrix: scipy.sparse.csr_matrix, layout: str) -> torch.Tensor:
    dense = torch.from_numpy(matrix.toarray())
    if layout == "csr":
        return torch.sparse_csr_tensor(torch.from_numpy(matrix.indptr).int(), torch.from_numpy(matrix.indices).int(),
                                       torch.from_numpy(matrix.data), matrix.shape)
    if layout == "coo":
        return dense.to_sparse_coo().coalesce()
    return dense.to_sparse_bsr((2, 2))


ENCODINGS = {"csr": sm.CSR(), "coo": sm.COO(crd_width=64), "bsr": sm.BSR(block=(2, 2))}


def _refused(fn: torch.nn.Module, target: Path, *phrases: str) -> str:
    with pytest.raises(SpecError) as caught:
        fn.export(target)
    message = str(caught.value)
    assert message.startswith("export() is refused"), message
    for phrase in phrases:
        assert phrase in message, (phrase, message)
    assert not target.exists()   # refused before anything is written
    return message


@pytest.mark.parametrize("layout", ENCODINGS)
def test_gcn_with_a_sparse_adjacency_input_refuses_export_and_keeps_running(layout: str, tmp_path: Path,
                                                                            one_thread) -> None:
    torch.manual_seed(0)
    model = GCN().eval()
    x = torch.randn(NODES, FEATURES)
    fn = sm.compile(model, {"adj": ENCODINGS[layout]}, (_as_layout(_graph(0.1, 0), layout), x), cost_model=False)
    format_name = ENCODINGS[layout].format_name
    message = _refused(fn, tmp_path / "gcn.smlir", f"inputs 'adj' ({format_name}) are sparse inputs",
                       "C loader", "nnz changes per call", "Python service")
    assert "compile the model without these inputs' encodings" in message
    # A new graph (another nnz) and new features after the refusal, against eager on the dense adjacency.
    matrix, x2 = _graph(0.25, 7), torch.randn(NODES, FEATURES)
    with torch.no_grad():
        expected = model(torch.from_numpy(matrix.toarray()), x2)
    torch.testing.assert_close(fn(_as_layout(matrix, layout), x2), expected, rtol=1e-5, atol=1e-5)


def test_sparse_attention_with_a_sparse_mask_input_refuses_export(tmp_path: Path, one_thread) -> None:
    q, k, v = qkv(batch=(1, 2), seq=16, dim=8)
    mask = band_mask(16, 2, density=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(Attention(divide=True), {"mask": sm.CSR()}, (q, k, v, csr(mask)), cost_model=False)
    _refused(fn, tmp_path / "attention.smlir", f"inputs 'mask' ({sm.CSR().format_name}) are sparse inputs", "C loader")
    other = band_mask(16, 3, density=0.2, seed=3)   # another nnz: still runs, as eager with the dense mask
    torch.testing.assert_close(fn(q, k, v, csr(other)), Attention(divide=True)(q, k, v, other), rtol=1e-5,
                               atol=1e-5)


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
    message = _refused(fn, tmp_path / "moe.smlir", "the size of some results depends on the input's values",
                       "MoE experts (experts.0.w1.weight", "token count known only at run time", "Python service")
    assert "use mode='regions'" not in message   # this module is regions mode: no way to an artifact
    twin = MoE()
    twin.load_state_dict(model.state_dict())
    twin.load_state_dict(fn.effective_state_dict(), strict=False)
    x = torch.randn(9, 32)
    with torch.no_grad():
        torch.testing.assert_close(fn(x), twin.eval()(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sparse_example", [True, False], ids=["csr-example", "dense-example"])
def test_graph_mode_refuses_sparse_inputs_pointing_to_regions(sparse_example: bool) -> None:
    """mode='graph' (the whole-graph program export() writes) cannot take a
    sparse input: a SpecError at compile time, not torch.export's
    SerializeError nor 'unknown tensor name'."""
    matrix = _graph(0.1, 0)
    adj = _as_layout(matrix, "csr") if sparse_example else torch.from_numpy(matrix.toarray())
    encodings = {"adj": sm.CSR()} if not sparse_example else {}
    what = "input 'adj'" if not sparse_example else r"example_args\[0\] \(torch.sparse_csr\)"
    with pytest.raises(SpecError, match=what + r": mode='graph' compiles one static-shape program of dense inputs "
                                               r".* Sparse inputs run in mode='regions'"):
        sm.compile(GCN().eval(), encodings, (adj, torch.randn(NODES, FEATURES)), mode="graph")
