//===- FuseDenseElementwise.cpp - element-wise fusion that spares sparse ops -===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_FUSEDENSEELEMENTWISE
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {

static bool touchesSparse(Operation *op) {
  auto sparse = [](Type t) {
    return static_cast<bool>(sparse_tensor::getSparseTensorEncoding(t));
  };
  return llvm::any_of(op->getOperandTypes(), sparse) ||
         llvm::any_of(op->getResultTypes(), sparse);
}

static bool hasReduction(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return !linalgOp || linalgOp.getNumReductionLoops() > 0;
}

/// The consumer reads each element of `operand` in exactly one iteration
/// (its indexing map is a permutation of the loops): fusing the producer in
/// computes each of its elements once, even in a reduction.
static bool readsEachElementOnce(OpOperand *operand) {
  auto consumer = cast<linalg::LinalgOp>(operand->getOwner());
  return consumer.getMatchingIndexingMap(operand).isPermutation();
}

/// Math functions and divisions: worth a round trip through memory rather
/// than being computed again for a second reader.
static bool isExpensive(Operation *producer) {
  return producer
      ->walk([](Operation *op) {
        return isa<math::MathDialect>(op->getDialect()) ||
                       isa<arith::DivFOp>(op)
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

struct FuseDenseElementwisePass
    : public smlir::impl::FuseDenseElementwiseBase<FuseDenseElementwisePass> {
  void runOnOperation() override {
    linalg::ControlFusionFn control = [](OpOperand *operand) {
      Operation *producer = operand->get().getDefiningOp();
      Operation *consumer = operand->getOwner();
      if (!producer || touchesSparse(producer) || touchesSparse(consumer) ||
          hasReduction(producer))
        return false;
      // A producer with other readers stays; fused, it runs once more per
      // consumer: only cheap arithmetic is worth that.
      if (!producer->hasOneUse() && isExpensive(producer))
        return false;
      // Into a reduction (a row sum of squares) only when that recomputes
      // nothing: not into contractions, which read an operand per output.
      return !hasReduction(consumer) ||
             (producer->hasOneUse() && readsEachElementOnce(operand));
    };
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     GreedyRewriteConfig().enableFolding(false))))
      return signalPassFailure();
  }
};

} // namespace
