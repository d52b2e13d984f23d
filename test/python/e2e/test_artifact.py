"""Deployment artifacts: export, load without the compiler, the C loader, and every load error."""

from __future__ import annotations

import ctypes
import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import sparse_mlir as sm
from conftest import REPO_ROOT
from sparse_mlir.compiler import export
from sparse_mlir.runtime import artifact, cpu
from sparse_mlir.models import MLP, BertLayer

from .crafting import reseal, rewrite_header

# Imports of the compiler are refused in the loading process.
BLOCK_COMPILER = textwrap.dedent("""
    import sys
    class _Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("mlir", "torch_mlir"):
                raise ImportError(f"blocked in this test: {name}")
    sys.meta_path.insert(0, _Block())
""")

LOAD_AND_RUN = BLOCK_COMPILER + textwrap.dedent("""
    import json, time
    import numpy as np, torch
    import sparse_mlir as sm
    report = {}
    for case in json.loads(sys.argv[1]):
        start = time.perf_counter()
        fn = sm.load(case["artifact"])
        loaded = time.perf_counter()
        outputs = [fn(torch.from_numpy(np.load(path))).numpy() for path in case["inputs"]]
        called = time.perf_counter()
        for output, path in zip(outputs, case["outputs"]):
            np.save(path, output)
        report[case["artifact"]] = {"load_ms": (loaded - start) * 1e3, "first_calls_ms": (called - loaded) * 1e3}
    assert "mlir" not in sys.modules and "torch_mlir" not in sys.modules, sorted(sys.modules)
    print(json.dumps(report))
""")


def _run_python(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    # cwd outside the source tree: `python -c` puts it first on sys.path.
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600, cwd=cwd)


def _mlp_encodings(make) -> dict[str, sm.Encoding]:
    return {f"layers.{i}.weight": make() for i in range(2)}


class _StridedSlices(torch.nn.Module):
    """Slices of the innermost dimension (attention's q/k/v split, RoPE's
    rotate_half): copies between strided buffers, `memrefCopy` calls."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).split(32, dim=-1)
        rotated = torch.cat((-q[..., 16:], q[..., :16]), dim=-1)
        return rotated * k + v.view(*v.shape[:-1], 4, 8).transpose(-1, -2).reshape(v.shape)


CASES = {
    "mlp_csr": (lambda: MLP([64, 128, 32]).eval(), (16, 64), lambda m: _mlp_encodings(
        lambda: sm.CSR(sparsifier=sm.ScalarFraction(0.8)))),
    "mlp_2_4": (lambda: MLP([64, 128, 32]).eval(), (16, 64), lambda m: _mlp_encodings(lambda: sm.NM(2, 4))),
    "bert_csr": (lambda: BertLayer().eval(), (1, 32, 768),
                 lambda m: {n: sm.CSR(sparsifier=sm.ScalarFraction(0.9)) for n in m.linear_names()}),
    "bert_2_4": (lambda: BertLayer().eval(), (1, 32, 768), lambda m: {n: sm.NM(2, 4) for n in m.linear_names()}),
    "strided_slices": (lambda: _StridedSlices().eval(), (2, 5, 32),
                       lambda m: {"qkv.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.5))}),
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Each case compiled, called twice, and exported; inputs and outputs saved."""
    root = tmp_path_factory.mktemp("artifacts")
    cases = {}
    for label, (make_model, shape, make_encodings) in CASES.items():
        torch.manual_seed(0)
        model = make_model()
        x = [torch.randn(shape), torch.randn(shape)]
        fn = sm.compile(model, make_encodings(model), example_args=(x[0],), mode="graph")
        outputs = [fn(t) for t in x]
        inputs = []
        for i, t in enumerate(x):
            np.save(root / f"{label}_x{i}.npy", t.numpy())
            t.numpy().tofile(root / f"{label}_x{i}.bin")
            inputs.append(str(root / f"{label}_x{i}.npy"))
        cases[label] = {"fn": fn, "x": x, "expected": outputs, "artifact": str(fn.export(root / f"{label}.smlir")),
                        "inputs": inputs, "outputs": [str(root / f"{label}_y{i}.npy") for i in range(2)]}
    return cases


