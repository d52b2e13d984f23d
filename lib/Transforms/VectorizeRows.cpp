//===- VectorizeRows.cpp - vector loops along the innermost dimension -----===//
//
// A dense f32 linalg.generic whose operands are contiguous along its
// innermost loop is written here as explicit vector loops over "rows" (the
// outer loops, run by scf.parallel):
//
// - element-wise (all loops parallel): per row, the body on V lanes at a
//   time, stored as vectors, the last vector masked;
// - a reduction of the innermost loop,
//     out[i...] = combine(f(in_0[..., k], in_1[i...], ...), out[i...]),
//   which convert-linalg-to-loops would leave as an ordered scalar chain
//   through memory that LLVM cannot vectorize: per row, U vector
//   accumulators of V lanes per result, neutral-initialized,
//     for k in whole groups of U * V: acc[u] = combine(f(vectors at k + u*V), acc[u])
//     the rest one vector at a time; the last one masked, its masked-off
//       lanes replaced by the neutral element
//     out = combine(reduce(acc[0] . ... . acc[U-1]), init)
//
// f is the op's body cloned at vector type: element-wise ops only. Operands
// that do not vary along the row are read once per row and broadcast.
//
// A transpose that moves the innermost dimension (attention's k^T) reads
// 8 x 8 tiles of the two dimensions that trade places, 8 contiguous
// elements per load, transposes them in registers and stores 8 contiguous
// elements per output row; the other dimensions run under scf.parallel.
// (lib/Codegen/TransposeKernel.cpp).
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/Transforms/Passes.h"

#include "../Codegen/RowKernel.h"
#include "../Codegen/TransposeKernel.h"
#include "../Utils/IntegerOptions.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_VECTORIZEROWS
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;

namespace {

static bool isStaticDenseF32(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() && tensor.getElementType().isF32() &&
         !sparse_tensor::getSparseTensorEncoding(tensor);
}

/// Map results are loop dimensions or the constant 0 (the keepdim size-1
/// dimensions torch-mlir writes), and the innermost loop appears at most
/// once, last if at all (the operand is contiguous along the row).
static bool isRowAccess(AffineMap map, unsigned innermost) {
  ArrayRef<AffineExpr> results = map.getResults();
  for (auto [position, expr] : llvm::enumerate(results)) {
    if (auto constant = dyn_cast<AffineConstantExpr>(expr)) {
      if (constant.getValue() != 0)
        return false;
      continue;
    }
    auto dim = dyn_cast<AffineDimExpr>(expr);
    if (!dim)
      return false;
    if (dim.getPosition() == innermost && position + 1 != results.size())
      return false;
  }
  return true;
}

/// The combiner of result `init` (out feeds exactly one combiner, whose
/// result is yielded for it), or null.
static Operation *matchCombiner(linalg::GenericOp op, OpOperand &init) {
  Block *body = op.getBody();
  BlockArgument out = op.getMatchingBlockArgument(&init);
  Value yielded = body->getTerminator()->getOperand(init.getOperandNumber() -
                                                    op.getNumDpsInputs());
  Operation *combiner = yielded.getDefiningOp();
  if (!combiner || combiner->getBlock() != body || !out.hasOneUse() ||
      out.getUses().begin()->getOwner() != combiner ||
      !combiningKind(combiner) || !combiner->getResult(0).hasOneUse() ||
      combiner->getOperand(0) == combiner->getOperand(1))
    return nullptr;
  return combiner;
}

static std::optional<RowKernel> matchRowKernel(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumLoops() == 0 ||
      op.getNumReductionLoops() > 1)
    return std::nullopt;
  RowKernel match{op, op.getNumReductionLoops() == 1, {}};
  if (match.reduces &&
      op.getIteratorTypesArray().back() != utils::IteratorType::reduction)
    return std::nullopt;
  if (!llvm::all_of(op->getOperandTypes(), isStaticDenseF32) ||
      !llvm::all_of(op->getResultTypes(), isStaticDenseF32))
    return std::nullopt;
  // A streaming sparsifier of the result fuses into the element-wise op
  // later (smlir-fuse-streaming-sparsifiers): leave it a linalg op.
  for (Operation *user : op->getUsers())
    if (user->getDialect() && user->getDialect()->getNamespace() == "smlir")
      return std::nullopt;
  unsigned innermost = op.getNumLoops() - 1;
  for (OpOperand *input : op.getDpsInputOperands())
    if (!isRowAccess(op.getMatchingIndexingMap(input), innermost))
      return std::nullopt;
  for (OpOperand &init : op.getDpsInitsMutable()) {
    AffineMap map = op.getMatchingIndexingMap(&init);
    if (!isRowAccess(map, innermost) ||
        readsAlongRow(map, innermost) == match.reduces)
      return std::nullopt; // a reduction's result has no innermost index
    if (!match.reduces)
      continue;
    Operation *combiner = matchCombiner(op, init);
    if (!combiner)
      return std::nullopt;
    match.combiners.push_back(combiner);
  }
  // Everything else must be element-wise and free of side effects, so that
  // it can run on vectors (linalg.index, for one, is not).
  Block *body = op.getBody();
  for (Operation &inner : body->without_terminator()) {
    if (llvm::is_contained(match.combiners, &inner))
      continue;
    // x^n (torch's pow with an integer exponent) is unrolled into
    // multiplications; LLVM's powi wants a scalar exponent.
    if (auto power = dyn_cast<math::FPowIOp>(inner)) {
      std::optional<int64_t> exponent = constantExponent(power);
      if (!exponent || std::abs(*exponent) > kMaxUnrolledExponent)
        return std::nullopt;
      continue;
    }
    if (inner.getNumRegions() != 0 || !isMemoryEffectFree(&inner) ||
        !(inner.hasTrait<OpTrait::Elementwise>() ||
          inner.hasTrait<OpTrait::ConstantLike>()))
      return std::nullopt;
    for (Value operand : inner.getOperands()) {
      auto arg = dyn_cast<BlockArgument>(operand);
      if (match.reduces && arg && arg.getOwner() == body &&
          arg.getArgNumber() >= op.getNumDpsInputs())
        return std::nullopt; // reads an out value other than through a combiner
      // Values from above are broadcast: scalars only.
      if (!op.getRegion().isAncestor(operand.getParentRegion()) &&
          !operand.getType().isIntOrIndexOrFloat())
        return std::nullopt;
    }
  }
  return match;
}

