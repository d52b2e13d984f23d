//===- PropagateEncodings.cpp - storage type inference --------------------===//
//
// MXNet's storage-type inference (FInferStorageType) and SparTA's sparsity
// propagation for element-wise ops: one rule table says which ops keep a
// zero input zero, and an element-wise op whose result is zero wherever its
// sparse input is zero computes only the stored entries and keeps the
// input's encoding.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_PROPAGATEENCODINGS
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {


/// How an op's result is zero given which operands are zero: the storage
/// rule table.
enum class ZeroRule {
  Unary,        // f(0) = 0: negf, absf, sqrt, tanh, erf, ...: sparsity kept
  Intersection, // zero if any operand is: mulf, muli, andi
  Union,        // zero if all operands are: addf, subf, max, min, select
  Numerator,    // zero if the first operand is: divf
  Dense,        // anything else: f(0) != 0 or unknown, the result is dense
};

static ZeroRule zeroRuleOf(Operation *op) {
  return llvm::TypeSwitch<Operation *, ZeroRule>(op)
      .Case<arith::NegFOp, math::AbsFOp, math::SqrtOp, math::CbrtOp,
            math::TanhOp, math::SinOp, math::TanOp, math::AtanOp,
            math::SinhOp, math::AsinhOp, math::AtanhOp, math::ErfOp,
            math::ExpM1Op, math::Log1pOp, arith::TruncFOp, arith::ExtFOp>(
          [](auto) { return ZeroRule::Unary; })
      .Case<arith::MulFOp, arith::MulIOp, arith::AndIOp>(
          [](auto) { return ZeroRule::Intersection; })
      .Case<arith::AddFOp, arith::SubFOp, arith::AddIOp, arith::SubIOp,
            arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp,
            arith::MinNumFOp>([](auto) { return ZeroRule::Union; })
      .Case<arith::DivFOp>([](auto) { return ZeroRule::Numerator; })
      .Default([](Operation *) { return ZeroRule::Dense; });
}

/// Whether `value` in a kernel body is 0 wherever the block argument
/// `sparse` is 0 (the stored zeros of the sparse operand).
static bool isZeroWhereSparseIsZero(Value value, BlockArgument sparse) {
  if (value == sparse)
    return true;
  if (matchPattern(value, m_AnyZeroFloat()) || matchPattern(value, m_Zero()))
    return true;
  Operation *def = value.getDefiningOp();
  if (!def || def->getNumResults() != 1)
    return false;
  auto zero = [&](Value operand) {
    return isZeroWhereSparseIsZero(operand, sparse);
  };
  // select(c, a, b) is zero when both branches are (ReLU: select(x > 0, x, 0)).
  if (auto select = dyn_cast<arith::SelectOp>(def))
    return zero(select.getTrueValue()) && zero(select.getFalseValue());
  switch (zeroRuleOf(def)) {
  case ZeroRule::Unary:
    return zero(def->getOperand(0));
  case ZeroRule::Intersection:
    return llvm::any_of(def->getOperands(), zero);
  case ZeroRule::Union:
    return llvm::all_of(def->getOperands(), zero);
  case ZeroRule::Numerator:
    return zero(def->getOperand(0));
  case ZeroRule::Dense:
    return false;
  }
  llvm_unreachable("unknown rule");
}

/// The name of the tensor `value` carries, for the plan.
static std::string tensorNameOf(Value value) {
  if (auto sparsify = value.getDefiningOp<SparsifyOp>())
    return sparsify.getTensorName().value_or("").str();
  if (auto op = value.getDefiningOp())
    if (auto name = op->getAttrOfType<StringAttr>(kInferredEncodingAttrName))
      return name.getValue().str();
  if (auto arg = dyn_cast<BlockArgument>(value))
    if (auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
      if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                        kTensorNameAttrName))
        return name.getValue().str();
  return "";
}

/// Readers that run faster on a sparse operand than on a dense one: the
/// left operand of a matmul with a dense right operand.
static bool readsSparseFaster(OpOperand &use) {
  auto matmul = dyn_cast<linalg::MatmulOp>(use.getOwner());
  return matmul && !matmul.hasUserDefinedMaps() &&
         use.getOperandNumber() == 0 && !isSparseTensor(matmul.getInputs()[1]);
}

