//===- RowKernel.h - vector loops over the rows of a generic ----*- C++ -*-===//
//
// The builder behind smlir-vectorize-rows: a dense f32 linalg.generic,
// contiguous along its innermost loop, written as vector loops over its
// rows (element-wise, or a reduction of the innermost loop into U vector
// accumulators). The pass decides which ops qualify; this builds them.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_CODEGEN_ROWKERNEL_H
#define SPARSE_MLIR_CODEGEN_ROWKERNEL_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <optional>

namespace mlir::smlir::codegen {

/// Largest |n| of an x^n unrolled into multiplications.
constexpr int64_t kMaxUnrolledExponent = 16;

/// An op this pass lowers; for a reduction, each result's combiner op.
struct RowKernel {
  linalg::GenericOp op;
  bool reduces = false;
  SmallVector<Operation *> combiners;
};

/// The vector.reduction kind of a combiner op, if it is one we lower.
std::optional<vector::CombiningKind> combiningKind(Operation *op);

/// Whether `map` (a row access) reads along the innermost loop.
bool readsAlongRow(AffineMap map, unsigned innermost);

/// The constant exponent of an x^n, if it is one.
std::optional<int64_t> constantExponent(math::FPowIOp power);

/// Builds `match` as vector loops of `lanes` lanes (`vectors` accumulators
/// per result for a reduction) before it; returns the values replacing its
/// results.
SmallVector<Value> buildRowKernel(OpBuilder &b, const RowKernel &match,
                                  int64_t lanes, int64_t vectors);

} // namespace mlir::smlir::codegen

#endif // SPARSE_MLIR_CODEGEN_ROWKERNEL_H