def test_round_trip_is_bit_exact_without_the_compiler(exported: dict[str, dict], tmp_path: Path) -> None:
    """MLP and BERT layer, CSR and 2:4: a fresh process that cannot import mlir or
    torch_mlir loads each artifact and reproduces the compiling process bit for bit."""
    spec = [{k: case[k] for k in ("artifact", "inputs", "outputs")} for case in exported.values()]
    done = _run_python(LOAD_AND_RUN, json.dumps(spec), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for label, case in exported.items():
        for expected, path in zip(case["expected"], case["outputs"]):
            assert np.array_equal(np.load(path), expected.numpy()), label
        assert report[case["artifact"]]["load_ms"] < 1000, report  # the README reports the measured figure


def test_strided_copies_call_the_shipped_memref_copy(exported: dict[str, dict]) -> None:
    """The case's code calls memrefCopy (the JIT binds MLIR's runner-utils
    one; the artifact links and runs lib/Runtime/MemrefCopy.c: the round trip
    above compares the two bit for bit)."""
    assert "llvm.call @memrefCopy" in exported["strided_slices"]["fn"].ir("llvm")


def test_manifest_describes_the_model(exported: dict[str, dict]) -> None:
    case = exported["bert_2_4"]
    manifest = json.loads((Path(case["artifact"]) / artifact.MANIFEST).read_text())
    assert manifest["format_version"] == artifact.FORMAT_VERSION
    assert manifest["versions"]["sparse_mlir"] == sm.__version__ and manifest["versions"]["mlir"] == "22.1.8"
    assert manifest["signature"]["inputs"] == [{"shape": [1, 32, 768], "dtype": "float32"}]
    assert manifest["signature"]["output"] == {"shape": [1, 32, 768], "dtype": "float32"}
    stored = {t["name"]: t["stored_as"] for t in manifest["tensors"]}
    assert stored["query.weight"] == "2:4" and stored["intermediate.weight"] == "2:4"
    assert set(artifact.host_isa_flags()) == set(manifest["target"]["isa_flags"])
    assert set(manifest["files"]) == {"model.so", "lib/libsparse_mlir_alloc.so", "lib/libomp.so.5"} \
        or set(manifest["files"]) == {"model.so", "lib/libsparse_mlir_alloc.so"}
    for name, entry in manifest["files"].items():
        data = (Path(case["artifact"]) / name).read_bytes()
        assert entry == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}, name


def test_loaded_model_matches_in_process(exported: dict[str, dict]) -> None:
    """Loaded next to the compiler, too; thread count does not change results."""
    case = exported["mlp_csr"]
    loaded = sm.load(case["artifact"])
    previous = sm.get_num_threads()
    try:
        for threads in (1, 2):
            sm.set_num_threads(threads)
            assert torch.equal(loaded(case["x"][0]), case["expected"][0])
    finally:
        sm.set_num_threads(previous)


def test_call_numbers_round_trip(tmp_path: Path) -> None:
    """A random-fraction activation draws a new mask per call: the loaded model
    replays the same sequence from call 0 and honours reset_call_number."""
    torch.manual_seed(0)
    model = MLP([16, 32, 8]).eval()
    x = torch.randn(4, 16)
    fn = sm.compile(model, {"relu": sm.CSR(sparsifier=sm.RandomFraction(0.5, seed=9))}, example_args=(x,), mode="graph")
    outputs = [fn(x) for _ in range(3)]
    assert not torch.equal(outputs[0], outputs[1])
    loaded = sm.load(fn.export(tmp_path / "random.smlir"))
    assert all(torch.equal(loaded(x), expected) for expected in outputs)
    loaded.reset_call_number(1)
    assert torch.equal(loaded(x), outputs[1])


