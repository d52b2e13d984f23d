//===- SparseAttention.cpp - the fused sparse attention row kernel --------===//
//
// One pass over each row of a CSR mask, no score matrix written
// (FlashAttention's idea on a CSR pattern):
//
//   parallel over batch entries (heads) and rows i:
//     q_i = q[h, i, :]                          (ceil(D / W) vectors of W)
//     for the row's stored j, G at a time (GroupedDots: summed together by
//     a transpose tree), then one at a time: s_j = (q_i . k[h, c_j, :]) *
//     scale into an N-float stack scratch, and the row's max m
//     for 16 entries at a time: p = exp(s - m) (math.exp: a vectorizable
//     polynomial after smlir-approximate-math), their sum l
//     for each stored j: acc += p_j * v[h, c_j, :]    (one F-lane FMA)
//     out[h, i, :] = acc / l                    (a row with no entry: zeros)
//
// nnz (D + F) FMAs and nnz exps per call, reading k and v rows at the
// stored columns only.
//
//===----------------------------------------------------------------------===//

#include "SDDMMRows.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/FormatVariadic.h"

#include <limits>

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;

namespace {

/// Entries per exp vector.
constexpr int64_t kExpLanes = 16;

class SparseAttentionBuilder : GroupedDots {
public:
  SparseAttentionBuilder(OpBuilder &b, SparseAttentionOp op)
      : GroupedDots(b, op.getLoc(),
                    cast<RankedTensorType>(op.getQ().getType()).getDimSize(2),
                    op.getLanes(), op.getGroup()),
        op(op), f32(b.getF32Type()) {
    auto v = cast<RankedTensorType>(op.getV().getType());
    columns = v.getDimSize(1);
    features = v.getDimSize(2);
  }

  Value build() {
    pos = buffer(op.getPositions());
    crd = buffer(op.getCoordinates());
    q = buffer(op.getQ());
    k = buffer(op.getK());
    v = buffer(op.getV());
    auto type = cast<RankedTensorType>(op.getResult().getType());
    SmallVector<Value, 2> sizes;
    for (int64_t d = 0; d < 2; ++d)
      if (type.isDynamicDim(d))
        sizes.push_back(dimOf(q, d));
    out = memref::AllocOp::create(
        b, loc, MemRefType::get(type.getShape(), f32), sizes,
        b.getI64IntegerAttr(64));
    int64_t rows = cast<MemRefType>(q.getType()).getDimSize(1);
    std::string name =
        llvm::formatv("sparse_attention_csr_{0}x{1}x{2}x{3}_g{4}w{5}",
                      sizeName(rows), columns, dim, features, group, lanes)
            .str();
    emitKernelRegion(b, loc, name, [&] {
      scf::ParallelOp::create(
          b, loc, ValueRange{idx(0), idx(0)},
          ValueRange{dimOf(q, 0), dimOf(q, 1)}, ValueRange{idx(1), idx(1)},
          [&](OpBuilder &, Location, ValueRange ivs) { row(ivs[0], ivs[1]); });
    });
    return bufferization::ToTensorOp::create(b, loc, type, out,
                                             /*restrict=*/true,
                                             /*writable=*/true);
  }

private:
  Value splat(VectorType type, float value) {
    return arith::ConstantOp::create(b, loc, type,
                                     DenseElementsAttr::get(type, value));
  }
  Value scalar(float value) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
  }

