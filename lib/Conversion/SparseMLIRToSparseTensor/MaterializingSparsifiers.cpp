//===- MaterializingSparsifiers.cpp - whole-tensor and tile sparsifiers ---===//
//
// Dense masked tensors for the sparsifiers that look at more than one
// element: scalar and block fraction (materializing: a radix select over the
// whole tensor) and transposable n:m magnitude (blocking: a greedy choice per
// m x m tile). sparse_mlir/weights.py is the reference for all three.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparsifierLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>

using namespace mlir;
using namespace mlir::smlir;

/// One radix digit: 16 bits, so a histogram is 2^16 counters (512 KiB).
constexpr unsigned kDigitBits = 16;
constexpr int64_t kBuckets = int64_t{1} << kDigitBits;

static Value constantIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

static Value constantI64(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantOp::create(b, loc, b.getI64Type(),
                                   b.getI64IntegerAttr(v));
}

static Value constantZero(OpBuilder &b, Location loc, Type type) {
  return arith::ConstantOp::create(b, loc, type, b.getZeroAttr(type));
}

/// A tensor of `shape` x `elementType` filled with `value`.
static Value buildFilled(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                         Type elementType, Value value) {
  Value empty = tensor::EmptyOp::create(b, loc, shape, elementType);
  return linalg::FillOp::create(b, loc, ValueRange{value}, ValueRange{empty})
      .getResult(0);
}

/// `for (i = 0; i < count; ++i)` carrying `inits`; `body` returns the values
/// to yield.
static scf::ForOp
buildCountedLoop(OpBuilder &b, Location loc, int64_t count, ValueRange inits,
                 function_ref<SmallVector<Value>(OpBuilder &, Location, Value,
                                                 ValueRange)>
                     body) {
  return scf::ForOp::create(
      b, loc, constantIndex(b, loc, 0), constantIndex(b, loc, count),
      constantIndex(b, loc, 1), inits,
      [&](OpBuilder &nb, Location nloc, Value i, ValueRange iterArgs) {
        scf::YieldOp::create(nb, nloc, body(nb, nloc, i, iterArgs));
      });
}

static bool isLoweredElementType(Type type) {
  return isa<Float16Type, BFloat16Type, Float32Type, Float64Type>(type);
}

/// An unsigned i64 key that orders magnitudes: NaN -> 0, otherwise the bit
/// pattern of |x| plus one. Non-negative IEEE floats order as their bit
/// patterns, so key(a) > key(b) exactly when |a| > |b|, and NaN ranks below
/// every number, as it does in numpy's argsort of -|x|. Keys are below
/// 2^width.
static Value buildMagnitudeKey(OpBuilder &b, Location loc, Value x) {
  auto floatType = cast<FloatType>(x.getType());
  Type i64 = b.getI64Type();
  Value bits = arith::BitcastOp::create(
      b, loc, b.getIntegerType(floatType.getWidth()),
      math::AbsFOp::create(b, loc, x));
  if (floatType.getWidth() < 64)
    bits = arith::ExtUIOp::create(b, loc, i64, bits);
  Value key = arith::AddIOp::create(b, loc, bits, constantI64(b, loc, 1));
  Value isNaN =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x);
  return arith::SelectOp::create(b, loc, isNaN, constantI64(b, loc, 0), key);
}

static unsigned digitsForWidth(unsigned width) {
  return (width + kDigitBits - 1) / kDigitBits;
}

