//===- BSRWeight.cpp - a BSR W[N, K] in a linear kernel -------------------===//
//
// W stored as dense bh x bw blocks (#sparse_tensor.encoding with the block
// map (i floordiv bh : dense, j floordiv bw : compressed, i mod bh : dense,
// j mod bw : dense)). A tile's R rows lie in one block row (R divides bh):
// per stored block, one coordinate load, then for each of its bw columns k
// the U slab vectors of k are loaded once and serve all R rows (R * U
// FMAs, the weights broadcast from the block's row-major values): a dense
// micro-kernel's inner step with no per-value index load. Decode reads a
// block row's x slice once per block for the R rows (vectors of bw lanes).
//
//===----------------------------------------------------------------------===//

#include "MicrokernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensorType.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::smlir::codegen;
using namespace mlir::sparse_tensor;

namespace {

class BSRWeight final : public WeightAccess {
public:
  explicit BSRWeight(const SparseLinear &linear)
      : WeightAccess(linear), bh(linear.layout.blockRows),
        bw(linear.layout.blockCols) {}

  void bindBuffers(MicrokernelBuilder &kb) const override {
    assert(bh % kb.R == 0 && "a BSR tile lies in one block row");
    kb.positions = ToPositionsOp::create(kb.b, kb.loc, lin.weight, 1);
    kb.coordinates = ToCoordinatesOp::create(kb.b, kb.loc, lin.weight, 1);
    kb.values = ToValuesOp::create(kb.b, kb.loc, lin.weight);
  }

  std::string name(bool) const override {
    return "bsr" + std::to_string(bh) + "x" + std::to_string(bw);
  }

  // Density is known at run time only (as for CSR); 4 bytes a stored value
  // (the block coordinate is shared by bh * bw of them).
  double entriesPerRow() const override { return lin.K * kAssumedCSRDensity; }
  double bytesPerEntry() const override { return 4; }

  /// Row `n`'s block row: where its blocks start and how many there are.
  void rowExtent(MicrokernelBuilder &kb, Value n, Value &start,
                 Value &length) const override {
    Value blockRow = arith::DivUIOp::create(kb.b, kb.loc, n, kb.idx(bh));
    start = kb.toIndex(kb.load(kb.positions, {blockRow}));
    Value end =
        kb.toIndex(kb.load(kb.positions, {kb.add(blockRow, kb.idx(1))}));
    length = arith::SubIOp::create(kb.b, kb.loc, end, start);
  }

  void accumulateRowBlock(MicrokernelBuilder &kb, Value slab, Value n0,
                          Value nb,
                          SmallVectorImpl<Value> &acc) const override {
    OpBuilder &b = kb.b;
    Location loc = kb.loc;
    Value start, length, r0;
    blockRow(kb, n0, start, length, r0);
    auto loop = scf::ForOp::create(
        b, loc, start, kb.add(start, length), kb.idx(1), acc,
        [&](OpBuilder &, Location, Value p, ValueRange carried) {
          SmallVector<Value> next(carried.begin(), carried.end());
          Value k0 = kb.mul(kb.toIndex(kb.load(kb.coordinates, {p})),
                            kb.idx(bw));
          // values[p * bh * bw + (r0 + r) * bw + c]: row r, column c.
          Value base = kb.add(kb.mul(p, kb.idx(bh * bw)), kb.mul(r0, kb.idx(bw)));
          for (int64_t c = 0; c < bw; ++c)
            kb.accumulateSlabRow(
                slab, kb.mul(kb.add(k0, kb.idx(c)), kb.idx(kb.MB)), next,
                [&](int64_t r) {
                  return kb.load(kb.values, {kb.add(base, kb.idx(r * bw + c))});
                });
          scf::YieldOp::create(b, loc, next);
        });
    acc.assign(loop.getResults().begin(), loop.getResults().end());
  }

