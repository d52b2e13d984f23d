//===- ConvertSparseMLIRToSparseTensor.cpp - smlir -> sparse_tensor -------===//
//
// Lowers smlir.sparsify to linalg + sparse_tensor: streaming sparsifiers and
// n:m magnitude here, scalar / block fraction and transposable n:m in
// MaterializingSparsifiers.cpp.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/Conversion/Passes.h"
#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparsifierLowering.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_CONVERTSPARSEMLIRTOSPARSETENSOR
#include "SparseMLIR/Conversion/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {

/// An element-wise linalg.generic from `source` into a zero-filled tensor;
/// `body(builder, loc, in, out)` returns the value to keep (`out` = 0 drops).
///
/// The zero-filled output is what keeps upstream's FoldConvertIntoProducer
/// from turning generic + convert into one dense-in/sparse-out generic,
/// which MLIR 22's sparsification rejects ("failed to legalize unresolved
/// materialization"): that fold needs an uninitialized (tensor.empty) init.
static Value buildMask(
    OpBuilder &b, Location loc, Value source,
    function_ref<Value(OpBuilder &, Location, Value, Value)> body) {
  auto type = cast<RankedTensorType>(source.getType());
  Type elementType = type.getElementType();
  SmallVector<Value> dynamicSizes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (type.isDynamicDim(d))
      dynamicSizes.push_back(tensor::DimOp::create(b, loc, source, d));
  Value empty = tensor::EmptyOp::create(b, loc, type.getShape(), elementType,
                                        dynamicSizes);
  Value zero = arith::ConstantOp::create(b, loc, elementType,
                                         b.getZeroAttr(elementType));
  Value zeros =
      linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{empty})
          .getResult(0);
  auto map = b.getMultiDimIdentityMap(type.getRank());
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, type, ValueRange{source}, ValueRange{zeros},
      ArrayRef<AffineMap>{map, map}, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(nb, nloc, body(nb, nloc, args[0], args[1]));
      });
  return generic.getResult(0);
}

/// The dimension sizes of `source` as index values.
static SmallVector<Value> buildSizes(OpBuilder &b, Location loc, Value source) {
  auto type = cast<RankedTensorType>(source.getType());
  SmallVector<Value> sizes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    sizes.push_back(type.isDynamicDim(d)
                        ? tensor::DimOp::create(b, loc, source, d).getResult()
                        : arith::ConstantIndexOp::create(b, loc,
                                                         type.getDimSize(d))
                              .getResult());
  return sizes;
}

/// A streaming sparsifier applied element-wise into a dense tensor (or a
/// plain copy for keep_all).
static Value buildStreamingMask(OpBuilder &b, Location loc, Value source,
                                SparsifierAttrInterface sparsifier,
                                Value callNumber, ModuleOp module) {
  auto type = cast<RankedTensorType>(source.getType());
  SmallVector<Value> sizes = buildSizes(b, loc, source);
  return buildMask(
      b, loc, source, [&](OpBuilder &nb, Location nloc, Value in, Value out) {
        SmallVector<Value> indices;
        for (int64_t d = 0; d < type.getRank(); ++d)
          indices.push_back(linalg::IndexOp::create(nb, nloc, d));
        FailureOr<Value> keep = sparsifier.buildKeep(nb, nloc, in, indices,
                                                     sizes, callNumber, module);
        assert(succeeded(keep) && "not a streaming sparsifier");
        if (!*keep)
          return in;
        return arith::SelectOp::create(nb, nloc, *keep, in, out).getResult();
      });
}