/// The sparse input whose encoding `op`'s result can take, or null.
static OpOperand *inferableInput(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 ||
      op.getNumResults() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops())
    return nullptr;
  OpOperand *init = op.getDpsInitOperand(0);
  auto resultType = cast<RankedTensorType>(op.getResult(0).getType());
  if (sparse_tensor::getSparseTensorEncoding(resultType) ||
      !op.getMatchingIndexingMap(init).isIdentity() ||
      op.payloadUsesValueFromOperand(init))
    return nullptr;
  // One sparse input read element-wise; the body may use nothing else of
  // the kernel (it becomes a sparse_tensor.unary of that input).
  OpOperand *sparse = nullptr;
  for (OpOperand *input : op.getDpsInputOperands()) {
    bool isSparse = isSparseTensor(input->get());
    if (!isSparse && op.payloadUsesValueFromOperand(input))
      return nullptr;
    if (!isSparse)
      continue;
    if (sparse || !op.getMatchingIndexingMap(input).isIdentity() ||
        cast<RankedTensorType>(input->get().getType()).getShape() !=
            resultType.getShape())
      return nullptr;
    sparse = input;
  }
  if (!sparse)
    return nullptr;
  Block &body = op.getRegion().front();
  if (!body.walk([](linalg::IndexOp) { return WalkResult::interrupt(); })
           .wasInterrupted() &&
      isZeroWhereSparseIsZero(body.getTerminator()->getOperand(0),
                              op.getMatchingBlockArgument(sparse)))
    return sparse;
  return nullptr;
}

/// `op` with its result in `sparse`'s encoding: the body runs on stored
/// entries only (sparse_tensor.unary with an empty absent region).
static void propagate(linalg::GenericOp op, OpOperand *sparse,
                      RewriterBase &rewriter) {
  Location loc = op.getLoc();
  auto denseType = cast<RankedTensorType>(op.getResult(0).getType());
  auto sparseType = RankedTensorType::get(
      denseType.getShape(), denseType.getElementType(),
      sparse_tensor::getSparseTensorEncoding(sparse->get().getType()));
  rewriter.setInsertionPoint(op);
  SmallVector<Value> dynamicSizes;
  for (int64_t d = 0; d < sparseType.getRank(); ++d)
    if (sparseType.isDynamicDim(d))
      dynamicSizes.push_back(tensor::DimOp::create(rewriter, loc, sparse->get(), d));
  Value init = tensor::EmptyOp::create(rewriter, loc, sparseType, dynamicSizes);
  auto fused = linalg::GenericOp::create(
      rewriter, loc, TypeRange{sparseType}, op.getInputs(), ValueRange{init},
      op.getIndexingMapsArray(), op.getIteratorTypesArray(),
      [&](OpBuilder &b, Location bodyLoc, ValueRange args) {
        Block &oldBody = op.getRegion().front();
        Value stored = args[sparse->getOperandNumber()];
        auto unary = sparse_tensor::UnaryOp::create(
            b, bodyLoc, denseType.getElementType(), stored);
        // The present block takes the stored (input) element, which an
        // element-type-changing body (truncf) does not share with the result.
        Block *present = b.createBlock(&unary.getPresentRegion(), {},
                                       {stored.getType()}, {bodyLoc});
        IRMapping mapping;
        mapping.map(op.getMatchingBlockArgument(sparse), present->getArgument(0));
        for (Operation &bodyOp : oldBody.without_terminator())
          b.clone(bodyOp, mapping);
        sparse_tensor::YieldOp::create(
            b, bodyLoc,
            mapping.lookupOrDefault(oldBody.getTerminator()->getOperand(0)));
        b.setInsertionPointAfter(unary);
        linalg::YieldOp::create(b, bodyLoc, unary.getResult());
      });
  fused->setAttr(kInferredEncodingAttrName,
                 rewriter.getStringAttr(tensorNameOf(sparse->get())));
  // Every reader takes a sparse operand (see readsSparseFaster).
  rewriter.replaceOp(op, fused.getResult(0));
}

struct PropagateEncodingsPass
    : public smlir::impl::PropagateEncodingsBase<PropagateEncodingsPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    SmallVector<linalg::GenericOp> generics;
    getOperation()->walk([&](linalg::GenericOp op) { generics.push_back(op); });
    for (linalg::GenericOp op : generics) {
      OpOperand *sparse = inferableInput(op);
      // Only where it makes the code faster: every reader runs faster on a
      // sparse operand. (A user's smlir.sparsify of the result is not such
      // a reader: the explicit choice wins.)
      if (!sparse || op->use_empty() ||
          !llvm::all_of(op->getUses(), readsSparseFaster))
        continue;
      propagate(op, sparse, rewriter);
    }
  }
};

} // namespace
