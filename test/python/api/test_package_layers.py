"""The package's layers: `sparse_mlir.runtime` runs compiled regions and
artifacts without MLIR and never imports the compiler; the compiler imports
the runtime, never the other way."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import sparse_mlir

PACKAGE = Path(sparse_mlir.__file__).resolve().parent
# Top-level modules the runtime may use: plain Python / numpy, no MLIR.
RUNTIME_MAY_IMPORT = ("sparse_mlir.runtime", "sparse_mlir.errors", "sparse_mlir.nm_layout", "sparse_mlir.philox")


def _imports(path: Path) -> set[str]:
    """Every module a file imports (absolute names; relative ones resolved)."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def test_runtime_modules_import_no_compiler_and_no_mlir() -> None:
    offending = {}
    for path in sorted((PACKAGE / "runtime").rglob("*.py")):
        bad = {m for m in _imports(path) if (m.startswith("sparse_mlir") and m != "sparse_mlir"
                                              and not m.startswith(RUNTIME_MAY_IMPORT))
               or m.split(".")[0] in ("mlir", "torch_mlir")}
        bad = {m for m in bad if not any(m.startswith(f"{ok}.") for ok in RUNTIME_MAY_IMPORT)}
        if bad:
            offending[str(path.relative_to(PACKAGE))] = sorted(bad)
    assert not offending, offending


def test_importing_the_whole_runtime_loads_no_mlir(tmp_path: Path) -> None:
    modules = sorted(".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
                     for p in (PACKAGE / "runtime").rglob("*.py"))
    script = ("import importlib, sys\n"
              f"for name in {modules!r}:\n    importlib.import_module(name)\n"
              "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('mlir', 'torch_mlir') "
              "or m.startswith('sparse_mlir.compiler'))\n"
              "print(loaded)\nsys.exit(1 if loaded else 0)\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": ""})
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(modules) >= 10   # the walk found the runtime


def test_the_compiler_is_imported_by_nothing_outside_it_but_lazily() -> None:
    """Top-level modules reach the compiler only through `sparse_mlir`'s lazy names."""
    offending = {}
    for path in sorted(PACKAGE.glob("*.py")):
        bad = sorted(m for m in _imports(path) if m.startswith("sparse_mlir.compiler"))
        if bad:
            offending[path.name] = bad
    assert not offending, offending
