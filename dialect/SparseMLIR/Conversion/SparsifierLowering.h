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
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"

#include <string>

namespace mlir::smlir {

/// The name of the i64 function argument that numbers the calls of a
/// compiled function: #smlir.random_fraction draws a new mask per call.
constexpr StringLiteral kCallNumberAttrName = "smlir.call_number";

/// The call number of the function around `op` as an index: its
/// `smlir.call_number` argument, or 0 (the masks of call 0). Built at `b`'s
/// insertion point, outside any kernel.
Value buildCallNumber(OpBuilder &b, Location loc, Operation *op);

/// Whether the streaming sparsifier `sparsifier` (keep_all, threshold,
/// random_fraction) keeps `element`, the value at `indices` of a tensor with
/// dimension sizes `sizes`, as an i1. Built only from single-result
/// operations that upstream sparsification accepts inside a kernel body;
/// random fraction calls a private function it adds to `module`.
/// Returns null for keep_all (every nonzero is kept).
Value buildStreamingKeep(OpBuilder &b, Location loc, Attribute sparsifier,
                         Value element, ValueRange indices, ValueRange sizes,
                         Value callNumber, ModuleOp module);

/// `keep ? element : +0.0`, with bit operations instead of arith.select
/// (which sparsification does not accept in a kernel body).
Value buildKeepOrZero(OpBuilder &b, Location loc, Value keep, Value element);

/// Whether `sparsifier` has an element-wise (streaming) lowering.
bool isStreamingSparsifier(Attribute sparsifier);

//===----------------------------------------------------------------------===//
// Blocking and materializing sparsifiers (MaterializingSparsifiers.cpp)
//
// Each builder returns the dense masked tensor (zeros where dropped) of a
// static-shaped f16 / bf16 / f32 / f64 source; sparse_mlir/weights.py is the
// reference, NaN ranking below every number.
//===----------------------------------------------------------------------===//

/// Why `sparsifier` (scalar_fraction, block_fraction or transposable
/// nm_magnitude) on a `type` source has no builder below; empty when it has
/// one, and for every other sparsifier.
std::string getMissingMaskLoweringReason(Attribute sparsifier,
                                         RankedTensorType type);

/// #smlir.scalar_fraction: keeps the count - floor(fraction * count) largest
/// |x|, ties to the lower row-major index.
Value buildScalarFractionMask(OpBuilder &b, Location loc, Value source,
                              double fraction);

/// #smlir.block_fraction on a matrix: drops the floor(fraction * tiles)
/// blockRows x blockCols tiles with the smallest f64 L1 norm, ties to the
/// lower row-major tile index kept first.
Value buildBlockFractionMask(OpBuilder &b, Location loc, Value source,
                             double fraction, int64_t blockRows,
                             int64_t blockCols);

/// #smlir.nm_magnitude<transposable = true> on a matrix: in every m x m
/// tile, greedily by |x| descending (ties to the lower index in the tile),
/// keeps an element while its row and its column hold fewer than n.
Value buildTransposableNMMask(OpBuilder &b, Location loc, Value source,
                              int64_t n, int64_t m);

/// The i64 key of element `index` (an index value) of a selection.
using KeyFn = function_ref<Value(OpBuilder &, Location, Value)>;
/// Writes element `index`'s decision `keep` (i1) into `out`; returns it.
using KeepWriteFn =
    function_ref<Value(OpBuilder &, Location, Value index, Value keep,
                       Value out)>;

/// Keeps the `keep` largest of `count` unsigned keys (each below
/// 2^keyBits), ties to the lower index: a radix select (one histogram pass
/// per 16-bit digit, no sort), then one pass in index order that calls
/// `write` for every index, threading `init` through. Returns the last
/// `write` result.
Value buildKeepLargest(OpBuilder &b, Location loc, int64_t count, int64_t keep,
                       unsigned keyBits, KeyFn keyAt, Value init,
                       KeepWriteFn write);

} // namespace mlir::smlir

#endif // SPARSE_MLIR_CONVERSION_SPARSIFIERLOWERING_H
