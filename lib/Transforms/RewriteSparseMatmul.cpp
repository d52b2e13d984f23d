//===- RewriteSparseMatmul.cpp - x * W^T as (W * x^T)^T for sparse W -------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_REWRITESPARSEMATMUL
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {

static bool isSparse(Value v) {
  return static_cast<bool>(sparse_tensor::getSparseTensorEncoding(v.getType()));
}

/// `linalg.transpose ins(%w) permutation = [1, 0]` of a sparse matrix.
static Value getTransposedSparseMatrix(Value v) {
  auto transpose = v.getDefiningOp<linalg::TransposeOp>();
  if (!transpose || transpose.getPermutation() != ArrayRef<int64_t>{1, 0})
    return {};
  Value source = transpose.getInput();
  return isSparse(source) ? source : Value();
}

static bool isZeroFill(Value v) {
  auto fill = v.getDefiningOp<linalg::FillOp>();
  return fill && (matchPattern(fill.getInputs()[0], m_AnyZeroFloat()) ||
                  matchPattern(fill.getInputs()[0], m_Zero()));
}

/// A tensor.empty of `shape` whose dynamic sizes come from `sizes`.
static Value emptyLike(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                       Type elementType) {
  return tensor::EmptyOp::create(b, loc, sizes, elementType);
}

static Value transpose2d(OpBuilder &b, Location loc, Value source) {
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, source);
  std::swap(sizes[0], sizes[1]);
  Type elementType = cast<RankedTensorType>(source.getType()).getElementType();
  Value init = emptyLike(b, loc, sizes, elementType);
  return linalg::TransposeOp::create(b, loc, source, init,
                                     ArrayRef<int64_t>{1, 0})
      .getResult()[0];
}

struct SparseMatmulToWxT : public OpRewritePattern<linalg::MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::MatmulOp matmul,
                                PatternRewriter &rewriter) const override {
    if (matmul.hasUserDefinedMaps() || !matmul.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(matmul, "not a plain tensor matmul");
    Value x = matmul.getInputs()[0];
    Value weight = getTransposedSparseMatrix(matmul.getInputs()[1]);
    if (!weight || isSparse(x))
      return rewriter.notifyMatchFailure(matmul, "rhs is not transpose(sparse)");
    Value out = matmul.getOutputs()[0];
    auto outType = cast<RankedTensorType>(out.getType());
    Type elementType = outType.getElementType();
    if (!isa<FloatType>(elementType))
      return rewriter.notifyMatchFailure(matmul, "integer matmul");

    Location loc = matmul.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    // xT[k, m]: activations feature-major so the inner loop is contiguous.
    Value xT = transpose2d(rewriter, loc, x);
    // yT[n, m] = sum_k W[n, k] * xT[k, m], zero-initialized.
    SmallVector<OpFoldResult> ytSizes = {
        tensor::getMixedSize(rewriter, loc, weight, 0),
        tensor::getMixedSize(rewriter, loc, x, 0)};
    Value zero = arith::ConstantOp::create(rewriter, loc, elementType,
                                           rewriter.getZeroAttr(elementType));
    Value ytInit = linalg::FillOp::create(
                       rewriter, loc, ValueRange{zero},
                       ValueRange{emptyLike(rewriter, loc, ytSizes, elementType)})
                       .getResult(0);
    AffineExpr n, m, k;
    bindDims(ctx, n, m, k);
    SmallVector<AffineMap> maps = {AffineMap::get(3, 0, {n, k}, ctx),
                                   AffineMap::get(3, 0, {k, m}, ctx),
                                   AffineMap::get(3, 0, {n, m}, ctx)};
    Value yT =
        linalg::GenericOp::create(
            rewriter, loc, ytInit.getType(), ValueRange{weight, xT},
            ValueRange{ytInit}, maps,
            ArrayRef<utils::IteratorType>{utils::IteratorType::parallel,
                                          utils::IteratorType::parallel,
                                          utils::IteratorType::reduction},
            [&](OpBuilder &b, Location l, ValueRange args) {
              Value product = arith::MulFOp::create(b, l, args[0], args[1]);
              Value sum = arith::AddFOp::create(b, l, args[2], product);
              linalg::YieldOp::create(b, l, sum);
            })
            .getResult(0);
    Value y = transpose2d(rewriter, loc, yT);
    if (!isZeroFill(out)) {
      // matmul accumulates into `out`: add it back.
      auto id = rewriter.getMultiDimIdentityMap(2);
      y = linalg::GenericOp::create(
              rewriter, loc, outType, ValueRange{y}, ValueRange{out},
              ArrayRef<AffineMap>{id, id},
              ArrayRef<utils::IteratorType>{utils::IteratorType::parallel,
                                            utils::IteratorType::parallel},
              [&](OpBuilder &b, Location l, ValueRange args) {
                linalg::YieldOp::create(
                    b, l, ValueRange{arith::AddFOp::create(b, l, args[1], args[0])});
              })
              .getResult(0);
    }
    if (y.getType() != outType)
      y = tensor::CastOp::create(rewriter, loc, outType, y);
    rewriter.replaceOp(matmul, y);
    return success();
  }
};

struct RewriteSparseMatmulPass
    : public smlir::impl::RewriteSparseMatmulBase<RewriteSparseMatmulPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SparseMatmulToWxT>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
