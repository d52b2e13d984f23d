"""What compiled models need at run time, without MLIR.

- `ops`: the torch custom ops `sparse_mlir::linear` / `::conv2d` (with fake
  implementations, so torch.export and torch.compile trace through them)
  and the registry of region kernels they dispatch to;
- `memref`, `callable`: the kernels' calling convention (memref
  descriptors, checked inputs);
- `artifact`: the artifact format and `load()`; `threads`, `memory`,
  `cpu`: OpenMP threads, the allocation cache, host CPU features;
- `versions`: optimizer steps bump the version counters regions follow
  (fused optimizers do not);
- `cuda`: running target="cuda" code.

The compiler (`sparse_mlir.compiler`) builds kernels and imports this
package; this package never imports the compiler.
"""
