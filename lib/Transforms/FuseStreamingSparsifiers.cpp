//===- FuseStreamingSparsifiers.cpp - sparsify inside the producer --------===//
//
// A streaming sparsifier decides per element, so it can run inside the loop
// that computes the element: the producer writes straight into the sparse
// encoding and a dropped value is never stored.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_FUSESTREAMINGSPARSIFIERS
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {


/// Why `op` cannot run inside its producer, or "" when it can.
static std::string whyNotFusable(SparsifyOp op) {
  SparsifierAttrInterface sparsifier = op.getSparsifier();
  if (sparsifier.getKind() != SparsifierKind::Streaming)
    return (Twine(stringifySparsifierKind(sparsifier.getKind())) +
            " sparsifiers need more than one element at a time")
        .str();
  RankedTensorType resultType = op.getResult().getType();
  auto encoding = sparse_tensor::getSparseTensorEncoding(resultType);
  if (!encoding)
    return "the result is dense";
  // Sparse insertion in lexicographic order works for permuted levels, not
  // for block or n:m levels (those need every group written at once).
  if (!encoding.isPermutation() ||
      llvm::any_of(encoding.getLvlTypes(), [](sparse_tensor::LevelType lt) {
        return sparse_tensor::isNOutOfMLT(lt);
      }))
    return "blocked or n:m storage is written block by block";
  // Sparsification permutes the loops of a kernel writing column-major
  // levels without renumbering its linalg.index ops, which would scramble
  // the element positions random fraction hashes (MLIR 22).
  if (isa<RandomFractionAttr>(sparsifier) && !encoding.isIdentity())
    return "random fraction into permuted (column-major) levels needs the "
           "element positions, which upstream renumbers wrongly there";
  if (!isa<FloatType>(resultType.getElementType()))
    return "the element type is not floating-point";
  // Upstream folds a convert to dense into a producer that writes a fresh
  // sparse tensor, which turns the select into an error; and a value read
  // densely gains nothing from being written sparsely first.
  if (llvm::any_of(op->getUsers(), [](Operation *user) {
        auto convert = dyn_cast<sparse_tensor::ConvertOp>(user);
        return convert &&
               !sparse_tensor::getSparseTensorEncoding(convert.getType());
      }))
    return "a reader without a sparse lowering reads it densely (fallback)";
  auto producer = op.getSource().getDefiningOp<linalg::GenericOp>();
  if (!producer)
    return "the producer is not a linalg.generic";
  if (!op.getSource().hasOneUse())
    return "the dense value has other readers";
  if (producer.getNumDpsInits() != 1 ||
      producer.getNumParallelLoops() != producer.getNumLoops())
    return "the producer is not element-wise (it has a reduction or several "
           "results)";
  if (llvm::any_of(producer->getOperandTypes(), [](Type t) {
        return sparse_tensor::getSparseTensorEncoding(t) != nullptr;
      }))
    return "the producer reads a sparse tensor";
  OpOperand *init = producer.getDpsInitOperand(0);
  if (!producer.getMatchingIndexingMap(init).isIdentity())
    return "the producer writes its result through a permutation";
  if (producer.payloadUsesValueFromOperand(init))
    return "the producer reads its output";
  return "";
}

/// Rewrites `arith.select %c, %a, %b` on floats or integers in `body` into
/// bit operations, `(a & m) | (b & ~m)` with m = sext(c): sparsification
/// does not accept arith.select in a kernel (it is how torch-mlir spells
/// ReLU), but it does accept the bit operations.
static void rewriteSelectsAsBitOps(Block &body, RewriterBase &rewriter) {
  SmallVector<arith::SelectOp> selects;
  body.walk([&](arith::SelectOp op) {
    Type type = op.getType();
    if (op.getCondition().getType().isInteger(1) &&
        (isa<FloatType>(type) || type.isSignlessInteger()))
      selects.push_back(op);
  });
  for (arith::SelectOp op : selects) {
    rewriter.setInsertionPoint(op);
    Location loc = op.getLoc();
    Type type = op.getType();
    Type bits = rewriter.getIntegerType(type.getIntOrFloatBitWidth());
    auto toBits = [&](Value v) -> Value {
      return isa<FloatType>(type) ? arith::BitcastOp::create(rewriter, loc, bits, v)
                                  : v;
    };
    Value mask = arith::ExtSIOp::create(rewriter, loc, bits, op.getCondition());
    Value ones = arith::ConstantOp::create(
        rewriter, loc, bits, rewriter.getIntegerAttr(bits, -1));
    Value inverse = arith::XOrIOp::create(rewriter, loc, mask, ones);
    Value whenTrue =
        arith::AndIOp::create(rewriter, loc, toBits(op.getTrueValue()), mask);
    Value whenFalse = arith::AndIOp::create(
        rewriter, loc, toBits(op.getFalseValue()), inverse);
    Value merged = arith::OrIOp::create(rewriter, loc, whenTrue, whenFalse);
    Value result = isa<FloatType>(type)
                       ? arith::BitcastOp::create(rewriter, loc, type, merged)
                       : merged;
    rewriter.replaceOp(op, result);
  }
}

/// `keep ? element : +0.0`, with bit operations instead of arith.select
/// (which sparsification does not accept in a kernel body).
static Value buildKeepOrZero(OpBuilder &b, Location loc, Value keep,
                             Value element) {
  auto floatType = cast<FloatType>(element.getType());
  Type bits = b.getIntegerType(floatType.getWidth());
  Value all = arith::ExtSIOp::create(b, loc, bits, keep); // 0 or all ones
  Value raw = arith::BitcastOp::create(b, loc, bits, element);
  return arith::BitcastOp::create(b, loc, floatType,
                                  arith::AndIOp::create(b, loc, raw, all));
}

/// The producer, cloned to write `op`'s sparse result directly: its yielded
/// value goes through the sparsifier's keep condition and a
/// `sparse_tensor.select`, so sparsification inserts only kept values.
static void fuseIntoProducer(SparsifyOp op, RewriterBase &rewriter) {
  auto producer = op.getSource().getDefiningOp<linalg::GenericOp>();
  RankedTensorType sparseType = op.getResult().getType();
  Location loc = producer.getLoc();
  rewriter.setInsertionPoint(producer);
  Value denseInit = producer.getDpsInitOperand(0)->get();
  SmallVector<Value> dynamicSizes;
  for (int64_t d = 0; d < sparseType.getRank(); ++d)
    if (sparseType.isDynamicDim(d))
      dynamicSizes.push_back(tensor::DimOp::create(rewriter, loc, denseInit, d));
  // Only random fraction needs the element's position (its linear index)
  // and the call number.
  SmallVector<Value> sizes;
  Value callNumber;
  if (isa<RandomFractionAttr>(op.getSparsifier())) {
    callNumber = buildCallNumber(rewriter, loc, op);
    for (int64_t d = 0, dynamic = 0; d < sparseType.getRank(); ++d)
      sizes.push_back(sparseType.isDynamicDim(d)
                          ? dynamicSizes[dynamic++]
                          : arith::ConstantIndexOp::create(
                                rewriter, loc, sparseType.getDimSize(d))
                                .getResult());
  }
  Value sparseInit =
      tensor::EmptyOp::create(rewriter, loc, sparseType, dynamicSizes);
  auto fused = linalg::GenericOp::create(
      rewriter, loc, TypeRange{sparseType}, producer.getInputs(),
      ValueRange{sparseInit}, producer.getIndexingMapsArray(),
      producer.getIteratorTypesArray());
  IRMapping mapping;
  producer.getRegion().cloneInto(&fused.getRegion(), mapping);

  Block &body = fused.getRegion().front();
  rewriteSelectsAsBitOps(body, rewriter);
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  Value element = yield.getOperand(0);
  rewriter.setInsertionPoint(yield);
  Location bodyLoc = yield.getLoc();
  SmallVector<Value> indices;
  for (size_t d = 0; d < sizes.size(); ++d)
    indices.push_back(linalg::IndexOp::create(rewriter, bodyLoc, d));
  FailureOr<Value> keep = op.getSparsifier().buildKeep(
      rewriter, bodyLoc, element, indices, sizes, callNumber,
      op->getParentOfType<ModuleOp>());
  assert(succeeded(keep) && "whyNotFusable admits streaming sparsifiers only");
  Value kept =
      *keep ? buildKeepOrZero(rewriter, bodyLoc, *keep, element) : element;
  // Dropped values are +0.0 here; the select skips them (and exact zeros,
  // which a sparse encoding never stores).
  Type elementType = sparseType.getElementType();
  auto select = sparse_tensor::SelectOp::create(rewriter, bodyLoc, kept);
  Block *condition = rewriter.createBlock(&select.getRegion(), {}, {elementType},
                                          {bodyLoc});
  Value zero = arith::ConstantOp::create(rewriter, bodyLoc, elementType,
                                         rewriter.getZeroAttr(elementType));
  Value nonzero =
      arith::CmpFOp::create(rewriter, bodyLoc, arith::CmpFPredicate::UNE,
                            condition->getArgument(0), zero);
  sparse_tensor::YieldOp::create(rewriter, bodyLoc, nonzero);
  rewriter.modifyOpInPlace(yield, [&] { yield->setOperand(0, select); });

  fused->setAttr(kFusionAttrName,
                 FusionAttr::get(rewriter.getContext(), FusionKind::Fused,
                                 op.getTensorName().value_or(""), ""));
  rewriter.replaceOp(op, fused.getResult(0));
  rewriter.eraseOp(producer);
  if (auto empty = denseInit.getDefiningOp<tensor::EmptyOp>();
      empty && empty->use_empty())
    rewriter.eraseOp(empty);
}

struct FuseStreamingSparsifiersPass
    : public smlir::impl::FuseStreamingSparsifiersBase<
          FuseStreamingSparsifiersPass> {
  void runOnOperation() override {
    SmallVector<SparsifyOp> ops;
    getOperation()->walk([&](SparsifyOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (SparsifyOp op : ops) {
      std::string reason = whyNotFusable(op);
      if (!reason.empty()) {
        op->setAttr(kFusionAttrName,
                    FusionAttr::get(&getContext(), FusionKind::NotFused, "",
                                    reason));
        continue;
      }
      fuseIntoProducer(op, rewriter);
    }
  }
};

} // namespace
