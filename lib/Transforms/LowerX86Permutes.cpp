//===- LowerX86Permutes.cpp - smlir.permute2 to vpermi2ps -----------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_LOWERX86PERMUTES
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {

struct LowerX86PermutesPass
    : public smlir::impl::LowerX86PermutesBase<LowerX86PermutesPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    getOperation()->walk([&](Permute2Op op) {
      rewriter.setInsertionPoint(op);
      // vpermi2ps(a, idx, b): lane i is concat(a, b)[idx[i] mod 2N].
      StringRef name = op.getLow().getType().getNumElements() == 16
                           ? "llvm.x86.avx512.vpermi2var.ps.512"
                           : "llvm.x86.avx512.vpermi2var.ps.256";
      auto call = LLVM::CallIntrinsicOp::create(
          rewriter, op.getLoc(), op.getType(), rewriter.getStringAttr(name),
          ValueRange{op.getLow(), op.getIndex(), op.getHigh()});
      rewriter.replaceOp(op, call.getResults());
    });
  }
};

} // namespace