/// n:m magnitude along `dim` with O(m) work per element and no sorting: an
/// element is kept when fewer than n elements of its group rank above it,
/// where k ranks above j if |x_k| > |x_j|, or |x_k| == |x_j| and k < j
/// (ties go to the lower index, as in sparse_mlir.weights). With `rows` > 1
/// (dim the last dimension) a position's magnitude is the sum of |x| over
/// the `rows` rows of its row group, so the group's rows keep one pattern
/// (O(m * rows) work per element); where `rows` does not divide dimension
/// dim - 1, the last group sums the rows it has.
static Value buildNMMagnitude(OpBuilder &b, Location loc, Value source,
                              int64_t n, int64_t m, int64_t dim, int64_t rows) {
  auto type = cast<RankedTensorType>(source.getType());
  // The row dimension's size, where a row group may be partial.
  Value rowCount;
  if (rows > 1 && (type.isDynamicDim(dim - 1) || type.getDimSize(dim - 1) % rows))
    rowCount = buildSizes(b, loc, source)[dim - 1];
  return buildMask(
      b, loc, source, [&](OpBuilder &nb, Location nloc, Value in, Value out) {
        SmallVector<Value> indices;
        for (int64_t d = 0; d < type.getRank(); ++d)
          indices.push_back(linalg::IndexOp::create(nb, nloc, d));
        Value mValue = arith::ConstantIndexOp::create(nb, nloc, m);
        Value position = arith::RemUIOp::create(nb, nloc, indices[dim], mValue);
        Value groupStart = arith::SubIOp::create(nb, nloc, indices[dim], position);
        // |x| at `at`, summed over the row group when rows share a pattern.
        Value rowStart;
        if (rows > 1) {
          Value rowValue = arith::ConstantIndexOp::create(nb, nloc, rows);
          rowStart = arith::SubIOp::create(
              nb, nloc, indices[dim - 1],
              arith::RemUIOp::create(nb, nloc, indices[dim - 1], rowValue));
        }
        auto magnitude = [&](ArrayRef<Value> at) -> Value {
          if (rows == 1)
            return math::AbsFOp::create(
                nb, nloc, tensor::ExtractOp::create(nb, nloc, source, at));
          SmallVector<Value> row(at);
          Value sum;
          for (int64_t r = 0; r < rows; ++r) {
            Value line = arith::AddIOp::create(
                nb, nloc, rowStart, arith::ConstantIndexOp::create(nb, nloc, r));
            row[dim - 1] = line;
            Value inside;
            if (rowCount && r > 0) {
              // Rows past the end add 0 (read clamped, in bounds).
              inside = arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::ult,
                                             line, rowCount);
              row[dim - 1] = arith::MinUIOp::create(
                  nb, nloc, line,
                  arith::SubIOp::create(
                      nb, nloc, rowCount,
                      arith::ConstantIndexOp::create(nb, nloc, 1)));
            }
            Value term = math::AbsFOp::create(
                nb, nloc, tensor::ExtractOp::create(nb, nloc, source, row));
            if (inside)
              term = arith::SelectOp::create(
                  nb, nloc, inside, term,
                  arith::ConstantOp::create(nb, nloc, term.getType(),
                                            nb.getZeroAttr(term.getType())));
            sum = sum ? arith::AddFOp::create(nb, nloc, sum, term).getResult()
                      : term;
          }
          return sum;
        };
        // NaN ranks below every number (as in sparse_mlir.weights): compared
        // as -1, it is never kept over a number and counts against nothing.
        auto ranked = [&](Value v) -> Value {
          Value isNaN = arith::CmpFOp::create(
              nb, nloc, arith::CmpFPredicate::UNO, v, v);
          Value minusOne = arith::ConstantOp::create(
              nb, nloc, v.getType(), nb.getFloatAttr(v.getType(), -1.0));
          return arith::SelectOp::create(nb, nloc, isNaN, minusOne, v);
        };
        Value mine = ranked(rows == 1
                                ? math::AbsFOp::create(nb, nloc, in).getResult()
                                : magnitude(indices));
        Type i32 = nb.getI32Type();
        Value above = arith::ConstantOp::create(nb, nloc, i32,
                                                nb.getI32IntegerAttr(0));
        Value one = arith::ConstantOp::create(nb, nloc, i32,
                                              nb.getI32IntegerAttr(1));
        for (int64_t k = 0; k < m; ++k) {
          Value kValue = arith::ConstantIndexOp::create(nb, nloc, k);
          SmallVector<Value> other = indices;
          other[dim] = arith::AddIOp::create(nb, nloc, groupStart, kValue);
          Value theirs = ranked(magnitude(other));
          Value greater = arith::CmpFOp::create(
              nb, nloc, arith::CmpFPredicate::OGT, theirs, mine);
          Value equal = arith::CmpFOp::create(nb, nloc, arith::CmpFPredicate::OEQ,
                                              theirs, mine);
          Value before = arith::CmpIOp::create(
              nb, nloc, arith::CmpIPredicate::ult, kValue, position);
          Value ranksAbove = arith::OrIOp::create(
              nb, nloc, greater, arith::AndIOp::create(nb, nloc, equal, before));
          above = arith::AddIOp::create(
              nb, nloc, above,
              arith::SelectOp::create(nb, nloc, ranksAbove, one,
                                      arith::ConstantOp::create(
                                          nb, nloc, i32, nb.getI32IntegerAttr(0))));
        }
        Value keep = arith::CmpIOp::create(
            nb, nloc, arith::CmpIPredicate::slt, above,
            arith::ConstantOp::create(nb, nloc, i32, nb.getI32IntegerAttr(n)));
        return arith::SelectOp::create(nb, nloc, keep, in, out).getResult();
      });
}

