//===- SparsifierLowering.h - shared sparsifier builders --------*- C++ -*-===//
//
// Builders shared by convert-smlir-to-sparse-tensor (a sparsifier after its
// producer) and smlir-fuse-streaming-sparsifiers (a sparsifier inside its
// producer's loop body).
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_CONVERSION_SPARSIFIERLOWERING_H
#define SPARSE_MLIR_CONVERSION_SPARSIFIERLOWERING_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace mlir::smlir {

/// The name of the i64 function argument that numbers the calls of a
/// compiled function: #smlir.random_fraction draws a new mask per call.
constexpr StringLiteral kCallNumberAttrName = "smlir.call_number";

/// The call-number argument of the function around `op`, or null (the mask
/// is then that of call 0).
Value findCallNumber(Operation *op);

/// Whether the streaming sparsifier `sparsifier` (keep_all, threshold,
/// random_fraction) keeps `element`, the value at `indices` of a tensor with
/// dimension sizes `sizes`, as an i1. Built only from single-result
/// arithmetic that upstream sparsification accepts inside a kernel body.
/// Returns null for keep_all (every nonzero is kept).
Value buildStreamingKeep(OpBuilder &b, Location loc, Attribute sparsifier,
                         Value element, ValueRange indices, ValueRange sizes,
                         Value callNumber);

/// `keep ? element : +0.0`, with bit operations instead of arith.select
/// (which sparsification does not accept in a kernel body).
Value buildKeepOrZero(OpBuilder &b, Location loc, Value keep, Value element);

/// Whether `sparsifier` has an element-wise (streaming) lowering.
bool isStreamingSparsifier(Attribute sparsifier);

} // namespace mlir::smlir

#endif // SPARSE_MLIR_CONVERSION_SPARSIFIERLOWERING_H
