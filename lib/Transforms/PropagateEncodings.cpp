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
#include "llvm/ADT/SetVector.h"
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

/// Whether `value` in a kernel body is 0 wherever the block arguments that
/// `isZero` names (the stored zeros of the sparse operands) are 0.
static bool isZeroWhere(Value value, function_ref<bool(Value)> isZero) {
  if (isZero(value))
    return true;
  if (matchPattern(value, m_AnyZeroFloat()) || matchPattern(value, m_Zero()))
    return true;
  Operation *def = value.getDefiningOp();
  if (!def || def->getNumResults() != 1)
    return false;
  auto zero = [&](Value operand) { return isZeroWhere(operand, isZero); };
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

using sparse_tensor::SparseTensorEncodingAttr;

/// Encodings that values would have once the element-wise ops producing them
/// keep their operands' encodings (the fixpoint's assumption).
using AssumedEncodings = llvm::DenseMap<Value, SparseTensorEncodingAttr>;

static SparseTensorEncodingAttr encodingOf(Value value,
                                           const AssumedEncodings &assumed) {
  if (auto encoding = sparse_tensor::getSparseTensorEncoding(value.getType()))
    return encoding;
  return assumed.lookup(value);
}

/// Readers that run faster on a sparse operand than on a dense one: the
/// left operand of a matmul with a dense right operand.
static bool readsSparseFaster(OpOperand &use, const AssumedEncodings &assumed) {
  auto matmul = dyn_cast<linalg::MatmulOp>(use.getOwner());
  return matmul && !matmul.hasUserDefinedMaps() &&
         use.getOperandNumber() == 0 &&
         !encodingOf(matmul.getInputs()[1], assumed);
}

/// How an element-wise op keeps its sparse operands' encoding: the distinct
/// sparse values it reads (one: a sparse_tensor.unary; two of one encoding:
/// a sparse_tensor.binary, `x * x + 2 * x` after fusion, or `a * b`).
struct Inference {
  SmallVector<Value, 2> sources;
  SparseTensorEncodingAttr encoding;
};

/// Whether `value` is a block argument of `op`'s body reading `source`.
static bool readsFrom(linalg::GenericOp op, Value value, Value source) {
  auto arg = dyn_cast<BlockArgument>(value);
  return arg && arg.getOwner() == &op.getRegion().front() &&
         arg.getArgNumber() < op.getNumDpsInputs() &&
         op.getDpsInputOperand(arg.getArgNumber())->get() == source;
}

/// The inference for `op` if its result is zero wherever its sparse
/// operands are all zero (by the table), with sparsity as in `assumed`.
static std::optional<Inference> inferEncoding(linalg::GenericOp op,
                                              const AssumedEncodings &assumed) {
  if (op.getNumDpsInits() != 1 || op.getNumResults() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops())
    return std::nullopt;
  OpOperand *init = op.getDpsInitOperand(0);
  auto resultType = cast<RankedTensorType>(op.getResult(0).getType());
  if (sparse_tensor::getSparseTensorEncoding(resultType) ||
      !op.getMatchingIndexingMap(init).isIdentity() ||
      op.payloadUsesValueFromOperand(init))
    return std::nullopt;
  // Sparse inputs read element-wise in one encoding. Dense inputs (a
  // broadcast row scale: `w * s[:, None]`) are read inside the
  // sparse_tensor.unary / binary, at the stored entries only; the table
  // decides whether the result stays zero (a product does, a sum does not).
  Inference inference;
  for (OpOperand *input : op.getDpsInputOperands()) {
    SparseTensorEncodingAttr encoding = encodingOf(input->get(), assumed);
    if (!encoding)
      continue;
    if ((inference.encoding && inference.encoding != encoding) ||
        !op.getMatchingIndexingMap(input).isIdentity() ||
        cast<RankedTensorType>(input->get().getType()).getShape() !=
            resultType.getShape())
      return std::nullopt;
    inference.encoding = encoding;
    if (!llvm::is_contained(inference.sources, input->get()))
      inference.sources.push_back(input->get());
  }
  if (inference.sources.empty() || inference.sources.size() > 2)
    return std::nullopt;
  Block &body = op.getRegion().front();
  if (body.walk([](linalg::IndexOp) { return WalkResult::interrupt(); })
          .wasInterrupted())
    return std::nullopt;
  auto fromAnySource = [&](Value value) {
    return llvm::any_of(inference.sources, [&](Value source) {
      return readsFrom(op, value, source);
    });
  };
  if (!isZeroWhere(body.getTerminator()->getOperand(0), fromAnySource))
    return std::nullopt;
  return inference;
}

/// Clones `op`'s body into the builder's block with the arguments that read
/// each of `sources` replaced by `values` (a stored element, or zero where
/// that operand is absent), the others (dense operands) by the new kernel's
/// `arguments`, and returns the yielded value.
static Value cloneBody(OpBuilder &b, linalg::GenericOp op,
                       ArrayRef<Value> sources, ArrayRef<Value> values,
                       ValueRange arguments) {
  Block &body = op.getRegion().front();
  IRMapping mapping;
  mapping.map(body.getArguments(), arguments);
  for (auto [source, value] : llvm::zip_equal(sources, values))
    for (BlockArgument arg : body.getArguments())
      if (readsFrom(op, arg, source))
        mapping.map(arg, value);
  for (Operation &bodyOp : body.without_terminator())
    b.clone(bodyOp, mapping);
  return mapping.lookupOrDefault(body.getTerminator()->getOperand(0));
}

/// The first block argument of `op`'s body that reads `source`.
static Value argumentReading(linalg::GenericOp op, Value source) {
  for (BlockArgument arg : op.getRegion().front().getArguments())
    if (readsFrom(op, arg, source))
      return arg;
  return Value();
}

/// `op` with its result in the sources' encoding: the body runs on stored
/// entries only (sparse_tensor.unary / binary; an absent region stays empty
/// wherever the body is zero without that operand).
static void propagate(linalg::GenericOp op, const Inference &inference,
                      RewriterBase &rewriter) {
  Location loc = op.getLoc();
  auto denseType = cast<RankedTensorType>(op.getResult(0).getType());
  Type resultElement = denseType.getElementType();
  auto sparseType = RankedTensorType::get(
      denseType.getShape(), resultElement, inference.encoding);
  ArrayRef<Value> sources = inference.sources;
  rewriter.setInsertionPoint(op);
  SmallVector<Value> dynamicSizes;
  for (int64_t d = 0; d < sparseType.getRank(); ++d)
    if (sparseType.isDynamicDim(d))
      dynamicSizes.push_back(tensor::DimOp::create(rewriter, loc, sources[0], d));
  Value init = tensor::EmptyOp::create(rewriter, loc, sparseType, dynamicSizes);
  auto zeroOf = [](OpBuilder &b, Location at, Value source) -> Value {
    Type element = cast<RankedTensorType>(source.getType()).getElementType();
    return arith::ConstantOp::create(b, at, cast<TypedAttr>(b.getZeroAttr(element)));
  };
  // A region computing the body from the operands present in it.
  auto buildRegion = [&](OpBuilder &b, Region &region, Location at,
                         ArrayRef<bool> present, ValueRange arguments) {
    SmallVector<Type> types;
    SmallVector<Location> locs;
    for (auto [source, isPresent] : llvm::zip_equal(sources, present))
      if (isPresent) {
        types.push_back(cast<RankedTensorType>(source.getType()).getElementType());
        locs.push_back(at);
      }
    OpBuilder::InsertionGuard guard(b);
    Block *block = b.createBlock(&region, {}, types, locs);
    SmallVector<Value> values;
    unsigned next = 0;
    for (auto [source, isPresent] : llvm::zip_equal(sources, present))
      values.push_back(isPresent ? Value(block->getArgument(next++))
                                 : zeroOf(b, at, source));
    sparse_tensor::YieldOp::create(b, at,
                                   cloneBody(b, op, sources, values, arguments));
  };
  auto fused = linalg::GenericOp::create(
      rewriter, loc, TypeRange{sparseType}, op.getInputs(), ValueRange{init},
      op.getIndexingMapsArray(), op.getIteratorTypesArray(),
      [&](OpBuilder &b, Location bodyLoc, ValueRange args) {
        auto stored = [&](Value source) {
          auto arg = cast<BlockArgument>(argumentReading(op, source));
          return args[arg.getArgNumber()];
        };
        Value result;
        if (sources.size() == 1) {
          auto unary = sparse_tensor::UnaryOp::create(b, bodyLoc, resultElement,
                                                      stored(sources[0]));
          buildRegion(b, unary.getPresentRegion(), bodyLoc, {true}, args);
          result = unary.getResult();
        } else {
          auto binary = sparse_tensor::BinaryOp::create(
              b, bodyLoc, resultElement, stored(sources[0]), stored(sources[1]));
          buildRegion(b, binary.getOverlapRegion(), bodyLoc, {true, true}, args);
          // Only one operand stored: the body with the other one zero,
          // unless the table says that is zero (an intersection).
          Value yielded = op.getRegion().front().getTerminator()->getOperand(0);
          for (unsigned absent : {1u, 0u}) {
            bool zeroWithout = isZeroWhere(yielded, [&](Value value) {
              return readsFrom(op, value, sources[absent]);
            });
            if (zeroWithout)
              continue;
            Region &region = absent == 1 ? binary.getLeftRegion()
                                         : binary.getRightRegion();
            buildRegion(b, region, bodyLoc, {absent != 0, absent != 1}, args);
          }
          result = binary.getResult();
        }
        linalg::YieldOp::create(b, bodyLoc, result);
      });
  fused->setAttr(kInferredEncodingAttrName,
                 rewriter.getStringAttr(tensorNameOf(sources[0])));
  rewriter.replaceOp(op, fused.getResult(0));
}

struct PropagateEncodingsPass
    : public smlir::impl::PropagateEncodingsBase<PropagateEncodingsPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> generics;
    getOperation()->walk([&](linalg::GenericOp op) { generics.push_back(op); });
    // A greatest fixpoint over element-wise chains: assume every element-wise
    // op keeps its operands' encoding, then drop, until nothing changes, each
    // whose operands turn out dense or the rule table says dense, and each
    // with a reader that is neither faster on a sparse operand nor itself
    // kept (`relu(w * 3) @ x`, `(x * x + 2 * x) @ w`: the whole chain or
    // none of it). Only where it makes the code faster; a user's
    // smlir.sparsify of the result is not such a reader (their choice wins).
    llvm::SetVector<Operation *> kept;
    for (linalg::GenericOp op : generics)
      kept.insert(op);
    llvm::DenseMap<Operation *, Inference> inferences;
    for (bool changed = true; changed;) {
      changed = false;
      AssumedEncodings assumed;
      inferences.clear();
      for (linalg::GenericOp op : generics) {
        if (!kept.contains(op))
          continue;
        std::optional<Inference> inference = inferEncoding(op, assumed);
        if (!inference) {
          kept.remove(op);
          changed = true;
          continue;
        }
        assumed[op.getResult(0)] = inference->encoding;
        inferences[op] = *inference;
      }
      for (linalg::GenericOp op : generics) {
        if (!kept.contains(op))
          continue;
        bool readersGain = !op->use_empty() &&
            llvm::all_of(op->getUses(), [&](OpOperand &use) {
              return readsSparseFaster(use, assumed) ||
                     kept.contains(use.getOwner());
            });
        if (!readersGain) {
          kept.remove(op);
          changed = true;
        }
      }
    }
    // In program order: each op's sparse operands are rewritten before it.
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp op : generics) {
      if (!kept.contains(op))
        continue;
      std::optional<Inference> inference = inferEncoding(op, {});
      assert(inference && "its producers were rewritten first");
      if (!inference)
        continue;
      propagate(op, *inference, rewriter);
    }
  }
};

} // namespace
