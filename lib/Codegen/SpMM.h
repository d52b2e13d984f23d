//===- SpMM.h - the CPU kernel of smlir.spmm --------------------*- C++ -*-===//

#ifndef SPARSE_MLIR_CODEGEN_SPMM_H
#define SPARSE_MLIR_CODEGEN_SPMM_H

#include "SparseMLIR/IR/SparseMLIROps.h"

namespace mlir::smlir::codegen {

/// The register tile of one smlir.spmm kernel.
struct SpMMTile {
  int64_t lanes;   // f32 lanes per vector
  int64_t vectors; // vectors of features kept in registers per row
  int64_t entries; // stored entries per iteration (accumulator sets)
  int64_t chunks;  // row ranges of equal nnz (parallel iterations)
  int64_t prefetch; // entries ahead whose h row is prefetched (0: none)
};

/// The tile for F features when the options leave `vectors` / `entries`
/// at 0: as many vectors as F needs up to half the register file (16
/// vectors at 16 lanes, 8 at 8), two entries at a time while both
/// accumulator sets fit in that half.
SpMMTile defaultSpMMTile(int64_t features, int64_t lanes, int64_t vectors,
                         int64_t entries, int64_t chunks, int64_t prefetch);

/// Emits `op` (f32) as loops in an smlir.kernel; returns y [M, F].
Value buildSpMMKernel(OpBuilder &b, SpMMOp op, const SpMMTile &tile);

} // namespace mlir::smlir::codegen

#endif // SPARSE_MLIR_CODEGEN_SPMM_H
