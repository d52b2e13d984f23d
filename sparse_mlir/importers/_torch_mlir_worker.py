"""Runs torch-mlir's FX importer in its own process (run as a script).

usage: python _torch_mlir_worker.py PROGRAM.pt2 OUT.mlir

torch-mlir bundles its own LLVM and MLIR. Loaded into the process that also
holds the `mlir` wheel they clash: duplicate LLVM command-line options abort
the process ("Option ... registered more than once"), or, loaded first, the
JIT computes garbage. So the importer never runs in the user's process: it
gets a `torch.export.save`d program and writes linalg-on-tensors text.
This script imports nothing from sparse_mlir (that would load `mlir`).
"""

from __future__ import annotations

import sys


def main() -> int:
    program_path, out_path = sys.argv[1], sys.argv[2]
    import torch
    from torch_mlir import fx

    program = torch.export.load(program_path)
    module = fx.export_and_import(program, output_type="linalg-on-tensors", func_name="main")
    with open(out_path, "w") as out:
        out.write(str(module))
    return 0


if __name__ == "__main__":
    sys.exit(main())
