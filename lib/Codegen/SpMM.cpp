//===- SpMM.cpp - the CPU kernel of smlir.spmm ----------------------------===//
//
// y[M, F] = A[M, K] h[K, F] with A in CSR buffers, transpose-free: each
// stored (i, k) adds values[p] * h[k, :] to y[i, :]. h's rows are
// contiguous along F, so no packing is needed (unlike the linear kernels,
// whose x is read along K):
//
//   parallel over `chunks` row ranges of equal nnz (binary searches in
//   the positions: power-law rows differ by orders of magnitude)
//     for each row i, for each tile of U vectors of V features:
//       E x U accumulators; for the row's stored entries, E at a time:
//         acc[e][u] += broadcast(values[p + e]) * h[crd[p + e], f + u*V :]
//       the row's last entries one at a time; sum the E sets; store.
//
//===----------------------------------------------------------------------===//

#include "SpMM.h"
#include "KernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;

/// Register tiles narrower than this many features are not prefetched.
static constexpr int64_t kPrefetchMinFeatures = 256;

SpMMTile mlir::smlir::codegen::defaultSpMMTile(int64_t features, int64_t lanes,
                                                int64_t vectors,
                                                int64_t entries,
                                                int64_t chunks,
                                                int64_t prefetch) {
  // Half the register file (32 registers with 16 lanes, 16 with 8) holds
  // accumulators; the rest the loaded h vectors and the broadcast value.
  int64_t budget = lanes >= 16 ? 16 : 8;
  int64_t needed = llvm::divideCeil(features, lanes);
  int64_t u = vectors > 0 ? vectors : std::min(needed, budget);
  int64_t e = entries > 0 ? entries : (2 * u <= budget ? 2 : 1);
  // Narrower tiles find h's rows in cache on local graphs and pay the
  // prefetches' loads for nothing (10^4 nodes, 1 thread: banded 41% /
  // 25% slower at 64 / 128 features, power-law 9% / 6% faster; at 256
  // both faster, 18% / 9%).
  if (u * lanes < kPrefetchMinFeatures)
    prefetch = 0;
  return SpMMTile{lanes, u, e, chunks, prefetch};
}

namespace {

class SpMMBuilder : KernelBuilder {
public:
  SpMMBuilder(OpBuilder &b, SpMMOp op, const SpMMTile &tile)
      : KernelBuilder(b, op.getLoc()), op(op), V(tile.lanes), U(tile.vectors),
        E(tile.entries), C(tile.chunks), D(tile.prefetch), f32(b.getF32Type()),
        vecType(VectorType::get({V}, f32)) {
    F = cast<RankedTensorType>(op.getH().getType()).getDimSize(1);
  }

