//===- SDDMMRows.h - the row kernels over a CSR mask ------------*- C++ -*-===//
//
// Private to lib/: the grouped dot products shared by smlir.sddmm_rows and
// smlir.sparse_attention, and the two kernels' builders.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_CODEGEN_SDDMMROWS_H
#define SPARSE_MLIR_CODEGEN_SDDMMROWS_H

#include "KernelBuilder.h"
#include "SparseMLIR/IR/SparseMLIROps.h"

#include <string>

namespace mlir::smlir::codegen {

/// Dot products of one row of D floats, held as ceil(D / W) vectors of W
/// lanes (the last read masked past D), with rows of a [B, N, D] buffer:
/// G at a time summed together into one vector<G> by a transpose tree, so
/// no entry pays a horizontal reduction of its own.
class GroupedDots : public KernelBuilder {
public:
  GroupedDots(OpBuilder &b, Location loc, int64_t dim, int64_t lanes,
              int64_t group);

  /// memref[h, row, :] as the chunks `dot` and `groupSums` take.
  SmallVector<Value> loadRow(Value memref, Value h, Value row);
  /// W-lane partial sums of `row` . memref[h, col, :] (two FMA chains:
  /// half the latency).
  Value dot(ArrayRef<Value> row, Value memref, Value h, Value col);
  /// vector<G>: `row`'s dot products with memref[h, cols[g], :].
  Value groupSums(ArrayRef<Value> row, Value memref, Value h,
                  ArrayRef<Value> cols);
  /// The f32 sum of `dot`'s lanes.
  Value total(Value partial);
  /// memref.prefetch of memref[h, col, :], one per chunk.
  void prefetchRow(Value memref, Value h, Value col);
  /// A ranked tensor operand's buffer (read only).
  Value buffer(Value tensor);
  /// Dimension `d` of `memref`: a constant where static.
  Value dimOf(Value memref, int64_t d);

  int64_t dim, lanes, group, chunks;
  VectorType vecType;

private:
  Value loadChunk(Value memref, Value h, Value row, int64_t chunk);
};

/// A size in a kernel's name: the number, or "dyn".
std::string sizeName(int64_t size);

/// `op`'s kernel in an smlir.kernel, writing into `destination` (a [B, nnz]
/// f32 buffer) or, when null, a new buffer; returns the buffer.
Value buildSDDMMRowsKernel(OpBuilder &b, SDDMMRowsOp op, Value destination);

/// `op`'s fused kernel in an smlir.kernel; returns out [B, M, F] (a tensor).
Value buildSparseAttentionKernel(OpBuilder &b, SparseAttentionOp op);

} // namespace mlir::smlir::codegen

#endif // SPARSE_MLIR_CODEGEN_SDDMMROWS_H
