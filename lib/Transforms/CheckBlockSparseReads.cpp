//===- CheckBlockSparseReads.cpp - refuse what reinterpret-map crashes on -===//
//
// Upstream sparse-reinterpret-map crashes on a linalg op reading an n:m
// tensor through an indexing map that reorders its dimensions (BSR's block
// maps it takes). Our frontend never leaves such reads; this turns the
// crash into an error when the lowering runs alone.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_CHECKBLOCKSPARSEREADS
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {

/// A map whose results are dimensions in increasing order (an identity or a
/// projection that keeps the order): what reinterpret-map can demap.
static bool keepsDimensionOrder(AffineMap map) {
  int64_t previous = -1;
  for (AffineExpr result : map.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(result);
    if (!dim || static_cast<int64_t>(dim.getPosition()) <= previous)
      return false;
    previous = dim.getPosition();
  }
  return true;
}

/// An encoding with an n:m (structured) level.
static bool hasNOutOfMLevel(sparse_tensor::SparseTensorEncodingAttr encoding) {
  return llvm::any_of(encoding.getLvlTypes(), [](sparse_tensor::LevelType type) {
    return sparse_tensor::isNOutOfMLT(type);
  });
}

struct CheckBlockSparseReadsPass
    : public smlir::impl::CheckBlockSparseReadsBase<CheckBlockSparseReadsPass> {
  void runOnOperation() override {
    WalkResult result = getOperation().walk([](linalg::LinalgOp op) {
      for (OpOperand &operand : op->getOpOperands()) {
        auto encoding = sparse_tensor::getSparseTensorEncoding(operand.get().getType());
        if (!encoding || !hasNOutOfMLevel(encoding) ||
            keepsDimensionOrder(op.getMatchingIndexingMap(&operand)))
          continue;
        op->emitError() << "reads operand " << operand.getOperandNumber()
                        << " (an n:m tensor, " << encoding
                        << ") through an indexing map that reorders its "
                           "dimensions, which sparse lowering cannot take; "
                           "run smlir-sparse-cpu-pipeline (its frontend "
                           "stores such readers densely)";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
