"""Export a compiled model, then run it without the compiler: from Python and from C.

1. compile an MLP with 80% CSR weights and `fn.export()` it;
2. load it in a fresh Python process in which importing `mlir` or
   `torch_mlir` fails, and check the outputs are bit for bit the same;
3. build examples/c/run_model.c against the C loader and run the artifact
   from C (skipped, with a message, where no C compiler is installed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import torch

import sparse_mlir as sm
from sparse_mlir.runtime.artifact import c_dir
from sparse_mlir.models import MLP

WIDTHS = [256, 512, 128]

LOADER = textwrap.dedent("""
    import sys, time
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("mlir", "torch_mlir"):
                raise ImportError(f"{name} is blocked: the artifact must run without the compiler")
    sys.meta_path.insert(0, Block())
    import numpy as np, torch
    import sparse_mlir as sm
    start = time.perf_counter()
    fn = sm.load(sys.argv[1], expect_sha256=sys.argv[4])   # the hash published with the model
    loaded = time.perf_counter()
    y = fn(torch.from_numpy(np.fromfile(sys.argv[2], np.float32).reshape(fn.input_specs[0][0])))
    print(f"python: load {(loaded - start) * 1e3:.1f} ms, first call {(time.perf_counter() - loaded) * 1e3:.1f} ms")
    y.numpy().tofile(sys.argv[3])
""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, help="where to write the artifact (default: a temporary directory)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="sparse_mlir_deploy_"))
    out.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(0)
    model = MLP(WIDTHS).eval()
    x = torch.randn(64, WIDTHS[0])
    encodings = {f"layers.{i}.weight": sm.CSR(sparsifier=sm.ScalarFraction(0.8)) for i in range(len(WIDTHS) - 1)}
    fn = sm.compile(model, encodings, example_args=(x,), mode="graph")
    expected = fn(x).numpy()
    artifact = fn.export(out / "mlp.smlir")
    size = sum(f.stat().st_size for f in artifact.rglob("*") if f.is_file())
    print(f"exported {artifact} ({size / 1e6:.1f} MB: {', '.join(sorted(p.name for p in artifact.iterdir()))})")
    published = sm.artifact_sha256(artifact)   # publish it beside the model; loaders check it
    print(f"artifact sha256 {published}")
    x.numpy().tofile(out / "input.bin")

    ok = True
    python_out = out / "python_output.bin"
    done = subprocess.run([sys.executable, "-c", LOADER, str(artifact), str(out / "input.bin"), str(python_out),
                           published], capture_output=True, text=True, cwd=out)
    print(done.stdout.strip() or done.stderr.strip())
    same = done.returncode == 0 and np.array_equal(np.fromfile(python_out, np.float32).reshape(expected.shape),
                                                   expected)
    print(f"python without the compiler: {'bit-exact' if same else 'MISMATCH'}")
    ok &= same

    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        print("C: skipped (no C compiler on PATH)")
    else:
        runner = out / "run_model"
        subprocess.run([cc, "-O2", f"-I{c_dir()}", str(Path(__file__).parent / "c" / "run_model.c"),
                        str(c_dir() / "sparse_mlir_runtime.c"), "-ldl", "-o", str(runner)], check=True)
        c_out = out / "c_output.bin"
        done = subprocess.run([str(runner), str(artifact), str(out / "input.bin"), str(c_out)],
                              capture_output=True, text=True, env={**os.environ, "SMLIR_EXPECT_SHA256": published})
        print(done.stdout.strip() or done.stderr.strip())
        same = done.returncode == 0 and np.array_equal(np.fromfile(c_out, np.float32).reshape(expected.shape),
                                                       expected)
        print(f"C: {'bit-exact' if same else 'MISMATCH'}")
        ok &= same
    print("OK" if ok else "MISMATCH")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