struct VectorizeRowsPass
    : public smlir::impl::VectorizeRowsBase<VectorizeRowsPass> {
  using VectorizeRowsBase::VectorizeRowsBase;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(smlir::checkIntegerOptions(
        "smlir-vectorize-rows", options,
        {"lanes", "vectors"},
        errorHandler)))
      return failure();
    return Pass::initializeOptions(options, errorHandler);
  }

  void runOnOperation() override {
    if (!llvm::is_contained({4, 8, 16, 32}, static_cast<int64_t>(lanes)) ||
        vectors < 1 || vectors > 16) {
      getOperation().emitError("smlir-vectorize-rows: lanes must be 4, 8, 16 "
                               "or 32 and vectors 1 to 16");
      return signalPassFailure();
    }
    // Transposes that keep the innermost dimension (attention's head split
    // and merge) are row copies: generic ops like the others.
    IRRewriter rewriter(&getContext());
    SmallVector<linalg::TransposeOp> transposes, moving;
    getOperation().walk([&](linalg::TransposeOp op) {
      ArrayRef<int64_t> permutation = op.getPermutation();
      if (!elementwise || permutation.size() < 2 ||
          !op.hasPureTensorSemantics() ||
          !isStaticDenseF32(op.getInput().getType()))
        return;
      if (permutation.back() == static_cast<int64_t>(permutation.size()) - 1)
        transposes.push_back(op);
      else
        moving.push_back(op);
    });
    for (linalg::TransposeOp op : moving) {
      OpBuilder b(op);
      Value result = buildTransposeKernel(b, op);
      op.getResult()[0].replaceAllUsesWith(result);
      op.erase();
    }
    for (linalg::TransposeOp op : transposes) {
      rewriter.setInsertionPoint(op);
      if (failed(linalg::generalizeNamedOp(rewriter, op)))
        return signalPassFailure();
    }
    SmallVector<RowKernel> matches;
    getOperation().walk([&](linalg::GenericOp op) {
      if (std::optional<RowKernel> match = matchRowKernel(op))
        if (match->reduces || elementwise)
          matches.push_back(*match);
    });
    for (RowKernel &match : matches) {
      OpBuilder b(match.op);
      SmallVector<Value> results =
          buildRowKernel(b, match, lanes, vectors);
      for (auto [old, replacement] : llvm::zip(match.op.getResults(), results))
        old.replaceAllUsesWith(replacement);
      match.op.erase();
    }
  }
};

} // namespace
