//===- RaiseLinear.cpp - torch-mlir's forms of a linear to smlir.linear ---===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_RAISELINEAR
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {

/// `linalg.transpose ins(%w) permutation = [1, 0]` of a sparse matrix, or,
/// with `dense`, of a dense f32 matrix of static shape (for
/// smlir-lower-sparse-linear's dense micro-kernel).
static Value getTransposedWeight(Value v, bool dense) {
  auto transpose = v.getDefiningOp<linalg::TransposeOp>();
  if (!transpose || transpose.getPermutation() != ArrayRef<int64_t>{1, 0})
    return {};
  Value source = transpose.getInput();
  if (isSparseTensor(source))
    return source;
  auto type = cast<RankedTensorType>(source.getType());
  return dense && type.hasStaticShape() && type.getElementType().isF32()
             ? source
             : Value();
}


/// One floating-point element type for all of `values` (the kernel body is a
/// plain mulf + addf; mixed precision would need extensions).
static bool isUniformFloat(ArrayRef<Value> values) {
  Type type = getElementTypeOrSelf(values.front().getType());
  return isa<FloatType>(type) && llvm::all_of(values, [&](Value v) {
           return getElementTypeOrSelf(v.getType()) == type;
         });
}

/// `v` with an element-wise `arith.extf` generic (identity maps, all
/// parallel) looked through: torch-mlir's extension of an f16/bf16 operand.
static Value stripExtF(Value v) {
  auto generic = v.getDefiningOp<linalg::GenericOp>();
  if (!generic || !generic.hasPureTensorSemantics() ||
      generic.getNumDpsInputs() != 1 || generic.getNumDpsInits() != 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return v;
  Block &body = generic.getRegion().front();
  auto ext = dyn_cast<arith::ExtFOp>(&body.front());
  if (!ext || ext.getIn() != body.getArgument(0) ||
      body.getTerminator()->getOperand(0) != ext.getResult())
    return v;
  return generic.getDpsInputs()[0];
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

/// A zero fill with the shape of `like`.
static Value zeroFillLike(OpBuilder &b, Location loc, Value like) {
  auto type = cast<RankedTensorType>(like.getType());
  Value zero = arith::ConstantOp::create(b, loc, type.getElementType(),
                                         b.getZeroAttr(type.getElementType()));
  Value empty = emptyLike(b, loc, tensor::getMixedSizes(b, loc, like),
                          type.getElementType());
  return linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{empty})
      .getResult(0);
}

/// smlir.linear(x, W) + out for a dense x[M, K] and W[N, K] or, with
/// `weightIsKN`, a sparse W[K, N] (orientation in_out).
static Value buildLinear(PatternRewriter &rewriter, Location loc, Value x,
                      Value weight, Value out, bool weightIsKN = false) {
  auto outType = cast<RankedTensorType>(out.getType());
  auto weightType = cast<RankedTensorType>(weight.getType());
  auto yType = RankedTensorType::get(
      {cast<RankedTensorType>(x.getType()).getDimSize(0),
       weightType.getDimSize(weightIsKN ? 1 : 0)},
      outType.getElementType());
  Value y = LinearOp::create(
      rewriter, loc, yType, x, weight, /*bias=*/Value(), /*into=*/Value(),
      /*columns=*/Value(),
      weightIsKN ? WeightOrientation::InOut : WeightOrientation::OutIn);
  if (y.getType() != outType)
    y = tensor::CastOp::create(rewriter, loc, outType, y);
  if (isZeroFill(out))
    return y;
  // The contraction accumulates into `out`: add it back.
  auto id = rewriter.getMultiDimIdentityMap(2);
  return linalg::GenericOp::create(
             rewriter, loc, outType, ValueRange{y}, ValueRange{out},
             ArrayRef<AffineMap>{id, id},
             ArrayRef<utils::IteratorType>{utils::IteratorType::parallel,
                                           utils::IteratorType::parallel},
             [&](OpBuilder &b, Location l, ValueRange args) {
               linalg::YieldOp::create(
                   b, l,
                   ValueRange{arith::AddFOp::create(b, l, args[1], args[0])});
             })
      .getResult(0);
}

/// linalg.matmul(x, transpose(W)) with x[M, K].
struct MatmulToLinear : public OpRewritePattern<linalg::MatmulOp> {
  MatmulToLinear(MLIRContext *ctx, bool denseWeights, bool mixedPrecision)
      : OpRewritePattern(ctx), denseWeights(denseWeights),
        mixedPrecision(mixedPrecision) {}
  bool denseWeights, mixedPrecision;

  /// x and W of one float type (each maybe extended by an extf generic)
  /// into a zero-filled wider accumulator: the linear with a wider result.
  /// Only into zero: F.linear's form, the one convert-smlir-to-nvgpu runs.
  LogicalResult raiseMixed(linalg::MatmulOp matmul,
                           PatternRewriter &rewriter) const {
    Value x = stripExtF(matmul.getInputs()[0]);
    Value weight =
        getTransposedWeight(stripExtF(matmul.getInputs()[1]), denseWeights);
    Value out = matmul.getOutputs()[0];
    if (!weight || isSparseTensor(x) || isSparseTensor(out) ||
        !isZeroFill(out) || !isUniformFloat({x, weight}) ||
        !LinearOp::isWiderFloat(getElementTypeOrSelf(out.getType()),
                                getElementTypeOrSelf(x.getType())))
      return failure();
    rewriter.replaceOp(matmul,
                       buildLinear(rewriter, matmul.getLoc(), x, weight, out));
    return success();
  }

  LogicalResult matchAndRewrite(linalg::MatmulOp matmul,
                                PatternRewriter &rewriter) const override {
    if (matmul.hasUserDefinedMaps() || !matmul.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(matmul, "not a plain tensor matmul");
    if (mixedPrecision && succeeded(raiseMixed(matmul, rewriter)))
      return success();
    Value x = matmul.getInputs()[0];
    Value weight = getTransposedWeight(matmul.getInputs()[1], denseWeights);
    if (!weight || isSparseTensor(x))
      return rewriter.notifyMatchFailure(matmul, "rhs is not transpose(sparse)");
    Value out = matmul.getOutputs()[0];
    if (isSparseTensor(out))   // the kernels write a dense y
      return rewriter.notifyMatchFailure(matmul, "sparse output");
    if (!isUniformFloat({x, weight, out}))
      return rewriter.notifyMatchFailure(matmul, "integer or mixed precision");
    rewriter.replaceOp(matmul, buildLinear(rewriter, matmul.getLoc(), x, weight, out));
    return success();
  }
};

/// A sparse W[K, N] read as the right-hand side of x * W (HF GPT-2's Conv1D,
/// `x @ W`, `F.linear(x, W.t())`) in an encoding upstream sparsification
/// lowers in the yT[n, m] += W[k, n] * xT[k, m] kernel: CSR, CSC, COO, BSR.
/// n:m (a structured level) is not: sparse-reinterpret-map crashes on it
/// (MLIR 22), so it keeps its dense fallback.
static bool isSparseKNWeight(Value weight) {
  auto type = dyn_cast<RankedTensorType>(weight.getType());
  auto encoding = type ? sparse_tensor::getSparseTensorEncoding(type) : nullptr;
  return encoding && type.getRank() == 2 &&
         llvm::none_of(encoding.getLvlTypes(), [](sparse_tensor::LevelType lt) {
           return sparse_tensor::isNOutOfMLT(lt);
         });
}

/// A W[K, N] whose encoding stores its transpose in the identity order (CSC:
/// (d0, d1) -> (d1 : dense, d0 : compressed), the storage of CSR W^T[N, K]),
/// reinterpreted (no copy) as that W^T: the W[n, k] operand of the usual
/// kernel, which smlir-lower-sparse-linear's CSR micro-kernel takes. Null
/// for other encodings.
static Value reinterpretAsTransposed(OpBuilder &b, Location loc, Value weight) {
  auto encoding = sparse_tensor::getSparseTensorEncoding(weight.getType());
  AffineMap dimToLvl = encoding ? encoding.getDimToLvl() : AffineMap();
  if (!dimToLvl ||
      dimToLvl != AffineMap::getPermutationMap(ArrayRef<unsigned>{1, 0},
                                               b.getContext()))
    return Value();
  return sparse_tensor::ReinterpretMapOp::create(b, loc,
                                                 encoding.withoutDimToLvl(),
                                                 weight);
}

/// x * W for a sparse W[K, N]: the W^T kernel of a CSC W reinterpreted as
/// CSR W^T, else the kernel reading W[k, n].
static Value buildXW(PatternRewriter &rewriter, Location loc, Value x,
                     Value weight, Value out) {
  if (Value transposed = reinterpretAsTransposed(rewriter, loc, weight))
    return buildLinear(rewriter, loc, x, transposed, out);
  return buildLinear(rewriter, loc, x, weight, out, /*weightIsKN=*/true);
}

/// linalg.matmul(x, W) with x[M, K] dense and W[K, N] sparse: the same
/// (W^T * x^T)^T loop order, reading W through the map (k, n).
struct RhsMatmulToLinear : public OpRewritePattern<linalg::MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::MatmulOp matmul,
                                PatternRewriter &rewriter) const override {
    if (matmul.hasUserDefinedMaps() || !matmul.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(matmul, "not a plain tensor matmul");
    Value x = matmul.getInputs()[0], weight = matmul.getInputs()[1];
    if (!isSparseKNWeight(weight) || isSparseTensor(x))
      return rewriter.notifyMatchFailure(matmul, "rhs is not a sparse W[K, N]");
    Value out = matmul.getOutputs()[0];
    if (isSparseTensor(out))   // the kernels write a dense y
      return rewriter.notifyMatchFailure(matmul, "sparse output");
    if (!isUniformFloat({x, weight, out}))
      return rewriter.notifyMatchFailure(matmul, "integer or mixed precision");
    rewriter.replaceOp(matmul,
                       buildXW(rewriter, matmul.getLoc(), x, weight, out));
    return success();
  }
};

/// The weight of a batched linear x[b, m, k] * rhs[k, n]: transpose(W), or
/// a sparse W[K, N] itself (`weightIsKN`), with a dense x and out (the
/// kernels write a dense y; a sparse 3-d out would also keep its rank-3
/// encoding on the collapsed 2-d type) of one float type.
struct BatchedOperands {
  Value weight;
  bool weightIsKN;
};
static FailureOr<BatchedOperands>
matchBatchedOperands(PatternRewriter &rewriter, Operation *op, Value x,
                     Value rhs, Value out, bool denseWeights) {
  BatchedOperands operands{getTransposedWeight(rhs, denseWeights), false};
  if (!operands.weight && isSparseKNWeight(rhs))
    operands = {rhs, true};
  if (!operands.weight || isSparseTensor(x))
    return rewriter.notifyMatchFailure(
        op, "rhs is neither transpose(sparse) nor a sparse W[K, N]");
  if (isSparseTensor(out))
    return rewriter.notifyMatchFailure(op, "sparse output");
  if (!isUniformFloat({x, operands.weight, out}))
    return rewriter.notifyMatchFailure(op, "integer or mixed precision");
  return operands;
}

/// out[b, m, n] += x[b, m, k] * W: collapse (b, m), build the 2-d kernel
/// (buildLinear, or buildXW with `weightIsKN`), expand back.
static Value buildBatchedLinear(PatternRewriter &rewriter, Location loc, Value x,
                             Value weight, Value out, bool weightIsKN) {
  SmallVector<ReassociationIndices> collapse = {{0, 1}, {2}};
  Value x2d = tensor::CollapseShapeOp::create(rewriter, loc, x, collapse);
  Value out2d = tensor::CollapseShapeOp::create(rewriter, loc, out, collapse);
  // The zero fill of a 3-d out collapses to a zero fill we can see through
  // only if we rebuild it: test the 3-d value instead.
  Value out2dInit =
      isZeroFill(out) ? zeroFillLike(rewriter, loc, out2d) : out2d;
  Value y2d = weightIsKN ? buildXW(rewriter, loc, x2d, weight, out2dInit)
                         : buildLinear(rewriter, loc, x2d, weight, out2dInit);
  auto outType = cast<RankedTensorType>(out.getType());
  return tensor::ExpandShapeOp::create(rewriter, loc, outType, y2d, collapse,
                                       tensor::getMixedSizes(rewriter, loc,
                                                             out));
}

/// True when `generic` is out[b, m, n] += x[b, m, k] * Wt[k, n] (the form
/// torch-mlir gives F.linear on 3-d inputs) with a multiply-add body.
static bool isBatchedLinear(linalg::GenericOp generic) {
  if (generic.getNumDpsInputs() != 2 || generic.getNumDpsInits() != 1 ||
      generic.getNumLoops() != 4 || !generic.hasPureTensorSemantics())
    return false;
  MLIRContext *ctx = generic.getContext();
  AffineExpr b, m, n, k;
  bindDims(ctx, b, m, n, k);
  SmallVector<AffineMap> expected = {AffineMap::get(4, 0, {b, m, k}, ctx),
                                     AffineMap::get(4, 0, {k, n}, ctx),
                                     AffineMap::get(4, 0, {b, m, n}, ctx)};
  if (generic.getIndexingMapsArray() != ArrayRef<AffineMap>(expected))
    return false;
  auto iterators = generic.getIteratorTypesArray();
  if (iterators[0] != utils::IteratorType::parallel ||
      iterators[1] != utils::IteratorType::parallel ||
      iterators[2] != utils::IteratorType::parallel ||
      iterators[3] != utils::IteratorType::reduction)
    return false;
  // Body: yield(out + x * w) (either operand order).
  Block &body = generic.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || body.getOperations().size() != 3)
    return false;
  Value acc = body.getArgument(2);
  Value other = add.getLhs() == acc ? add.getRhs() : add.getLhs();
  auto mul = other.getDefiningOp<arith::MulFOp>();
  if (!mul || (add.getLhs() != acc && add.getRhs() != acc))
    return false;
  Value in0 = body.getArgument(0), in1 = body.getArgument(1);
  return (mul.getLhs() == in0 && mul.getRhs() == in1) ||
         (mul.getLhs() == in1 && mul.getRhs() == in0);
}

/// out[b, m, n] += x[b, m, k] * transpose(W)[k, n]: collapse (b, m), do WxT,
/// expand back.
struct BatchedGenericToLinear : public OpRewritePattern<linalg::GenericOp> {
  BatchedGenericToLinear(MLIRContext *ctx, bool denseWeights)
      : OpRewritePattern(ctx), denseWeights(denseWeights) {}
  bool denseWeights;

  LogicalResult matchAndRewrite(linalg::GenericOp generic,
                                PatternRewriter &rewriter) const override {
    if (!isBatchedLinear(generic))
      return rewriter.notifyMatchFailure(generic, "not x[b,m,k] * Wt[k,n]");
    Value x = generic.getDpsInputs()[0];
    Value out = generic.getDpsInits()[0];
    FailureOr<BatchedOperands> operands = matchBatchedOperands(
        rewriter, generic, x, generic.getDpsInputs()[1], out, denseWeights);
    if (failed(operands))
      return failure();
    rewriter.replaceOp(generic,
                       buildBatchedLinear(rewriter, generic.getLoc(), x,
                                       operands->weight, out,
                                       operands->weightIsKN));
    return success();
  }
};

/// The 2-d source of a broadcast over the leading (batch) dimension of a
/// rank-3 tensor: `linalg.broadcast ins(%s) dimensions = [0]`, or the
/// linalg.generic form (maps (b, k, n) -> (k, n) and the identity, all
/// parallel, yielding its input) torch-mlir gives aten.expand. Null otherwise.
static Value getBatchBroadcastSource(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || type.getRank() != 3 || isSparseTensor(v))
    return {};
  if (auto broadcast = v.getDefiningOp<linalg::BroadcastOp>()) {
    if (!broadcast.hasPureTensorSemantics() ||
        broadcast.getDimensions() != ArrayRef<int64_t>{0})
      return {};
    return broadcast.getInput();
  }
  auto generic = v.getDefiningOp<linalg::GenericOp>();
  if (!generic || !generic.hasPureTensorSemantics() ||
      generic.getNumDpsInputs() != 1 || generic.getNumDpsInits() != 1 ||
      generic.getNumLoops() != 3 ||
      generic.getNumParallelLoops() != generic.getNumLoops())
    return {};
  MLIRContext *ctx = generic.getContext();
  AffineExpr b, k, n;
  bindDims(ctx, b, k, n);
  SmallVector<AffineMap> expected = {AffineMap::get(3, 0, {k, n}, ctx),
                                     AffineMap::getMultiDimIdentityMap(3, ctx)};
  if (generic.getIndexingMapsArray() != ArrayRef<AffineMap>(expected))
    return {};
  Block &body = generic.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (body.getOperations().size() != 1 || yield.getNumOperands() != 1 ||
      yield.getOperand(0) != body.getArgument(0))
    return {};
  return generic.getDpsInputs()[0];
}

