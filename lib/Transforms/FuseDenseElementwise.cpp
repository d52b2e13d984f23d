//===- FuseDenseElementwise.cpp - element-wise fusion that spares sparse ops -===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
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

struct FuseDenseElementwisePass
    : public smlir::impl::FuseDenseElementwiseBase<FuseDenseElementwisePass> {
  void runOnOperation() override {
    linalg::ControlFusionFn control = [](OpOperand *operand) {
      Operation *producer = operand->get().getDefiningOp();
      Operation *consumer = operand->getOwner();
      return producer && !touchesSparse(producer) && !touchesSparse(consumer) &&
             !hasReduction(consumer) && !hasReduction(producer) &&
             !consumer->hasAttr("smlir.sparse_kernel");
    };
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     GreedyRewriteConfig().enableFolding(false))))
      return signalPassFailure();
  }
};

} // namespace
