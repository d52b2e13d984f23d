//===- LowerX86DotProducts.cpp - smlir.dot_bf16_pairs to vdpbf16ps --------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_LOWERX86DOTPRODUCTS
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {

struct LowerX86DotProductsPass
    : public smlir::impl::LowerX86DotProductsBase<LowerX86DotProductsPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    getOperation()->walk([&](DotBF16PairsOp op) {
      rewriter.setInsertionPoint(op);
      // vdpbf16ps(acc, a, b): lane i += a[2i] b[2i] + a[2i+1] b[2i+1]; the
      // verifier allows 4, 8 or 16 lanes.
      int64_t lanes = op.getAcc().getType().getNumElements();
      StringRef name = lanes == 16  ? "llvm.x86.avx512bf16.dpbf16ps.512"
                       : lanes == 8 ? "llvm.x86.avx512bf16.dpbf16ps.256"
                                    : "llvm.x86.avx512bf16.dpbf16ps.128";
      auto call = LLVM::CallIntrinsicOp::create(
          rewriter, op.getLoc(), op.getType(), rewriter.getStringAttr(name),
          ValueRange{op.getAcc(), op.getA(), op.getB()});
      rewriter.replaceOp(op, call.getResults());
    });
  }
};

} // namespace
