"""The C loader runs an exported GCN layer (relu(adj @ (x @ W) + b)) whose
adjacency is a CSR input: two graphs of different nnz in one process (no
new artifact), against eager; bad graphs are smlir_run errors naming the
input, never a crash or an out-of-bounds read (the program goes on to a
good call after them). And an artifact of format 2 (before CSR inputs)
still loads in both loaders."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse
import torch

import sparse_mlir as sm
from sparse_mlir.runtime import artifact

from deploy.test_sparse_input_export import FEATURES, HIDDEN, NODES, as_layout, export_layer, graph
from e2e.crafting import rewrite_header, rewrite_record

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "the C test needs a C compiler (cc); dev.sh's machines have gcc"
    binary = tmp_path_factory.mktemp("c") / "run_csr_model"
    command = [cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{artifact.c_dir()}",
               str(HERE / "run_csr_model.c"), str(artifact.c_dir() / "sparse_mlir_runtime.c"), "-ldl", "-o",
               str(binary)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, " ".join(command) + "\n" + done.stderr
    return binary


@pytest.fixture(scope="module")
def layer(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return export_layer(tmp_path_factory.mktemp("artifact"), 2)


def _csr_file(path: Path, pos: np.ndarray, crd: np.ndarray, values: np.ndarray, nnz: int | None = None) -> Path:
    """run_csr_model.c's CSR file: int64 nnz, int32 positions, int32 coordinates, float32 values (padded
    with zeros to a larger `nnz`: the file holds what it claims, the loader is what is under test)."""
    extra = max(0, (nnz or 0) - len(crd))
    crd, values = np.concatenate([crd, np.zeros(extra, crd.dtype)]), np.concatenate([values, np.zeros(extra,
                                                                                                     values.dtype)])
    path.write_bytes(np.int64(len(crd) if nnz is None else nnz).tobytes() + pos.astype(np.int32).tobytes()
                     + crd.astype(np.int32).tobytes() + values.astype(np.float32).tobytes())
    return path


def _matrix_file(path: Path, matrix: scipy.sparse.csr_matrix) -> Path:
    return _csr_file(path, matrix.indptr, matrix.indices, matrix.data)


def _run(program: Path, artifact_path: Path, prefix: Path, calls: list[list[Path]]) -> subprocess.CompletedProcess:
    arguments = [str(program), str(artifact_path), str(prefix)]
    for index, files in enumerate(calls):
        arguments += (["--"] if index else []) + [str(f) for f in files]
    return subprocess.run(arguments, capture_output=True, text=True, timeout=120)


def _output(prefix: Path, call: int) -> torch.Tensor:
    return torch.from_numpy(np.fromfile(f"{prefix}.{call}.bin", dtype=np.float32).reshape(NODES, HIDDEN))


def _eager(layer: dict, matrix: scipy.sparse.csr_matrix, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return layer["model"](torch.from_numpy(matrix.toarray()), x)


def test_c_loader_runs_two_graphs_of_different_nnz(program: Path, layer: dict, tmp_path: Path) -> None:
    graphs = [graph(0.05, 21), graph(0.3, 22)]
    assert graphs[0].nnz != graphs[1].nnz
    xs = [torch.randn(NODES, FEATURES) for _ in graphs]
    calls = []
    for index, (matrix, x) in enumerate(zip(graphs, xs)):
        x_file = tmp_path / f"x{index}.bin"
        x.numpy().tofile(x_file)
        calls.append([_matrix_file(tmp_path / f"adj{index}.bin", matrix), x_file])
    done = _run(program, layer["path"], tmp_path / "y", calls)
    assert done.returncode == 0, done.stdout + done.stderr
    loaded = sm.load(layer["path"])
    for index, (matrix, x) in enumerate(zip(graphs, xs)):
        expected = _eager(layer, matrix, x)
        torch.testing.assert_close(_output(tmp_path / "y", index), expected, rtol=1e-5, atol=1e-5)
        # The C loader and sm.load run the same code on the same buffers: the same bits.
        assert torch.equal(_output(tmp_path / "y", index), loaded(as_layout(matrix, "csr"), x))


def _bad(matrix: scipy.sparse.csr_matrix) -> dict[str, tuple[tuple, str]]:
    pos, crd, values = matrix.indptr.copy(), matrix.indices.copy(), matrix.data
    row = int(np.argmax(np.diff(pos) > 1))
    unsorted = crd.copy()
    unsorted[pos[row]], unsorted[pos[row] + 1] = unsorted[pos[row] + 1], unsorted[pos[row]]
    return {
        "unsorted": ((pos, unsorted, values), "coordinates must be sorted (strictly increasing, no duplicates)"),
        "out_of_range": ((pos, np.where(np.arange(len(crd)) == 2, NODES, crd), values),
                         f"coordinates out of range: expected 0 <= column < {NODES}"),
        "far_out_of_range": ((pos, np.where(np.arange(len(crd)) == 0, 1 << 30, crd), values),
                             "coordinates out of range"),
        "negative": ((pos, np.where(np.arange(len(crd)) == 1, -7, crd), values), "coordinates out of range"),
        "ends_past_nnz": ((np.concatenate([pos[:-1], [len(crd) + 1000]]), crd, values),
                          f"positions must start at 0 and end at nnz = {len(crd)}"),
        "decreasing": ((np.concatenate([[0], pos[2:3], pos[1:2], pos[3:]]), crd, values),
                       "positions must not decrease"),
        "negative_nnz": ((pos, crd, values, -5), "nnz -5, expected 0 <= nnz <= rows x cols"),
        "nnz_past_matrix": ((pos, crd, values, NODES * NODES + 1), "nnz 1601, expected 0 <= nnz <= rows x cols"),
    }


BAD = list(_bad(graph(0.2, 0)))


@pytest.mark.parametrize("case", BAD)
def test_c_loader_refuses_a_bad_graph_and_runs_the_next(program: Path, layer: dict, tmp_path: Path,
                                                        case: str) -> None:
    matrix = graph(0.2, 23)
    arrays, words = _bad(matrix)[case]
    x = torch.randn(NODES, FEATURES)
    x.numpy().tofile(tmp_path / "x.bin")
    bad = _csr_file(tmp_path / "bad.bin", *arrays) if len(arrays) == 3 else \
        _csr_file(tmp_path / "bad.bin", *arrays[:3], nnz=arrays[3])
    good = _matrix_file(tmp_path / "good.bin", matrix)
    done = _run(program, layer["path"], tmp_path / "y", [[bad, tmp_path / "x.bin"], [good, tmp_path / "x.bin"]])
    assert done.returncode == 2, done.stdout + done.stderr   # refused, not a crash (a signal)
    assert f"call 0: input 0 (CSR, pos_width=32, crd_width=32): {words}" in done.stderr, done.stderr
    assert not Path(f"{tmp_path / 'y'}.0.bin").exists()
    torch.testing.assert_close(_output(tmp_path / "y", 1), _eager(layer, matrix, x), rtol=1e-5, atol=1e-5)


def test_c_loader_refuses_a_dense_buffer_shape_for_a_csr_input(program: Path, layer: dict, tmp_path: Path) -> None:
    """The input's spec is the matrix's (smlir_input_spec): another shape is refused before its smlir_csr is read."""
    driver = tmp_path / "spec.c"
    driver.write_text(r'''
#include "sparse_mlir.h"
#include <stdio.h>
int main(int argc, char **argv) {
  (void)argc;
  char error[512];
  smlir_model *model = smlir_load(argv[1], error, sizeof error);
  if (!model) { fprintf(stderr, "%s\n", error); return 1; }
  int32_t pos = 0, crd = 0;
  int adj = smlir_input_csr(model, 0, &pos, &crd), x_kind = smlir_input_csr(model, 1, NULL, NULL);
  printf("kinds %d %d %d, dtypes %d %d\n", adj, x_kind, smlir_input_csr(model, 2, NULL, NULL), pos, crd);
  smlir_tensor inputs[2], output;
  smlir_input_spec(model, 0, &inputs[0]);
  smlir_input_spec(model, 1, &inputs[1]);
  smlir_output_spec(model, &output);
  float x[40 * 12] = {0}, y[40 * 16];
  inputs[0].shape[0] = 41;          /* not the matrix's rows */
  inputs[0].data = (void *)1;       /* never read: the spec is checked first */
  inputs[1].data = x;
  output.data = y;
  int status = smlir_run(model, inputs, 2, &output, error, sizeof error);
  printf("status %d: %s\n", status, error);
  smlir_free(model);
  return 0;
}
''')
    binary = tmp_path / "spec"
    subprocess.run([shutil.which("cc") or "gcc", "-std=c11", "-Wall", "-Werror", f"-I{artifact.c_dir()}", str(driver),
                    str(artifact.c_dir() / "sparse_mlir_runtime.c"), "-ldl", "-o", str(binary)], check=True)
    done = subprocess.run([str(binary), str(layer["path"])], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "kinds 1 0 -1, dtypes 6 6" in done.stdout, done.stdout   # SMLIR_I32 = 6
    assert ("status -1: input 0: expected a CSR (data: an smlir_csr) float32[40, 40] tensor (shapes are static, as in "
            "example_args), got float32[41, 40]") in done.stdout, done.stdout


def test_a_crafted_input_kind_is_refused_by_both_loaders(program: Path, layer: dict, tmp_path: Path) -> None:
    copy = tmp_path / "crafted.smlir"
    shutil.copytree(layer["path"], copy)
    rewrite_record(copy, 1, bytes=1 | 16 << 8 | 32 << 16)   # 16-bit positions: no such CSR input
    with pytest.raises(artifact.ArtifactError, match="record of input 0: input kind 0x201001"):
        sm.load(copy)
    done = _run(program, copy, tmp_path / "y", [[]])
    assert done.returncode == 1 and "record of input 0: input kind 0x201001" in done.stderr, done.stderr


def test_format_2_artifacts_still_load(program: Path, tmp_path: Path) -> None:
    """An artifact with dense inputs, as format 2 wrote it (the same layout,
    0 in every input record's bytes), loads and runs in both loaders."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU()).eval()
    x = torch.randn(NODES, FEATURES)
    fn = sm.compile(model, {"0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.5))}, (x,), mode="graph")
    path = fn.export(tmp_path / "old.smlir")
    rewrite_header(path, version=2)
    loaded = sm.load(path)
    torch.testing.assert_close(loaded(x), fn(x), rtol=0, atol=0)
    x.numpy().tofile(tmp_path / "x.bin")
    done = _run(program, path, tmp_path / "y", [[tmp_path / "x.bin"]])
    assert done.returncode == 0, done.stderr
    assert torch.equal(_output(tmp_path / "y", 0), fn(x))


def test_python_loader_takes_csr_inputs_without_the_compiler(layer: dict, tmp_path: Path) -> None:
    """sm.load of a CSR-input artifact, its calls and checks, in a process where MLIR cannot be imported."""
    from e2e.test_artifact import BLOCK_COMPILER, _run_python
    matrix = graph(0.15, 31)
    x = torch.randn(NODES, FEATURES)
    np.save(tmp_path / "x.npy", x.numpy())
    for name, array in (("pos", matrix.indptr), ("crd", matrix.indices), ("values", matrix.data)):
        np.save(tmp_path / f"{name}.npy", array)
    code = BLOCK_COMPILER + f"""
import numpy as np, torch
import sparse_mlir as sm
fn = sm.load({str(layer["path"])!r})
load = lambda name: torch.from_numpy(np.load({str(tmp_path)!r} + "/" + name + ".npy"))
adj = torch.sparse_csr_tensor(load("pos").int(), load("crd").int(), load("values"), ({NODES}, {NODES}))
np.save({str(tmp_path / "y.npy")!r}, fn(adj, load("x")).numpy())
try:
    fn(torch.sparse_csr_tensor(load("pos").int(), load("crd").int().flip(0), load("values"), ({NODES}, {NODES}),
                               check_invariants=False), load("x"))
except sm.SpecError as error:
    print("refused:", error)
assert "mlir" not in sys.modules and "torch_mlir" not in sys.modules
"""
    done = _run_python(code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "refused: input 0 'adj' (CSR, pos_width=32, crd_width=32): col_indices must be sorted" in done.stdout
    torch.testing.assert_close(torch.from_numpy(np.load(tmp_path / "y.npy")), _eager(layer, matrix, x), rtol=1e-5,
                               atol=1e-5)
