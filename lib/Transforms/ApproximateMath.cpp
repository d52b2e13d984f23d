//===- ApproximateMath.cpp - vectorizable f32 transcendental functions ----===//

#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_APPROXIMATEMATH
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;

namespace {

struct ApproximateMathPass
    : public smlir::impl::ApproximateMathBase<ApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // The approximations rewrite f32 (and vectors of it) only; no f16/bf16
    // widening here, so other types keep their exact libm calls.
    // The predicate sees full op names ("math.erf").
    populateMathPolynomialApproximationPatterns(patterns, [](StringRef op) {
      return op.consume_front("math.") &&
             llvm::is_contained({"erf", "exp", "expm1", "log", "log1p", "log2",
                                 "tanh", "atan", "atan2", "asin", "acos",
                                 "cbrt", "sin", "cos"},
                                op);
    });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
