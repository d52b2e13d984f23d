//===- ConvertSparseMLIRToSparseTensor.cpp - smlir -> sparse_tensor -------===//
//
// Lowers smlir.sparsify with streaming sparsifiers to linalg + sparse_tensor.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/Conversion/Passes.h"
#include "SparseMLIR/IR/SparseMLIROps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_CONVERTSPARSEMLIRTOSPARSETENSOR
#include "SparseMLIR/Conversion/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {

/// Builds `|x| >= threshold ? x : 0` element-wise into a dense tensor.
static Value buildThresholdSelect(OpBuilder &b, Location loc, Value source,
                                  double threshold) {
  auto type = cast<RankedTensorType>(source.getType());
  SmallVector<Value> dynamicSizes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (type.isDynamicDim(d))
      dynamicSizes.push_back(tensor::DimOp::create(b, loc, source, d));
  Value init = tensor::EmptyOp::create(b, loc, type.getShape(),
                                       type.getElementType(), dynamicSizes);
  auto map = b.getMultiDimIdentityMap(type.getRank());
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, type, ValueRange{source}, ValueRange{init},
      ArrayRef<AffineMap>{map, map}, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Type elementType = args[0].getType();
        Value zero = arith::ConstantOp::create(nb, nloc, elementType,
                                               nb.getZeroAttr(elementType));
        Value cut = arith::ConstantOp::create(
            nb, nloc, elementType, nb.getFloatAttr(elementType, threshold));
        Value magnitude = math::AbsFOp::create(nb, nloc, args[0]);
        // `oge` is false for NaN: NaN inputs are dropped.
        Value keep = arith::CmpFOp::create(nb, nloc, arith::CmpFPredicate::OGE,
                                           magnitude, cut);
        Value kept = arith::SelectOp::create(nb, nloc, keep, args[0], zero);
        linalg::YieldOp::create(nb, nloc, kept);
      });
  return generic.getResult(0);
}

/// Stores a dense value in the result type's encoding (nothing for dense).
static Value convertToResultType(OpBuilder &b, Location loc, Value dense,
                                 RankedTensorType resultType) {
  if (!sparse_tensor::getSparseTensorEncoding(resultType))
    return dense;
  return sparse_tensor::ConvertOp::create(b, loc, resultType, dense);
}

struct LowerStreamingSparsify : public OpRewritePattern<SparsifyOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SparsifyOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Attribute sparsifier = op.getSparsifier();
    Value dense;
    if (isa<KeepAllAttr>(sparsifier)) {
      dense = op.getSource();
    } else if (auto threshold = dyn_cast<ThresholdAttr>(sparsifier)) {
      dense = buildThresholdSelect(rewriter, loc, op.getSource(),
                                   threshold.getValue().convertToDouble());
    } else {
      return rewriter.notifyMatchFailure(op, "no lowering for this sparsifier");
    }
    rewriter.replaceOp(op, convertToResultType(rewriter, loc, dense,
                                               op.getResult().getType()));
    return success();
  }
};

struct ConvertSparseMLIRToSparseTensorPass
    : public smlir::impl::ConvertSparseMLIRToSparseTensorBase<
          ConvertSparseMLIRToSparseTensorPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<LowerStreamingSparsify>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Whatever is left has a sparsifier this pass cannot lower: say which.
    WalkResult result = getOperation()->walk([](SparsifyOp op) {
      InFlightDiagnostic diag = op.emitOpError();
      if (std::optional<StringRef> name = op.getTensorName())
        diag << "tensor '" << *name << "': ";
      diag << "sparsifier " << op.getSparsifier() << " ("
           << stringifySparsifierKind(op.getSparsifier().getKind())
           << ") has no lowering in convert-smlir-to-sparse-tensor; lower it "
              "with the smlir sparsifier passes first";
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