static bool hasStructuredLevel(RankedTensorType type) {
  auto encoding = sparse_tensor::getSparseTensorEncoding(type);
  return encoding && llvm::any_of(encoding.getLvlTypes(), [](auto lt) {
           return sparse_tensor::isNOutOfMLT(lt);
         });
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
    SparsifierAttrInterface sparsifier = op.getSparsifier();
    // sparse_tensor.convert drops zeros, which leaves n:m groups with fewer
    // than n entries: the structured level then reads garbage. Those need the
    // n:m sparsifier lowering, which pads every group to exactly n.
    if (hasStructuredLevel(op.getResult().getType()))
      return rewriter.notifyMatchFailure(op, "n:m storage needs exactly n per group");
    Value dense;
    Value source = op.getSource();
    bool toSparse =
        sparse_tensor::getSparseTensorEncoding(op.getResult().getType()) !=
        nullptr;
    if (isa<KeepAllAttr>(sparsifier)) {
      // A linalg producer would be folded into the convert (see above):
      // copy through a zero-filled output first. Arguments convert directly.
      dense = toSparse && source.getDefiningOp<linalg::LinalgOp>()
                  ? buildStreamingMask(rewriter, loc, source, sparsifier, Value(),
                                       ModuleOp())
                  : source;
    } else if (sparsifier.getKind() == SparsifierKind::Streaming) {
      dense = buildStreamingMask(rewriter, loc, source, sparsifier,
                                 buildCallNumber(rewriter, loc, op),
                                 op->getParentOfType<ModuleOp>());
    } else if (auto nm = dyn_cast<NMMagnitudeAttr>(sparsifier);
               nm && !nm.getTransposable()) {
      int64_t rank = op.getSource().getType().getRank();
      int64_t dim = nm.getDim() < 0 ? nm.getDim() + rank : nm.getDim();
      dense = buildNMMagnitude(rewriter, loc, source, nm.getN(), nm.getM(), dim,
                               nm.getRows());
    } else if (!getMissingMaskLoweringReason(sparsifier, op.getSource().getType())
                    .empty()) {
      return rewriter.notifyMatchFailure(op, "no lowering for this tensor type");
    } else if (auto scalar = dyn_cast<ScalarFractionAttr>(sparsifier)) {
      dense = buildScalarFractionMask(rewriter, loc, source,
                                      scalar.getFraction().convertToDouble());
    } else if (auto block = dyn_cast<BlockFractionAttr>(sparsifier)) {
      dense = buildBlockFractionMask(rewriter, loc, source,
                                     block.getFraction().convertToDouble(),
                                     block.getBlock()[0], block.getBlock()[1]);
    } else if (auto transposable = dyn_cast<NMMagnitudeAttr>(sparsifier)) {
      dense = buildTransposableNMMask(rewriter, loc, source,
                                      transposable.getN(), transposable.getM());
    } else {
      return rewriter.notifyMatchFailure(op, "no lowering for this sparsifier");
    }
    rewriter.replaceOp(op, convertToResultType(rewriter, loc, dense,
                                               op.getResult().getType()));
    return success();
  }
};

/// An smlir.kernel smlir-outline-kernels left in place (one in a nested
/// module) runs its loops where it stands.
struct InlineKernel : public OpRewritePattern<KernelOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(KernelOp kernel,
                                PatternRewriter &rewriter) const override {
    rewriter.inlineBlockBefore(&kernel.getBody().front(), kernel);
    rewriter.eraseOp(kernel);
    return success();
  }
};

struct ConvertSparseMLIRToSparseTensorPass
    : public smlir::impl::ConvertSparseMLIRToSparseTensorBase<
          ConvertSparseMLIRToSparseTensorPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<LowerStreamingSparsify, InlineKernel>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Whatever is left has a sparsifier this pass cannot lower: say which,
    // for every such op.
    bool failedAny = false;
    getOperation()->walk([&](SparsifyOp op) {
      failedAny = true;
      InFlightDiagnostic diag = op.emitOpError();
      if (std::optional<StringRef> name = op.getTensorName())
        diag << "tensor '" << *name << "': ";
      if (hasStructuredLevel(op.getResult().getType())) {
        diag << "storing into " << op.getEncoding()
             << " needs every group padded to exactly n entries; "
                "sparse_tensor.convert would drop zeros and corrupt the "
                "groups (pass the tensor as a packed n:m function argument "
                "instead)";
        return;
      }
      diag << "sparsifier " << op.getSparsifier() << " ("
           << stringifySparsifierKind(op.getSparsifier().getKind())
           << ") has no lowering in convert-smlir-to-sparse-tensor";
      std::string reason = getMissingMaskLoweringReason(
          op.getSparsifier(), op.getSource().getType());
      if (!reason.empty())
        diag << " for " << op.getSource().getType() << " (" << reason << ")";
      diag << "; apply it to a function argument "
              "(smlir-hoist-argument-sparsifiers) so the caller runs it";
    });
    if (failedAny)
      signalPassFailure();
  }
};

} // namespace