  Value build() {
    auto memref = [&](Value tensor) -> Value {
      auto type = cast<RankedTensorType>(tensor.getType());
      return bufferization::ToBufferOp::create(
          b, loc, MemRefType::get(type.getShape(), type.getElementType()),
          tensor, /*read_only=*/true);
    };
    if (op.hasSparseMatrix()) { // A's own buffers, read in place
      Value a = op.getMatrix()[0];
      pos = sparse_tensor::ToPositionsOp::create(b, loc, a, 1);
      crd = sparse_tensor::ToCoordinatesOp::create(b, loc, a, 1);
      vals = sparse_tensor::ToValuesOp::create(b, loc, a);
    } else {
      pos = memref(op.getMatrix()[0]);
      crd = memref(op.getMatrix()[1]);
      vals = memref(op.getMatrix()[2]);
    }
    h = memref(op.getH());
    Value positions = memref::DimOp::create(b, loc, pos, 0);
    rows = arith::SubIOp::create(b, loc, positions, idx(1));
    auto yType = MemRefType::get({ShapedType::kDynamic, F}, f32);
    y = memref::AllocOp::create(b, loc, yType, ValueRange{rows},
                                b.getI64IntegerAttr(64));
    std::string name = llvm::formatv("spmm_csr_features{0}", F).str();
    emitKernelRegion(b, loc, name, [&] {
      nnz = toIndex(load(pos, {rows}));
      scf::ParallelOp::create(
          b, loc, ValueRange{idx(0)}, ValueRange{idx(C)}, ValueRange{idx(1)},
          [&](OpBuilder &, Location, ValueRange ivs) { chunk(ivs[0]); });
    });
    return bufferization::ToTensorOp::create(
        b, loc, cast<RankedTensorType>(op.getResult().getType()), y,
        /*restrict=*/true, /*writable=*/true);
  }

private:
  /// The first row whose position is at least `target` (rows if none):
  /// rows before it hold fewer than `target` entries.
  Value lowerBound(Value target) {
    Type index = b.getIndexType();
    auto loop = scf::WhileOp::create(
        b, loc, TypeRange{index, index}, ValueRange{idx(0), rows},
        [&](OpBuilder &, Location, ValueRange args) {
          Value more = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                             args[0], args[1]);
          scf::ConditionOp::create(b, loc, more, args);
        },
        [&](OpBuilder &, Location, ValueRange args) {
          Value lo = args[0], hi = args[1];
          Value mid = arith::ShRUIOp::create(b, loc, add(lo, hi), idx(1));
          Value below = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                              toIndex(load(pos, {mid})), target);
          Value nextLo = arith::SelectOp::create(b, loc, below,
                                                 add(mid, idx(1)), lo);
          Value nextHi = arith::SelectOp::create(b, loc, below, hi, mid);
          scf::YieldOp::create(b, loc, ValueRange{nextLo, nextHi});
        });
    return loop.getResult(0);
  }

  /// Chunk c: rows [first row of entry c * nnz / C, that of (c + 1)), the
  /// last chunk up to `rows` (trailing empty rows).
  void chunk(Value c) {
    Value first = lowerBound(arith::DivUIOp::create(b, loc, mul(c, nnz), idx(C)));
    Value next = add(c, idx(1));
    Value bound = lowerBound(arith::DivUIOp::create(b, loc, mul(next, nnz), idx(C)));
    Value isLast =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, next, idx(C));
    Value last = arith::SelectOp::create(b, loc, isLast, rows, bound);
    scf::ForOp::create(b, loc, first, last, idx(1), ValueRange{},
                       [&](OpBuilder &, Location, Value i, ValueRange) {
                         row(i);
                         scf::YieldOp::create(b, loc);
                       });
  }

  /// Lanes of the vector at feature `f` inside F (null: all, F is a
  /// multiple of the tile width).
  Value laneMask(Value f) {
    if (F % (U * V) == 0)
      return {};
    return prefixMask(V, arith::SubIOp::create(b, loc, idx(F), f));
  }

  void row(Value i) {
    Value lo = toIndex(load(pos, {i}));
    Value hi = toIndex(load(pos, {add(i, idx(1))}));
    // Stored entries past the last multiple of E run one at a time.
    Value count = arith::SubIOp::create(b, loc, hi, lo);
    Value whole = mul(arith::DivUIOp::create(b, loc, count, idx(E)), idx(E));
    Value mainEnd = add(lo, whole);
    scf::ForOp::create(
        b, loc, idx(0), idx(F), idx(U * V), ValueRange{},
        [&](OpBuilder &, Location, Value f0, ValueRange) {
          tile(i, f0, lo, mainEnd, hi);
          scf::YieldOp::create(b, loc);
        });
  }

  /// Asks for the tile of h's row that entry p + D reads (D = `prefetch`
  /// entries ahead, the last entry past the end): h's rows are read in
  /// graph order, which no hardware prefetcher follows.
  void prefetchAhead(Value p, ArrayRef<Value> columns) {
    Value ahead = arith::MinUIOp::create(
        b, loc, add(p, idx(D)), arith::SubIOp::create(b, loc, nnz, idx(1)));
    Value k = toIndex(load(crd, {ahead}));
    // One prefetch per 64-byte line of the tile.
    int64_t perLine = std::max<int64_t>(1, 16 / V);
    for (int64_t u = 0; u < U; u += perLine)
      memref::PrefetchOp::create(b, loc, h, ValueRange{k, columns[u]},
                                 /*isWrite=*/false, /*localityHint=*/3,
                                 /*isDataCache=*/true);
  }

  /// acc[u] += broadcast(values[p]) * h[crd[p], columns[u]:] for u < U.
  void accumulate(Value p, ArrayRef<Value> columns, ArrayRef<Value> masks,
                  Value zero, MutableArrayRef<Value> acc) {
    if (D > 0)
      prefetchAhead(p, columns);
    Value k = toIndex(load(crd, {p}));
    Value w = vector::BroadcastOp::create(b, loc, vecType, load(vals, {p}));
    for (int64_t u = 0; u < U; ++u) {
      SmallVector<Value, 2> at{k, columns[u]};
      Value hv;
      if (masks[u])
        hv = vector::MaskedLoadOp::create(b, loc, vecType, h, at, masks[u], zero);
      else
        hv = vector::LoadOp::create(b, loc, vecType, h, at);
      acc[u] = vector::FMAOp::create(b, loc, w, hv, acc[u]);
    }
  }

  void tile(Value i, Value f0, Value lo, Value mainEnd, Value hi) {
    SmallVector<Value> columns, masks;
    for (int64_t u = 0; u < U; ++u) {
      columns.push_back(add(f0, idx(u * V)));
      masks.push_back(laneMask(columns.back()));
    }
    Value zero = arith::ConstantOp::create(
        b, loc, vecType, DenseElementsAttr::get(vecType, 0.0f));
    SmallVector<Value> init(E * U, zero);
    auto unrolled = scf::ForOp::create(
        b, loc, lo, mainEnd, idx(E), init,
        [&](OpBuilder &, Location, Value p, ValueRange carried) {
          SmallVector<Value> acc(carried.begin(), carried.end());
          for (int64_t e = 0; e < E; ++e)
            accumulate(add(p, idx(e)), columns, masks, zero,
                       MutableArrayRef<Value>(acc).slice(e * U, U));
          scf::YieldOp::create(b, loc, acc);
        });
    SmallVector<Value> sums(unrolled.getResults().take_front(U));
    for (int64_t e = 1; e < E; ++e)
      for (int64_t u = 0; u < U; ++u)
        sums[u] = arith::AddFOp::create(b, loc, sums[u],
                                        unrolled.getResult(e * U + u));
    auto rest = scf::ForOp::create(
        b, loc, mainEnd, hi, idx(1), sums,
        [&](OpBuilder &, Location, Value p, ValueRange carried) {
          SmallVector<Value> acc(carried.begin(), carried.end());
          accumulate(p, columns, masks, zero, acc);
          scf::YieldOp::create(b, loc, acc);
        });
    for (int64_t u = 0; u < U; ++u) {
      SmallVector<Value, 2> at{i, columns[u]};
      if (masks[u])
        vector::MaskedStoreOp::create(b, loc, y, at, masks[u],
                                      rest.getResult(u));
      else
        vector::StoreOp::create(b, loc, rest.getResult(u), y, at);
    }
  }

  SpMMOp op;
  int64_t V, U, E, C, D, F = 0;
  Type f32;
  VectorType vecType;
  Value pos, crd, vals, h, y, rows, nnz;
};

} // namespace

Value mlir::smlir::codegen::buildSpMMKernel(OpBuilder &b, SpMMOp op,
                                            const SpMMTile &tile) {
  return SpMMBuilder(b, op, tile).build();
}