/// The keys to keep, as (cut, ties): keep a key above `cut`, and the first
/// `ties` keys equal to it in index order. Radix select from the most
/// significant 16-bit digit down: a histogram pass over the keys that match
/// the digits found so far, then a scan of the histogram from the top bucket
/// for the one holding the `need`-th largest key. O(count) per digit,
/// O(2^16) memory, no sort. Needs 0 < keep < count.
static std::pair<Value, Value> buildKeyCut(OpBuilder &b, Location loc,
                                           int64_t count, int64_t keep,
                                           unsigned digits, KeyFn keyAt) {
  Type i64 = b.getI64Type();
  Value zero = constantI64(b, loc, 0), one = constantI64(b, loc, 1);
  Value digitMask = constantI64(b, loc, kBuckets - 1);
  Value prefix = zero;                    // the cut's digits found so far
  Value need = constantI64(b, loc, keep); // keys still to keep in the prefix
  for (unsigned digit = 0; digit < digits; ++digit) {
    unsigned shift = kDigitBits * (digits - 1 - digit);
    Value shiftValue = constantI64(b, loc, shift);
    Value prefixShift = constantI64(b, loc, shift + kDigitBits);
    // A fresh histogram per digit: reusing one would make bufferization
    // copy it anyway.
    Value histogramInit = buildFilled(b, loc, {kBuckets}, i64, zero);
    Value histogram =
        buildCountedLoop(
            b, loc, count, histogramInit,
            [&](OpBuilder &nb, Location nloc, Value i, ValueRange args) {
              Value key = keyAt(nb, nloc, i);
              Value bucket = arith::IndexCastUIOp::create(
                  nb, nloc, nb.getIndexType(),
                  arith::AndIOp::create(
                      nb, nloc,
                      arith::ShRUIOp::create(nb, nloc, key, shiftValue),
                      digitMask));
              // Only keys in the prefix's bucket count (all of them for the
              // top digit, where a shift by 64 would be poison).
              Value increment = one;
              if (digit > 0)
                increment = arith::ExtUIOp::create(
                    nb, nloc, i64,
                    arith::CmpIOp::create(
                        nb, nloc, arith::CmpIPredicate::eq,
                        arith::ShRUIOp::create(nb, nloc, key, prefixShift),
                        prefix));
              Value old = tensor::ExtractOp::create(nb, nloc, args[0], bucket);
              Value updated = arith::AddIOp::create(nb, nloc, old, increment);
              return SmallVector<Value>{tensor::InsertOp::create(
                  nb, nloc, updated, args[0], bucket)};
            })
            .getResult(0);
    // Scan from the top bucket: the first bucket where the keys seen reach
    // `need` holds the cut; of its keys, need - (keys above it) are kept.
    Value falseValue = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
    Value top = constantI64(b, loc, kBuckets - 1);
    auto scan = buildCountedLoop(
        b, loc, kBuckets, ValueRange{zero, zero, falseValue, zero},
        [&](OpBuilder &nb, Location nloc, Value d, ValueRange args) {
          Value seen = args[0], found = args[2];
          Value bucket = arith::SubIOp::create(
              nb, nloc, top,
              arith::IndexCastUIOp::create(nb, nloc, nb.getI64Type(), d));
          Value inBucket = tensor::ExtractOp::create(
              nb, nloc, histogram,
              ValueRange{arith::IndexCastUIOp::create(
                  nb, nloc, nb.getIndexType(), bucket)});
          Value seenAfter = arith::AddIOp::create(nb, nloc, seen, inBucket);
          Value reached = arith::CmpIOp::create(
              nb, nloc, arith::CmpIPredicate::sge, seenAfter, need);
          Value first = arith::AndIOp::create(
              nb, nloc, reached,
              arith::XOrIOp::create(
                  nb, nloc, found,
                  arith::ConstantOp::create(nb, nloc, nb.getBoolAttr(true))));
          Value cutDigit =
              arith::SelectOp::create(nb, nloc, first, bucket, args[1]);
          Value left = arith::SelectOp::create(
              nb, nloc, first, arith::SubIOp::create(nb, nloc, need, seen),
              args[3]);
          return SmallVector<Value>{
              seenAfter, cutDigit, arith::OrIOp::create(nb, nloc, found, reached),
              left};
        });
    prefix = arith::OrIOp::create(
        b, loc,
        arith::ShLIOp::create(b, loc, prefix,
                              constantI64(b, loc, kDigitBits)),
        scan.getResult(1));
    need = scan.getResult(3);
  }
  return {prefix, need};
}

