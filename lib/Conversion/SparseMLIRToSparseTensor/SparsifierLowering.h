//===- SparsifierLowering.h - materializing sparsifier builders -*- C++ -*-===//
//
// Private to convert-smlir-to-sparse-tensor: the builders of the sparsifiers
// that need the whole tensor (streaming ones build their keep condition
// through SparsifierAttrInterface::buildKeep).
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_LIB_CONVERSION_SPARSIFIERLOWERING_H
#define SPARSE_MLIR_LIB_CONVERSION_SPARSIFIERLOWERING_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"

#include <string>

namespace mlir::smlir {

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

#endif // SPARSE_MLIR_LIB_CONVERSION_SPARSIFIERLOWERING_H
