"""What compiled sparse regions need at run time, without MLIR.

`ops` registers the torch custom op `sparse_mlir::linear` (with a fake
implementation, so torch.export and torch.compile trace through it) and the
registry of region kernels it dispatches to. The compiler side
(`sparse_mlir.regions`) builds the kernels and imports this package; this
package never imports the compiler.
"""