  void row(Value h, Value i) {
    auto scoresType = MemRefType::get({columns + kExpLanes}, f32);
    scores = memref::AllocaOp::create(b, loc, scoresType,
                                      b.getI64IntegerAttr(64));
    Value lo = toIndex(load(pos, {i}));
    Value hi = toIndex(load(pos, {add(i, idx(1))}));
    Value n = arith::SubIOp::create(b, loc, hi, lo);
    SmallVector<Value> qi = loadRow(q, h, i);
    Value max = rowScores(h, qi, lo, hi, n);
    Value l = exponentials(max, n);
    // acc = sum of p_j v[h, c_j, :]
    auto vType = VectorType::get({features}, f32);
    auto weighted = scf::ForOp::create(
        b, loc, lo, hi, idx(1), ValueRange{splat(vType, 0.0f)},
        [&](OpBuilder &, Location, Value j, ValueRange acc) {
          Value col = toIndex(load(crd, {j}));
          Value p = load(scores, {arith::SubIOp::create(b, loc, j, lo)});
          Value pv = vector::BroadcastOp::create(b, loc, vType, p);
          Value vv = vector::LoadOp::create(b, loc, vType, v,
                                            ValueRange{h, col, idx(0)});
          Value next = vector::FMAOp::create(b, loc, pv, vv, acc[0]);
          scf::YieldOp::create(b, loc, ValueRange{next});
        });
    // A row with no stored entry: l = 0, acc = 0, out = 0.
    Value one = scalar(1.0f);
    Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, l,
                                        scalar(0.0f));
    Value inverse = arith::DivFOp::create(
        b, loc, one, arith::SelectOp::create(b, loc, empty, one, l));
    Value result = arith::MulFOp::create(
        b, loc, weighted.getResult(0),
        vector::BroadcastOp::create(b, loc, vType, inverse));
    vector::StoreOp::create(b, loc, result, out, ValueRange{h, i, idx(0)});
  }

  /// The row's scores into the scratch (entry j at j - lo); returns their
  /// max: G entries at a time, then the last n mod G one at a time.
  Value rowScores(Value h, ArrayRef<Value> qi, Value lo, Value hi, Value n) {
    float scale = op.getScale().convertToFloat();
    float negInf = -std::numeric_limits<float>::infinity();
    Value start = lo, max = scalar(negInf);
    if (group > 1) {
      auto groupType = VectorType::get({group}, f32);
      start = arith::SubIOp::create(
          b, loc, hi, arith::RemUIOp::create(b, loc, n, idx(group)));
      Value scales = splat(groupType, scale);
      auto grouped = scf::ForOp::create(
          b, loc, lo, start, idx(group), ValueRange{splat(groupType, negInf)},
          [&](OpBuilder &, Location, Value j0, ValueRange maxes) {
            SmallVector<Value> cols;
            for (int64_t g = 0; g < group; ++g)
              cols.push_back(toIndex(load(crd, {add(j0, idx(g))})));
            Value s = arith::MulFOp::create(
                b, loc, groupSums(qi, k, h, cols), scales);
            vector::StoreOp::create(
                b, loc, s, scores,
                ValueRange{arith::SubIOp::create(b, loc, j0, lo)});
            scf::YieldOp::create(
                b, loc,
                ValueRange{arith::MaxNumFOp::create(b, loc, maxes[0], s)});
          });
      max = vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXNUMF,
                                        grouped.getResult(0));
    }
    Value scaleValue = scalar(scale);
    auto single = scf::ForOp::create(
        b, loc, start, hi, idx(1), ValueRange{max},
        [&](OpBuilder &, Location, Value j, ValueRange carried) {
          Value col = toIndex(load(crd, {j}));
          Value s = arith::MulFOp::create(b, loc, total(dot(qi, k, h, col)),
                                          scaleValue);
          memref::StoreOp::create(
              b, loc, s, scores,
              ValueRange{arith::SubIOp::create(b, loc, j, lo)});
          scf::YieldOp::create(
              b, loc,
              ValueRange{arith::MaxNumFOp::create(b, loc, carried[0], s)});
        });
    return single.getResult(0);
  }

  /// p = exp(s - max) in place of the n scores, 16 at a time (lanes past n
  /// zero); returns their sum.
  Value exponentials(Value max, Value n) {
    auto expType = VectorType::get({kExpLanes}, f32);
    Value zeros = splat(expType, 0.0f);
    Value maxes = vector::BroadcastOp::create(b, loc, expType, max);
    auto loop = scf::ForOp::create(
        b, loc, idx(0), n, idx(kExpLanes), ValueRange{zeros},
        [&](OpBuilder &, Location, Value t, ValueRange acc) {
          Value left = arith::SubIOp::create(b, loc, n, t);
          Value live = prefixMask(kExpLanes, left);
          Value s =
              vector::LoadOp::create(b, loc, expType, scores, ValueRange{t});
          Value e = math::ExpOp::create(
              b, loc, arith::SubFOp::create(b, loc, s, maxes));
          Value p = arith::SelectOp::create(b, loc, live, e, zeros);
          vector::StoreOp::create(b, loc, p, scores, ValueRange{t});
          Value sum = arith::AddFOp::create(b, loc, acc[0], p);
          scf::YieldOp::create(b, loc, ValueRange{sum});
        });
    return total(loop.getResult(0));
  }

  SparseAttentionOp op;
  Type f32;
  int64_t columns = 0, features = 0;
  Value pos, crd, q, k, v, out, scores;
};

} // namespace

Value mlir::smlir::codegen::buildSparseAttentionKernel(OpBuilder &b,
                                                       SparseAttentionOp op) {
  return SparseAttentionBuilder(b, op).build();
}