  /// sums[r] += block row . x[m, :] for rows n0 .. n0 + R: per block, x's
  /// bw columns as one vector shared by the R rows' bw-lane FMAs.
  void decodeRows(MicrokernelBuilder &kb, Value m, Value n0,
                  SmallVectorImpl<Value> &sums) const override {
    OpBuilder &b = kb.b;
    Location loc = kb.loc;
    int64_t R = kb.R;
    auto blockVec = VectorType::get({bw}, kb.f32);
    Value zero = arith::ConstantOp::create(
        b, loc, blockVec, DenseElementsAttr::get(blockVec, 0.0f));
    Value start, length, r0;
    blockRow(kb, n0, start, length, r0);
    auto loop = scf::ForOp::create(
        b, loc, start, kb.add(start, length), kb.idx(1),
        SmallVector<Value>(R, zero),
        [&](OpBuilder &, Location, Value p, ValueRange carried) {
          Value k0 = kb.mul(kb.toIndex(kb.load(kb.coordinates, {p})),
                            kb.idx(bw));
          Value xv = vector::LoadOp::create(b, loc, blockVec, kb.x,
                                            ValueRange{m, k0});
          Value base = kb.add(kb.mul(p, kb.idx(bh * bw)), kb.mul(r0, kb.idx(bw)));
          SmallVector<Value> next;
          for (int64_t r = 0; r < R; ++r) {
            Value wv = vector::LoadOp::create(
                b, loc, blockVec, kb.values,
                ValueRange{kb.add(base, kb.idx(r * bw))});
            next.push_back(vector::FMAOp::create(b, loc, wv, xv, carried[r]));
          }
          scf::YieldOp::create(b, loc, next);
        });
    for (int64_t r = 0; r < R; ++r)
      sums[r] = arith::AddFOp::create(
          b, loc, sums[r],
          vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD,
                                      loop.getResult(r)));
  }

private:
  /// The blocks of the block row holding rows n0 .. n0 + R, and the tile's
  /// first row within the block (0 when R = bh).
  void blockRow(MicrokernelBuilder &kb, Value n0, Value &start, Value &length,
                Value &r0) const {
    rowExtent(kb, n0, start, length);
    r0 = kb.R == bh ? kb.idx(0)
                    : arith::RemUIOp::create(kb.b, kb.loc, n0, kb.idx(bh));
  }

  int64_t bh, bw;
};

} // namespace

/// (i floordiv bh : dense, j floordiv bw : compressed, i mod bh : dense,
/// j mod bw : dense): what #smlir.bsr<block = [bh, bw]> stands for.
std::optional<WeightLayout>
mlir::smlir::codegen::classifyBSRWeight(const SparseTensorType &stt) {
  ArrayRef<LevelType> lvls = stt.getLvlTypes();
  if (lvls.size() != 4 || !isDenseLT(lvls[0]) || !isCompressedLT(lvls[1]) ||
      !isUniqueLT(lvls[1]) || !isOrderedLT(lvls[1]) || !isDenseLT(lvls[2]) ||
      !isDenseLT(lvls[3]) || !isBlockSparsity(stt.getDimToLvl()))
    return std::nullopt;
  SmallVector<unsigned> block = getBlockSize(stt.getDimToLvl());
  if (block.size() != 2 || block[0] < 2 || block[1] < 2)
    return std::nullopt;
  // Block rows outer, rows within a block before columns (not BSC, not
  // column-major blocks).
  MLIRContext *ctx = stt.getContext();
  AffineExpr i = getAffineDimExpr(0, ctx), j = getAffineDimExpr(1, ctx);
  if (stt.getDimToLvl() !=
      AffineMap::get(2, 0,
                     {i.floorDiv(block[0]), j.floorDiv(block[1]),
                      i % block[0], j % block[1]},
                     ctx))
    return std::nullopt;
  WeightLayout layout{WeightLayout::BSR};
  layout.blockRows = block[0];
  layout.blockCols = block[1];
  return layout;
}

std::unique_ptr<WeightAccess>
mlir::smlir::codegen::makeBSRWeight(const SparseLinear &linear) {
  return std::make_unique<BSRWeight>(linear);
}