/// linalg.batch_matmul(x[b, m, k], broadcast_b(transpose(W))[b, k, n]): what
/// torch decomposes F.linear into when its input is a non-contiguous reshape
/// (expand + bmm: LLaMA's o_proj after SDPA, MLP-Mixer's token mixing on
/// x.transpose(1, 2)). Every batch reads the same W, so this is the batched
/// linear above: collapse (b, m), WxT, expand back. A broadcast sparse
/// W[K, N] itself takes the x * W kernel.
struct BroadcastBatchMatmulToLinear
    : public OpRewritePattern<linalg::BatchMatmulOp> {
  BroadcastBatchMatmulToLinear(MLIRContext *ctx, bool denseWeights)
      : OpRewritePattern(ctx), denseWeights(denseWeights) {}
  bool denseWeights;

  LogicalResult matchAndRewrite(linalg::BatchMatmulOp matmul,
                                PatternRewriter &rewriter) const override {
    if (matmul.hasUserDefinedMaps() || !matmul.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(matmul,
                                         "not a plain tensor batch_matmul");
    Value x = matmul.getInputs()[0];
    Value source = getBatchBroadcastSource(matmul.getInputs()[1]);
    if (!source)
      return rewriter.notifyMatchFailure(matmul,
                                         "rhs is not a batch broadcast");
    Value out = matmul.getOutputs()[0];
    FailureOr<BatchedOperands> operands = matchBatchedOperands(
        rewriter, matmul, x, source, out, denseWeights);
    if (failed(operands))
      return failure();
    rewriter.replaceOp(matmul,
                       buildBatchedLinear(rewriter, matmul.getLoc(), x,
                                       operands->weight, out,
                                       operands->weightIsKN));
    return success();
  }
};

struct RaiseLinearPass
    : public smlir::impl::RaiseLinearBase<RaiseLinearPass> {
  using RaiseLinearBase::RaiseLinearBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<MatmulToLinear>(&getContext(), denseWeights, mixedPrecision);
    patterns.add<BatchedGenericToLinear, BroadcastBatchMatmulToLinear>(
        &getContext(), denseWeights);
    patterns.add<RhsMatmulToLinear>(&getContext());
    // No folding: upstream's linalg.transpose folder returns a mistyped value
    // for a sparse input into a dense init and aborts.
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     GreedyRewriteConfig().enableFolding(false))))
      return signalPassFailure();
  }
};

} // namespace
