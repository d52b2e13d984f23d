//===- RaiseSparseMatmuls.cpp - CSR inputs' matmuls to smlir.spmm ---------===//
//
// torch-mlir writes `adj @ h` as `linalg.matmul ins(%adj, %h) outs(fill 0)`.
// With %adj a CSR tensor (a graph-mode sparse input), upstream
// sparsification runs it as scalar loops; smlir.spmm's kernel (SpMM.cpp)
// reads the same buffers with vector rows of h.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_RAISESPARSEMATMULS
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {

/// True where `init` is a `linalg.fill` of +0.0 (the product is the result).
static bool isZeroFilled(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  return fill && matchPattern(fill.getInputs()[0], m_PosZeroFloat());
}

struct RaiseCSRMatmul : OpRewritePattern<linalg::MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::MatmulOp matmul,
                                PatternRewriter &rewriter) const override {
    if (!matmul.hasPureTensorSemantics() ||
        !matmul.getIndexingMaps().empty() &&
            matmul.getIndexingMapsArray() !=
                matmul.getDefaultIndexingMaps(matmul.getContext()))
      return rewriter.notifyMatchFailure(matmul, "not a plain matmul");
    Value a = matmul.getDpsInputs()[0], h = matmul.getDpsInputs()[1];
    auto aType = cast<RankedTensorType>(a.getType());
    auto hType = cast<RankedTensorType>(h.getType());
    auto resultType = cast<RankedTensorType>(matmul.getResult(0).getType());
    if (!SpMMOp::isCSRMatrix(aType) || !aType.getElementType().isF32())
      return rewriter.notifyMatchFailure(matmul, "A is not an f32 CSR tensor");
    if (sparse_tensor::getSparseTensorEncoding(hType) ||
        sparse_tensor::getSparseTensorEncoding(resultType) ||
        !hType.getElementType().isF32() ||
        ShapedType::isDynamic(hType.getDimSize(1)))
      return rewriter.notifyMatchFailure(
          matmul, "h or the result is sparse, not f32, or of dynamic width");
    if (!isZeroFilled(matmul.getDpsInits()[0]))
      return rewriter.notifyMatchFailure(matmul, "init is not a zero fill");
    auto spmmType = RankedTensorType::get(
        {ShapedType::kDynamic, hType.getDimSize(1)}, rewriter.getF32Type());
    Value y = SpMMOp::create(rewriter, matmul.getLoc(), spmmType,
                             ValueRange{a}, h);
    rewriter.replaceOpWithNewOp<tensor::CastOp>(matmul, resultType, y);
    return success();
  }
};

struct RaiseSparseMatmulsPass
    : public smlir::impl::RaiseSparseMatmulsBase<RaiseSparseMatmulsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseCSRMatmul>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