Value mlir::smlir::buildKeepLargest(OpBuilder &b, Location loc, int64_t count,
                                    int64_t keep, unsigned keyBits,
                                    KeyFn keyAt, Value init,
                                    KeepWriteFn write) {
  // Keeping none or all needs no selection, only the pass that writes.
  if (keep <= 0 || keep >= count) {
    Value decision =
        arith::ConstantOp::create(b, loc, b.getBoolAttr(keep >= count));
    return buildCountedLoop(
               b, loc, count, init,
               [&](OpBuilder &nb, Location nloc, Value i, ValueRange args) {
                 return SmallVector<Value>{
                     write(nb, nloc, i, decision, args[0])};
               })
        .getResult(0);
  }
  auto [cut, ties] =
      buildKeyCut(b, loc, count, keep, digitsForWidth(keyBits), keyAt);
  // In index order, so the ties kept are those with the lowest indices.
  Value zero = constantI64(b, loc, 0);
  return buildCountedLoop(
             b, loc, count, ValueRange{init, zero},
             [&](OpBuilder &nb, Location nloc, Value i, ValueRange args) {
               Value key = keyAt(nb, nloc, i);
               Value above = arith::CmpIOp::create(
                   nb, nloc, arith::CmpIPredicate::ugt, key, cut);
               Value tie = arith::AndIOp::create(
                   nb, nloc,
                   arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::eq,
                                         key, cut),
                   arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::slt,
                                         args[1], ties));
               Value keepIt = arith::OrIOp::create(nb, nloc, above, tie);
               Value tiesKept = arith::AddIOp::create(
                   nb, nloc, args[1],
                   arith::ExtUIOp::create(nb, nloc, nb.getI64Type(), tie));
               return SmallVector<Value>{write(nb, nloc, i, keepIt, args[0]),
                                         tiesKept};
             })
      .getResult(0);
}

std::string mlir::smlir::getMissingMaskLoweringReason(Attribute sparsifier,
                                                      RankedTensorType type) {
  auto transposable = dyn_cast<NMMagnitudeAttr>(sparsifier);
  if (!isa<ScalarFractionAttr, BlockFractionAttr>(sparsifier) &&
      !(transposable && transposable.getTransposable()))
    return {};
  if (!isLoweredElementType(type.getElementType()))
    return "lowered for f16, bf16, f32 and f64 only";
  if (!type.hasStaticShape())
    return "lowered for static shapes only";
  if (auto block = dyn_cast<BlockFractionAttr>(sparsifier);
      block && (block.getBlock().size() != 2 || type.getRank() != 2))
    return "lowered for a 2-d block on a matrix only";
  return {};
}

/// `source` as a 1-d tensor (a view: reassociation only).
static Value buildFlatten(OpBuilder &b, Location loc, Value source) {
  auto type = cast<RankedTensorType>(source.getType());
  if (type.getRank() == 1)
    return source;
  auto flatType =
      RankedTensorType::get({type.getNumElements()}, type.getElementType());
  if (type.getRank() == 0)
    return tensor::ExpandShapeOp::create(b, loc, flatType, source,
                                         ArrayRef<ReassociationIndices>{});
  ReassociationIndices all =
      llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
  return tensor::CollapseShapeOp::create(b, loc, flatType, source,
                                         ArrayRef<ReassociationIndices>{all});
}

/// The inverse of buildFlatten.
static Value buildUnflatten(OpBuilder &b, Location loc, Value flat,
                            RankedTensorType type) {
  if (type.getRank() == 1)
    return flat;
  if (type.getRank() == 0)
    return tensor::CollapseShapeOp::create(b, loc, type, flat,
                                           ArrayRef<ReassociationIndices>{});
  ReassociationIndices all =
      llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
  return tensor::ExpandShapeOp::create(b, loc, type, flat,
                                       ArrayRef<ReassociationIndices>{all});
}

