//===- PermutedDecode.cpp - n:m decode with x permuted in registers -------===//
//
// For m = 2n on AVX-512: 16 stored entries of a row are 16 / n whole
// groups, so their k's lie in a window of 32 floats of x (two vector
// loads). smlir.permute2 (AVX-512's vpermi2ps) picks each entry's x by its
// in-group coordinate plus a constant (group * m), where vector.gather
// would be scalarized (16 loads and inserts per vector on Zen 4). All M
// tokens run at once: an entry's value, coordinate and index are loaded
// once for every token, and each token's window once for the tile's rows.
//
//===----------------------------------------------------------------------===//

#include "MicrokernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::smlir::codegen;

void MicrokernelBuilder::buildPermutedDecodeLoops() {
  widenX();
  parallelRowBlocks([&](Value n0) { permutedRows(n0); });
}

/// The permute index of 16 entries from their coordinates: entry i sits in
/// group i / n of the window, at crd + (i / n) * m.
Value MicrokernelBuilder::permuteIndex(Value p) {
  auto crdType = cast<MemRefType>(coordinates.getType()).getElementType();
  auto i32Vec = VectorType::get({V}, b.getI32Type());
  Value crd = vector::LoadOp::create(b, loc, VectorType::get({V}, crdType),
                                     coordinates, ValueRange{p});
  if (crdType.isIndex())
    crd = arith::IndexCastUIOp::create(b, loc, i32Vec, crd);
  else if (crdType.getIntOrFloatBitWidth() < 32)
    crd = arith::ExtUIOp::create(b, loc, i32Vec, crd);
  else if (crdType.getIntOrFloatBitWidth() > 32)
    crd = arith::TruncIOp::create(b, loc, i32Vec, crd);
  SmallVector<int32_t> offsets;
  for (int64_t i = 0; i < V; ++i)
    offsets.push_back(static_cast<int32_t>(i / lin.layout.n * lin.layout.m));
  Value constant = arith::ConstantOp::create(
      b, loc, i32Vec, DenseElementsAttr::get(i32Vec, ArrayRef(offsets)));
  return arith::AddIOp::create(b, loc, crd, constant);
}

void MicrokernelBuilder::permutedRows(Value n0) {
  const int64_t n = lin.layout.n, m = lin.layout.m, M = lin.M;
  const int64_t entries = lin.K / m * n; // per row (n:m: all rows alike)
  const int64_t vectorEntries = entries - entries % V;
  SmallVector<Value> starts, lengths;
  rowExtents(n0, starts, lengths);

  // acc[r * M + t]: row n0 + r, token t.
  SmallVector<Value> init(R * M, zeroVector());
  auto loop = scf::ForOp::create(
      b, loc, idx(0), idx(vectorEntries), idx(V), init,
      [&](OpBuilder &, Location, Value j, ValueRange carried) {
        SmallVector<Value> next(carried.begin(), carried.end());
        Value k0 = mul(arith::DivUIOp::create(b, loc, j, idx(n)), idx(m));
        SmallVector<Value> weights, indices;
        for (int64_t r = 0; r < R; ++r) {
          Value p = add(starts[r], j);
          weights.push_back(widen(vector::LoadOp::create(
              b, loc, VectorType::get({V}, storage), values, ValueRange{p})));
          indices.push_back(permuteIndex(p));
        }
        for (int64_t t = 0; t < M; ++t) {
          Value lo = vector::LoadOp::create(b, loc, vecType, x,
                                            ValueRange{idx(t), k0});
          Value hi = vector::LoadOp::create(b, loc, vecType, x,
                                            ValueRange{idx(t), add(k0, idx(V))});
          for (int64_t r = 0; r < R; ++r) {
            Value picked = Permute2Op::create(b, loc, vecType, lo, indices[r], hi);
            next[r * M + t] = vector::FMAOp::create(b, loc, weights[r], picked,
                                                    next[r * M + t]);
          }
        }
        scf::YieldOp::create(b, loc, next);
      });

  for (int64_t r = 0; r < R; ++r) {
    Value row = add(n0, idx(r));
    Value inside =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, row, idx(lin.N));
    for (int64_t t = 0; t < M; ++t) {
      Value sum = vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD,
                                              loop.getResult(r * M + t));
      if (vectorEntries < entries) { // the row's last (< 16) entries, scalar
        auto tail = scf::ForOp::create(
            b, loc, idx(vectorEntries), idx(entries), idx(1), ValueRange{sum},
            [&](OpBuilder &, Location, Value j, ValueRange carried) {
              Value p = add(starts[r], j);
              Value k = access->entryK(*this, j, toIndex(load(coordinates, {p})));
              scf::YieldOp::create(
                  b, loc,
                  ValueRange{math::FmaOp::create(b, loc, widen(load(values, {p})),
                                                 load(x, {idx(t), k}),
                                                 carried[0])});
            });
        sum = tail.getResult(0);
      }
      scf::IfOp::create(b, loc, inside, [&](OpBuilder &, Location) {
        storeY(sum, idx(t), row);
        scf::YieldOp::create(b, loc);
      });
    }
  }
}

Value mlir::smlir::codegen::buildPermutedDecode(OpBuilder &b, Location loc,
                                                const SparseLinear &linear,
                                                int64_t rows) {
  MicrokernelBuilder builder(b, loc, linear, rows, /*vectors=*/1, /*lanes=*/16);
  builder.permutedDecode = true;
  return builder.build();
}
