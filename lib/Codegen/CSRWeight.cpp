//===- CSRWeight.cpp - a CSR W[N, K] in a linear kernel -------------------===//
//
// Rows differ in length: a tile's rows run in lockstep over the entries
// they all have, then each finishes alone, unless the weight was
// interleaved (padded) for many token blocks. Decode gathers x.
//
//===----------------------------------------------------------------------===//

#include "MicrokernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"

using namespace mlir;
using namespace mlir::smlir::codegen;
using namespace mlir::sparse_tensor;

namespace {

class CSRWeight final : public WeightAccess {
public:
  using WeightAccess::WeightAccess;

  void bindBuffers(MicrokernelBuilder &kb) const override {
    kb.positions = ToPositionsOp::create(kb.b, kb.loc, lin.weight, 1);
    kb.coordinates = ToCoordinatesOp::create(kb.b, kb.loc, lin.weight, 1);
    kb.values = ToValuesOp::create(kb.b, kb.loc, lin.weight);
  }

  std::string name(bool) const override { return "csr"; }

  double entriesPerRow() const override { return lin.K * kAssumedCSRDensity; }

  void rowExtent(MicrokernelBuilder &kb, Value n, Value &start,
                 Value &length) const override {
    start = kb.toIndex(kb.load(kb.positions, {n}));
    Value end = kb.toIndex(kb.load(kb.positions, {kb.add(n, kb.idx(1))}));
    length = arith::SubIOp::create(kb.b, kb.loc, end, start);
  }

  bool raggedRows() const override { return true; }

  void interleave(MicrokernelBuilder &kb) const override {
    kb.interleaveRows();
  }

  void accumulateRowBlock(MicrokernelBuilder &kb, Value slab, Value n0,
                          Value nb,
                          SmallVectorImpl<Value> &acc) const override {
    if (kb.blockStarts) {
      kb.interleavedRows(nb, slab, acc);
      return;
    }
    kb.sparseRows(n0, kb.U, acc,
                  [&](Value kBase, Value p, MutableArrayRef<Value> a) {
                    kb.accumulateEntry(slab, kBase, p, a);
                  });
  }

  void decodeRows(MicrokernelBuilder &kb, Value m, Value n0,
                  SmallVectorImpl<Value> &sums) const override {
    kb.decodeGathered(m, n0, sums);
  }
};

} // namespace

std::unique_ptr<WeightAccess> mlir::smlir::codegen::makeCSRWeight(const SparseLinear &linear) {
  return std::make_unique<CSRWeight>(linear);
}
