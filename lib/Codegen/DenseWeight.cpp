//===- DenseWeight.cpp - a dense W[N, K] in a linear kernel ---------------===//
//
// Every k of a row is stored: one slab row serves all R rows of a tile, and
// decode runs vectors along k.
//
//===----------------------------------------------------------------------===//

#include "MicrokernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::smlir::codegen;

namespace {

class DenseWeight final : public WeightAccess {
public:
  using WeightAccess::WeightAccess;

  void bindBuffers(MicrokernelBuilder &kb) const override {
    kb.values = bufferization::ToBufferOp::create(
        kb.b, kb.loc, MemRefType::get({lin.N, lin.K}, kb.f32), lin.weight,
        /*read_only=*/true);
  }

  std::string name(bool) const override { return "dense"; }

  // 4 bytes an entry: half an interleaved sparse entry.
  double entriesPerRow() const override { return lin.K / 2.0; }

  void rowExtent(MicrokernelBuilder &kb, Value n, Value &start,
                 Value &length) const override {
    start = n;
    length = kb.idx(lin.K);
  }

  void accumulateRowBlock(MicrokernelBuilder &kb, Value slab, Value n0,
                          Value nb,
                          SmallVectorImpl<Value> &acc) const override {
    SmallVector<Value> rows, lengths;
    kb.rowExtents(n0, rows, lengths);
    kb.denseLoop(slab, rows, acc);
  }

  /// Vectors along k, the x vector shared by the R rows, reduced at the end.
  void decodeRows(MicrokernelBuilder &kb, Value m, Value n0,
                  SmallVectorImpl<Value> &sums) const override {
    OpBuilder &b = kb.b;
    Location loc = kb.loc;
    int64_t R = kb.R, V = kb.V;
    SmallVector<Value> rows, lengths;
    kb.rowExtents(n0, rows, lengths);
    int64_t vectorK = lin.K / V * V;
    SmallVector<Value> acc(R, kb.zeroVector());
    auto loop = scf::ForOp::create(
        b, loc, kb.idx(0), kb.idx(vectorK), kb.idx(V), acc,
        [&](OpBuilder &, Location, Value k, ValueRange carried) {
          Value xv = vector::LoadOp::create(b, loc, kb.vecType, kb.x,
                                            ValueRange{m, k});
          SmallVector<Value> next;
          for (auto [r, n] : llvm::enumerate(rows)) {
            Value wv = vector::LoadOp::create(b, loc, kb.vecType, kb.values,
                                              ValueRange{n, k});
            next.push_back(vector::FMAOp::create(b, loc, wv, xv, carried[r]));
          }
          scf::YieldOp::create(b, loc, next);
        });
    for (int64_t r = 0; r < R; ++r)
      sums[r] = vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD,
                                            loop.getResult(r));
    // The last K mod V columns, scalar.
    for (int64_t k = vectorK; k < lin.K; ++k) {
      Value xk = kb.load(kb.x, {m, kb.idx(k)});
      for (auto [r, n] : llvm::enumerate(rows))
        sums[r] = math::FmaOp::create(b, loc, kb.load(kb.values, {n, kb.idx(k)}),
                                      xk, sums[r]);
    }
  }
};

} // namespace

std::unique_ptr<WeightAccess>
mlir::smlir::codegen::makeDenseWeight(const SparseLinear &linear) {
  return std::make_unique<DenseWeight>(linear);
}