Value mlir::smlir::buildScalarFractionMask(OpBuilder &b, Location loc,
                                           Value source, double fraction) {
  auto type = cast<RankedTensorType>(source.getType());
  Type elementType = type.getElementType();
  int64_t count = type.getNumElements();
  // The reference's count: floor in double precision, as numpy computes it.
  int64_t drop = static_cast<int64_t>(std::floor(fraction * count));
  Value flat = buildFlatten(b, loc, source);
  Value zero = constantZero(b, loc, elementType);
  Value init = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{count},
                                       elementType);
  Value kept = buildKeepLargest(
      b, loc, count, count - drop, cast<FloatType>(elementType).getWidth(),
      [&](OpBuilder &nb, Location nloc, Value i) {
        return buildMagnitudeKey(
            nb, nloc, tensor::ExtractOp::create(nb, nloc, flat, i));
      },
      init,
      [&](OpBuilder &nb, Location nloc, Value i, Value keep, Value out) {
        Value x = tensor::ExtractOp::create(nb, nloc, flat, i);
        Value value = arith::SelectOp::create(nb, nloc, keep, x, zero);
        return tensor::InsertOp::create(nb, nloc, value, out, i).getResult();
      });
  return buildUnflatten(b, loc, kept, type);
}

Value mlir::smlir::buildBlockFractionMask(OpBuilder &b, Location loc,
                                          Value source, double fraction,
                                          int64_t blockRows,
                                          int64_t blockCols) {
  auto type = cast<RankedTensorType>(source.getType());
  Type elementType = type.getElementType();
  Type f64 = b.getF64Type();
  int64_t tileCols = type.getDimSize(1) / blockCols;
  int64_t tiles = type.getDimSize(0) / blockRows * tileCols;
  Value rValue = constantIndex(b, loc, blockRows);
  Value cValue = constantIndex(b, loc, blockCols);
  Value tileColsValue = constantIndex(b, loc, tileCols);

  // L1 norm per tile in f64, summed from +0.0 in row-major order within the
  // tile: the reference's order, so exact ties agree.
  Value normsInit = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{tiles}, f64);
  Value norms =
      buildCountedLoop(
          b, loc, tiles, normsInit,
          [&](OpBuilder &nb, Location nloc, Value t, ValueRange args) {
            Value row0 = arith::MulIOp::create(
                nb, nloc, arith::DivUIOp::create(nb, nloc, t, tileColsValue),
                rValue);
            Value col0 = arith::MulIOp::create(
                nb, nloc, arith::RemUIOp::create(nb, nloc, t, tileColsValue),
                cValue);
            Value norm =
                buildCountedLoop(
                    nb, nloc, blockRows, constantZero(nb, nloc, f64),
                    [&](OpBuilder &rb, Location rloc, Value i, ValueRange acc) {
                      Value row = arith::AddIOp::create(rb, rloc, row0, i);
                      return SmallVector<Value>{
                          buildCountedLoop(
                              rb, rloc, blockCols, acc[0],
                              [&](OpBuilder &cb, Location cloc, Value j,
                                  ValueRange inner) {
                                Value col =
                                    arith::AddIOp::create(cb, cloc, col0, j);
                                Value x = tensor::ExtractOp::create(
                                    cb, cloc, source, ValueRange{row, col});
                                Value magnitude =
                                    math::AbsFOp::create(cb, cloc, x);
                                if (elementType != f64)
                                  magnitude = arith::ExtFOp::create(
                                      cb, cloc, f64, magnitude);
                                return SmallVector<Value>{arith::AddFOp::create(
                                    cb, cloc, inner[0], magnitude)};
                              })
                              .getResult(0)};
                    })
                    .getResult(0);
            return SmallVector<Value>{
                tensor::InsertOp::create(nb, nloc, norm, args[0], t)};
          })
          .getResult(0);

  int64_t drop = static_cast<int64_t>(std::floor(fraction * tiles));
  // One i8 per tile, not i1: MemRefToLLVM asserts on stores of sub-byte
  // integers (MLIR 22).
  Type i8 = b.getI8Type();
  Value keepInit =
      tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{tiles}, i8);
  Value keepTile = buildKeepLargest(
      b, loc, tiles, tiles - drop, /*keyBits=*/64,
      [&](OpBuilder &nb, Location nloc, Value t) {
        return buildMagnitudeKey(
            nb, nloc, tensor::ExtractOp::create(nb, nloc, norms, t));
      },
      keepInit,
      [&](OpBuilder &nb, Location nloc, Value t, Value keep, Value out) {
        Value byte = arith::ExtUIOp::create(nb, nloc, i8, keep);
        return tensor::InsertOp::create(nb, nloc, byte, out, t).getResult();
      });

  // Element-wise into a zero-filled output (see buildMask in
  // ConvertSparseMLIRToSparseTensor.cpp for why not tensor.empty).
  Value zero = constantZero(b, loc, elementType);
  Value zeros = buildFilled(b, loc, type.getShape(), elementType, zero);
  AffineMap identity = b.getMultiDimIdentityMap(2);
  SmallVector<utils::IteratorType> iterators(2, utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, type, ValueRange{source}, ValueRange{zeros},
             ArrayRef<AffineMap>{identity, identity}, iterators,
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               Value tileRow = arith::DivUIOp::create(
                   nb, nloc, linalg::IndexOp::create(nb, nloc, 0), rValue);
               Value tileCol = arith::DivUIOp::create(
                   nb, nloc, linalg::IndexOp::create(nb, nloc, 1), cValue);
               Value tile = arith::AddIOp::create(
                   nb, nloc,
                   arith::MulIOp::create(nb, nloc, tileRow, tileColsValue),
                   tileCol);
               Value keep = arith::TruncIOp::create(
                   nb, nloc, nb.getI1Type(),
                   tensor::ExtractOp::create(nb, nloc, keepTile, tile));
               linalg::YieldOp::create(
                   nb, nloc,
                   ValueRange{arith::SelectOp::create(nb, nloc, keep, args[0],
                                                      args[1])});
             })
      .getResult(0);
}