def _build_c(tmp_path: Path, sources: list[Path], output: str, shared: bool = False) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "the C example needs a C compiler (cc); dev.sh's machines have gcc"
    binary = tmp_path / output
    flags = ["-shared", "-fPIC"] if shared else []
    command = [cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", *flags, f"-I{artifact.c_dir()}",
               *map(str, sources), "-ldl", "-o", str(binary)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, " ".join(command) + "\n" + done.stderr
    return binary


@pytest.fixture(scope="module")
def c_example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_c(tmp_path_factory.mktemp("c"), [REPO_ROOT / "examples" / "c" / "run_model.c",
                                                   artifact.c_dir() / "sparse_mlir_runtime.c"], "run_model")


@pytest.mark.parametrize("label", ["mlp_csr", "bert_csr", "bert_2_4"])
def test_c_example_reproduces_python(exported: dict[str, dict], c_example: Path, label: str, tmp_path: Path) -> None:
    case = exported[label]
    output = tmp_path / "y.bin"
    done = subprocess.run([str(c_example), case["artifact"], case["inputs"][0].replace(".npy", ".bin"), str(output)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    expected = case["expected"][0].numpy()
    assert f"output: float32[{', '.join(map(str, expected.shape))}]" in done.stdout
    assert np.array_equal(np.fromfile(output, np.float32).reshape(expected.shape), expected)


def test_c_example_rejects_a_wrong_input_file(exported: dict[str, dict], c_example: Path, tmp_path: Path) -> None:
    short = tmp_path / "short.bin"
    np.zeros(7, np.float32).tofile(short)
    done = subprocess.run([str(c_example), exported["mlp_csr"]["artifact"], str(short), str(tmp_path / "y.bin")],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "must hold exactly 4096 bytes for input 0" in done.stderr


# ---------------------------------------------------------------- errors


def _copy(case: dict, tmp_path: Path) -> Path:
    target = tmp_path / "copy.smlir"
    shutil.copytree(case["artifact"], target)
    return target


def _write_manifest(path: Path, text: str) -> None:
    (path / artifact.MANIFEST).write_text(text)
    reseal(path)


def _missing_isa_flag() -> str:
    missing = sorted(cpu.ISA_FLAGS - set(artifact.host_isa_flags()) - {"fp", "asimd"})
    if not missing:
        pytest.skip("this CPU has every ISA extension the loader knows: no feature can be missing")
    return next((f for f in ("avx512f", "amx_tile", "avx512_fp16") if f in missing), missing[0])


def _corrupt(path: Path, offset_from_end: int) -> None:
    blob = bytearray(path.read_bytes())
    blob[-offset_from_end] ^= 0xFF
    path.write_bytes(blob)


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-100])


BROKEN = {
    "not_a_directory": (lambda p: (shutil.rmtree(p), p.write_text("hello")), "not a sparse_mlir artifact"),
    "missing_library": (lambda p: (p / artifact.LIBRARY).unlink(), "missing model.so"),
    "bad_magic": (lambda p: (p / artifact.WEIGHTS).write_bytes(b"PK\x03\x04" + bytes(2000)), "bad magic"),
    "truncated": (lambda p: _truncate(p / artifact.WEIGHTS), "truncated"),
    "corrupted_weights": (lambda p: _corrupt(p / artifact.WEIGHTS, 5), "data SHA-256 mismatch"),
    "corrupted_library": (lambda p: _corrupt(p / artifact.LIBRARY, 300), "SHA-256 mismatch"),
    "newer_format": (lambda p: rewrite_header(p, version=artifact.FORMAT_VERSION + 1),
                     f"format version {artifact.FORMAT_VERSION + 1}"),
    "cpu_features": (lambda p: rewrite_header(p, cpu=(" ".join(artifact.host_isa_flags()) + " "
                                                       + _missing_isa_flag()).encode()),
                     "lacks"),
    "manifest_not_an_object": (lambda p: _write_manifest(p, "[]"), "not a sparse_mlir manifest"),
    "manifest_without_signature": (lambda p: _write_manifest(p, '{"target": "x86_64"}'),
                                   "not a sparse_mlir manifest"),
}


ADVICE = ("export it again", "export the model again", "Export the model again", "copy the artifact again",
          "pass the directory fn.export() wrote")


@pytest.mark.parametrize("breakage", BROKEN)
def test_broken_artifacts_raise_clear_errors(exported: dict[str, dict], tmp_path: Path, breakage: str) -> None:
    path = _copy(exported["mlp_csr"], tmp_path)
    damage, message = BROKEN[breakage]
    damage(path)
    with pytest.raises(sm.ArtifactError, match=message) as error:
        sm.load(path)
    assert any(advice in str(error.value) for advice in ADVICE)  # says what to do


def test_an_artifact_exported_again_in_place_runs_its_new_code(tmp_path: Path) -> None:
    """The dynamic loader keeps the first model.so it loaded from a path: a
    second load of the same path after a new export ran the old code on the
    new weights (wrong results, or a crash when the signatures differed)."""
    path = tmp_path / "model.smlir"
    x = torch.randn(4, 16)
    first = sm.compile(torch.nn.Sequential(torch.nn.Linear(16, 8)), {}, (x,), mode="graph")
    first.export(path)
    assert torch.equal(sm.load(path)(x), first(x))
    second = sm.compile(torch.nn.Sequential(torch.nn.Linear(16, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3)),
                        {"0.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.5))}, (x,), mode="graph")
    second.export(path)
    reloaded = sm.load(path)
    assert torch.equal(reloaded(x), second(x)) and not list(path.glob(".model-*"))


def test_other_machine_kind_is_refused(exported: dict[str, dict], tmp_path: Path) -> None:
    path = _copy(exported["mlp_csr"], tmp_path)
    manifest = json.loads((path / artifact.MANIFEST).read_text())
    manifest["target"]["machine"] = "riscv64"
    _write_manifest(path, json.dumps(manifest))
    with pytest.raises(sm.ArtifactError, match="compiled for riscv64"):
        sm.load(path)


def test_wrong_inputs_raise_spec_errors(exported: dict[str, dict]) -> None:
    loaded = sm.load(exported["mlp_csr"]["artifact"])
    with pytest.raises(sm.SpecError, match=r"input 0: expected shape \(16, 64\)"):
        loaded(torch.randn(8, 64))
    with pytest.raises(sm.SpecError, match="expected dtype torch.float32"):
        loaded(torch.randn(16, 64, dtype=torch.float64))
    with pytest.raises(sm.SpecError, match="expected 1 inputs, got more"):
        loaded(torch.randn(16, 64), torch.randn(16, 64))


def test_export_errors(exported: dict[str, dict], tmp_path: Path) -> None:
    fn = exported["mlp_csr"]["fn"]
    occupied = tmp_path / "notes.txt"
    occupied.write_text("keep me")
    with pytest.raises(sm.ArtifactError, match="exists and is not a sparse_mlir artifact"):
        fn.export(occupied)
    assert occupied.read_text() == "keep me"
    with pytest.raises(sm.ArtifactError, match="needs a C compiler driver|linking the compiled code failed"):
        export.export(fn, tmp_path / "a.smlir", linker=str(tmp_path / "no-such-cc"))
    again = fn.export(exported["mlp_csr"]["artifact"])  # an existing artifact is replaced
    assert torch.equal(sm.load(again)(exported["mlp_csr"]["x"][0]), exported["mlp_csr"]["expected"][0])


# ---------------------------------------------------------------- the C API's own checks


@pytest.fixture(scope="module")
def c_runtime(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    library = _build_c(tmp_path_factory.mktemp("c_runtime"), [artifact.c_dir() / "sparse_mlir_runtime.c"],
                       "libsparse_mlir_runtime.so", shared=True)
    runtime = ctypes.CDLL(str(library))
    runtime.smlir_load.restype = ctypes.c_void_p
    runtime.smlir_load.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    runtime.smlir_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                  ctypes.c_char_p, ctypes.c_size_t]
    runtime.smlir_free.argtypes = [ctypes.c_void_p]
    return runtime


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * 8)]


def _tensor(array: np.ndarray, dtype_code: int = 1) -> _Tensor:
    tensor = _Tensor(array.ctypes.data, dtype_code, array.ndim)
    tensor.shape[:array.ndim] = array.shape
    return tensor


@pytest.mark.parametrize("breakage", ["truncated", "corrupted_weights", "corrupted_library", "newer_format",
                                      "cpu_features", "bad_magic"])
def test_c_loader_refuses_broken_artifacts(exported: dict[str, dict], c_runtime: ctypes.CDLL, tmp_path: Path,
                                           breakage: str) -> None:
    path = _copy(exported["mlp_csr"], tmp_path)
    damage, message = BROKEN[breakage]
    damage(path)
    error = ctypes.create_string_buffer(1024)
    assert c_runtime.smlir_load(str(path).encode(), error, len(error)) is None
    assert message in error.value.decode()
    assert any(advice in error.value.decode() for advice in ADVICE)


def test_c_api_checks_inputs_and_runs(exported: dict[str, dict], c_runtime: ctypes.CDLL) -> None:
    case = exported["mlp_csr"]
    error = ctypes.create_string_buffer(1024)
    model = c_runtime.smlir_load(case["artifact"].encode(), error, len(error))
    assert model, error.value
    try:
        x = case["x"][0].numpy()
        out = np.empty(tuple(case["expected"][0].shape), np.float32)
        output = _tensor(out)
        wrong_shape = _tensor(np.zeros((8, 64), np.float32))
        assert c_runtime.smlir_run(model, ctypes.byref(wrong_shape), 1, ctypes.byref(output), error, len(error)) == -1
        assert "input 0: expected a dense float32[16, 64] tensor" in error.value.decode()
        assert "got float32[8, 64]" in error.value.decode()
        wrong_dtype = _tensor(x, dtype_code=2)
        assert c_runtime.smlir_run(model, ctypes.byref(wrong_dtype), 1, ctypes.byref(output), error, len(error)) == -1
        assert "got float64[16, 64]" in error.value.decode()
        assert c_runtime.smlir_run(model, None, 0, ctypes.byref(output), error, len(error)) == -1
        assert "expected 1 inputs, got 0" in error.value.decode()
        good = _tensor(x)
        assert c_runtime.smlir_run(model, ctypes.byref(good), 1, ctypes.byref(output), error, len(error)) == 0
        assert np.array_equal(out, case["expected"][0].numpy())
    finally:
        c_runtime.smlir_free(model)


def test_importing_sparse_mlir_does_not_load_the_compiler(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        import sys
        import sparse_mlir as sm
        assert "mlir" not in sys.modules and "torch_mlir" not in sys.modules
        assert sm.CSR().format_name == "csr"      # first use of a compiler name loads MLIR
        assert "mlir" in sys.modules
        print("OK")
    """)
    done = _run_python(code, cwd=tmp_path)
    assert done.returncode == 0 and "OK" in done.stdout, done.stdout + done.stderr
