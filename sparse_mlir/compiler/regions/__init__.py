"""Sparse regions: torch runs the model's graph, our compiler the sparse parts.

`compile_regions` (what `sparse_mlir.compile(..., mode="regions")` runs)
captures the model with torch.export (dynamic batch / sequence dims, kwargs,
any output structure), replaces each F.linear whose weight is encoded by the
custom op `sparse_mlir::linear` (`sparse_mlir.runtime.ops`), and compiles the
op's kernels through the same import (torch-mlir), dialect and named
pipelines as whole models. A kernel is specialised per token count, built on
first use of that count, and shared by every weight of the same shape and
format; the cost model measures it against torch's F.linear and keeps torch
where ours is not faster.
"""