Value mlir::smlir::buildTransposableNMMask(OpBuilder &b, Location loc,
                                           Value source, int64_t n,
                                           int64_t m) {
  auto type = cast<RankedTensorType>(source.getType());
  Type elementType = type.getElementType();
  Type indexType = b.getIndexType();
  int64_t tileCols = type.getDimSize(1) / m;
  int64_t tiles = type.getDimSize(0) / m * tileCols;
  int64_t tileSize = m * m;
  Value mValue = constantIndex(b, loc, m);
  Value nValue = constantIndex(b, loc, n);
  Value tileColsValue = constantIndex(b, loc, tileCols);
  Value zeroIndex = constantIndex(b, loc, 0);
  Value oneIndex = constantIndex(b, loc, 1);
  Value zero = constantZero(b, loc, elementType);

  // Per-tile scratch, reused by every tile: O(m^2) memory in all. The output
  // is written once per element, so it needs no fill.
  Value outInit = tensor::EmptyOp::create(b, loc, type.getShape(), elementType);
  Value orderInit =
      tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{tileSize}, indexType);
  Value rowCountsInit =
      tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{m}, indexType);
  Value colCountsInit =
      tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{m}, indexType);

  return buildCountedLoop(
             b, loc, tiles,
             ValueRange{outInit, orderInit, rowCountsInit, colCountsInit},
             [&](OpBuilder &tb, Location tloc, Value t, ValueRange args) {
               Value row0 = arith::MulIOp::create(
                   tb, tloc,
                   arith::DivUIOp::create(tb, tloc, t, tileColsValue), mValue);
               Value col0 = arith::MulIOp::create(
                   tb, tloc,
                   arith::RemUIOp::create(tb, tloc, t, tileColsValue), mValue);
               // Element e of the tile is at (row0 + e / m, col0 + e % m).
               auto position = [&](OpBuilder &pb, Location ploc, Value e) {
                 Value r = arith::DivUIOp::create(pb, ploc, e, mValue);
                 Value c = arith::RemUIOp::create(pb, ploc, e, mValue);
                 return std::array<Value, 4>{
                     r, c, arith::AddIOp::create(pb, ploc, row0, r),
                     arith::AddIOp::create(pb, ploc, col0, c)};
               };
               auto keyOf = [&](OpBuilder &kb, Location kloc, Value e) {
                 auto [r, c, row, col] = position(kb, kloc, e);
                 return buildMagnitudeKey(
                     kb, kloc,
                     tensor::ExtractOp::create(kb, kloc, source,
                                               ValueRange{row, col}));
               };
               // The greedy visiting order: order[rank(e)] = e, where rank(e)
               // counts the elements before e (larger key, or the same key
               // at a lower index in the tile).
               Value order =
                   buildCountedLoop(
                       tb, tloc, tileSize, args[1],
                       [&](OpBuilder &eb, Location eloc, Value e,
                           ValueRange orderArgs) {
                         Value mine = keyOf(eb, eloc, e);
                         Value rank =
                             buildCountedLoop(
                                 eb, eloc, tileSize, zeroIndex,
                                 [&](OpBuilder &fb, Location floc, Value f,
                                     ValueRange acc) {
                                   Value theirs = keyOf(fb, floc, f);
                                   Value larger = arith::CmpIOp::create(
                                       fb, floc, arith::CmpIPredicate::ugt,
                                       theirs, mine);
                                   Value tiedBefore = arith::AndIOp::create(
                                       fb, floc,
                                       arith::CmpIOp::create(
                                           fb, floc, arith::CmpIPredicate::eq,
                                           theirs, mine),
                                       arith::CmpIOp::create(
                                           fb, floc, arith::CmpIPredicate::ult,
                                           f, e));
                                   Value before = arith::OrIOp::create(
                                       fb, floc, larger, tiedBefore);
                                   return SmallVector<Value>{
                                       arith::SelectOp::create(
                                           fb, floc, before,
                                           arith::AddIOp::create(fb, floc,
                                                                 acc[0],
                                                                 oneIndex),
                                           acc[0])
                                           .getResult()};
                                 })
                                 .getResult(0);
                         return SmallVector<Value>{tensor::InsertOp::create(
                             eb, eloc, e, orderArgs[0], rank)};
                       })
                       .getResult(0);
               Value rowCounts =
                   linalg::FillOp::create(tb, tloc, ValueRange{zeroIndex},
                                          ValueRange{args[2]})
                       .getResult(0);
               Value colCounts =
                   linalg::FillOp::create(tb, tloc, ValueRange{zeroIndex},
                                          ValueRange{args[3]})
                       .getResult(0);
               // Greedy in that order: keep while the element's row and
               // column of the tile both hold fewer than n.
               auto greedy = buildCountedLoop(
                   tb, tloc, tileSize, ValueRange{args[0], rowCounts, colCounts},
                   [&](OpBuilder &sb, Location sloc, Value s,
                       ValueRange state) {
                     Value e = tensor::ExtractOp::create(sb, sloc, order, s);
                     auto [r, c, row, col] = position(sb, sloc, e);
                     Value inRow =
                         tensor::ExtractOp::create(sb, sloc, state[1], r);
                     Value inCol =
                         tensor::ExtractOp::create(sb, sloc, state[2], c);
                     Value keep = arith::AndIOp::create(
                         sb, sloc,
                         arith::CmpIOp::create(sb, sloc,
                                               arith::CmpIPredicate::ult,
                                               inRow, nValue),
                         arith::CmpIOp::create(sb, sloc,
                                               arith::CmpIPredicate::ult,
                                               inCol, nValue));
                     Value x = tensor::ExtractOp::create(
                         sb, sloc, source, ValueRange{row, col});
                     Value out = tensor::InsertOp::create(
                         sb, sloc,
                         arith::SelectOp::create(sb, sloc, keep, x, zero),
                         state[0], ValueRange{row, col});
                     Value added = arith::SelectOp::create(
                         sb, sloc, keep, oneIndex, zeroIndex);
                     Value rows = tensor::InsertOp::create(
                         sb, sloc, arith::AddIOp::create(sb, sloc, inRow, added),
                         state[1], r);
                     Value cols = tensor::InsertOp::create(
                         sb, sloc, arith::AddIOp::create(sb, sloc, inCol, added),
                         state[2], c);
                     return SmallVector<Value>{out, rows, cols};
                   });
               return SmallVector<Value>{greedy.getResult(0), order,
                                         greedy.getResult(1),
                                         greedy.getResult(2)};
             })
      .getResult(0);
}
