//===- ELLWeight.cpp - an ELL W[N, K] in a linear kernel -------------------===//
//
// Every row stores exactly `width` entries (its nonzeros, then zeros at
// columns it does not use): row n's entries are n * width ... (n + 1) *
// width - 1, so no position is read, a tile's rows run in lockstep to the
// end (as n:m's do) and the entry loop has a trip count known when the
// kernel is built. The weight argument is typed as the CSR its buffers also
// are (positions 0, width, 2 * width, ...: upstream's readers of it stay
// right); its smlir.encoding #smlir.ell<width = k> says the rows are all k
// long. Decode gathers x `lanes` entries at a time, the rows in lockstep.
//
//===----------------------------------------------------------------------===//

#include "MicrokernelBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;
using namespace mlir::sparse_tensor;

namespace {

/// Entries of each row per iteration of the (not interleaved) lockstep
/// loop; a row of fewer is unrolled whole, the last width mod 4 after the
/// loop.
constexpr int64_t kELLUnroll = 4;

class ELLWeight final : public WeightAccess {
public:
  explicit ELLWeight(const SparseLinear &linear)
      : WeightAccess(linear), width(linear.layout.width) {}

  /// The coordinates and values only: the positions are never read.
  void bindBuffers(MicrokernelBuilder &kb) const override {
    kb.coordinates = ToCoordinatesOp::create(kb.b, kb.loc, lin.weight, 1);
    kb.values = ToValuesOp::create(kb.b, kb.loc, lin.weight);
  }

  std::string name(bool) const override { return "ell" + std::to_string(width); }

  double entriesPerRow() const override { return width; }

  void rowExtent(MicrokernelBuilder &kb, Value n, Value &start,
                 Value &length) const override {
    start = kb.mul(n, kb.idx(width));
    length = kb.idx(width);
  }

  // Not interleaved per call (CSR's interleaveRows): the rows already run
  // in lockstep with no padding, and the O(nnz) pass per call cost more
  // than the load per entry it saves (768 -> 3072, rows all 77 long, 1
  // thread: 0.90x CSR's time not interleaved, 1.01x interleaved at 128
  // tokens; 0.99x and 1.01x at 1024).
  void interleave(MicrokernelBuilder &) const override {}

  void accumulateRowBlock(MicrokernelBuilder &kb, Value slab, Value n0,
                          Value nb,
                          SmallVectorImpl<Value> &acc) const override {
    SmallVector<Value> starts, lengths;
    kb.rowExtents(n0, starts, lengths);
    // Entry j of each of the R rows: R * U independent FMA chains.
    auto entry = [&](Value j, MutableArrayRef<Value> a) {
      for (auto [r, start] : llvm::enumerate(starts))
        kb.accumulateEntry(slab, kb.idx(0), kb.add(start, j),
                           a.slice(r * kb.U, kb.U));
    };
    int64_t looped = width >= 2 * kELLUnroll ? width / kELLUnroll * kELLUnroll : 0;
    if (looped > 0) {
      auto loop = scf::ForOp::create(
          kb.b, kb.loc, kb.idx(0), kb.idx(looped), kb.idx(kELLUnroll), acc,
          [&](OpBuilder &, Location, Value j, ValueRange carried) {
            SmallVector<Value> next(carried.begin(), carried.end());
            for (int64_t e = 0; e < kELLUnroll; ++e)
              entry(kb.add(j, kb.idx(e)), next);
            scf::YieldOp::create(kb.b, kb.loc, next);
          });
      acc.assign(loop.getResults().begin(), loop.getResults().end());
    }
    for (int64_t j = looped; j < width; ++j)
      entry(kb.idx(j), acc);
  }

  /// Rows in lockstep over their `lanes`-entry vectors (x gathered), the
  /// last width mod lanes entries scalar: every row as long, no tails.
  void decodeRows(MicrokernelBuilder &kb, Value m, Value n0,
                  SmallVectorImpl<Value> &sums) const override {
    kb.decodeGathered(m, n0, sums);
  }

private:
  int64_t width;
};

} // namespace

std::optional<int64_t> mlir::smlir::codegen::ellWidth(Value weight, int64_t K) {
  auto arg = dyn_cast<BlockArgument>(weight);
  if (!arg)
    return std::nullopt;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!func)
    return std::nullopt;
  auto ell =
      func.getArgAttrOfType<ELLEncodingAttr>(arg.getArgNumber(), kEncodingAttrName);
  // Without a width (picked when stored) or wider than a row, the buffers
  // are read as the CSR they also are.
  if (!ell || !ell.getWidth() || *ell.getWidth() < 1 || *ell.getWidth() > K)
    return std::nullopt;
  return *ell.getWidth();
}

std::unique_ptr<WeightAccess>
mlir::smlir::codegen::makeELLWeight(const SparseLinear &linear) {
  return std::make_unique<ELLWeight>(linear);
}
