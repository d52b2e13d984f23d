//===- RegisterTranspose.h - 8 x 8 f32 transposes in registers --*- C++ -*-===//
//
// Shared by the micro-kernels that change which dimension is contiguous
// (smlir-lower-sparse-linear packs x feature-major; smlir-vectorize-rows
// lowers transposes that move the innermost dimension).
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_TRANSFORMS_REGISTERTRANSPOSE_H
#define SPARSE_MLIR_TRANSFORMS_REGISTERTRANSPOSE_H

#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::smlir {

/// The 8 x 8 transpose of `rows` (8 vectors of 8 f32 lanes): column c of the
/// result holds lane c of every row. The AVX network: unpack pairs of rows,
/// shuffle pairs of pairs, then exchange 128-bit halves (24 shuffles).
inline SmallVector<Value> transpose8x8(OpBuilder &b, Location loc,
                                       ArrayRef<Value> rows) {
  auto shuffle = [&](Value l, Value r, ArrayRef<int64_t> mask) -> Value {
    return vector::ShuffleOp::create(b, loc, l, r, mask);
  };
  SmallVector<Value> pairs(8), quads(8), columns(8);
  for (int64_t i = 0; i < 4; ++i) { // [a0 b0 a1 b1 | a4 b4 a5 b5], [a2 b2 ..]
    pairs[2 * i] =
        shuffle(rows[2 * i], rows[2 * i + 1], {0, 8, 1, 9, 4, 12, 5, 13});
    pairs[2 * i + 1] =
        shuffle(rows[2 * i], rows[2 * i + 1], {2, 10, 3, 11, 6, 14, 7, 15});
  }
  for (int64_t h = 0; h < 8; h += 4) { // [a0 b0 c0 d0 | a4 b4 c4 d4], ...
    for (int64_t i = 0; i < 2; ++i) {
      quads[h + 2 * i] =
          shuffle(pairs[h + i], pairs[h + i + 2], {0, 1, 8, 9, 4, 5, 12, 13});
      quads[h + 2 * i + 1] = shuffle(pairs[h + i], pairs[h + i + 2],
                                     {2, 3, 10, 11, 6, 7, 14, 15});
    }
  }
  for (int64_t c = 0; c < 4; ++c) {
    columns[c] = shuffle(quads[c], quads[c + 4], {0, 1, 2, 3, 8, 9, 10, 11});
    columns[c + 4] =
        shuffle(quads[c], quads[c + 4], {4, 5, 6, 7, 12, 13, 14, 15});
  }
  return columns;
}

} // namespace mlir::smlir

#endif // SPARSE_MLIR_TRANSFORMS_REGISTERTRANSPOSE_H
