//===- RaiseRowGathers.cpp - embedding lookups of sparse tables ------------===//
//
// torch-mlir writes `aten.embedding` as a linalg.generic over (indices...,
// D) whose body casts the index, asserts its range and yields
// `tensor.extract %table[%index, linalg.index D]`. Sparsification has no
// lowering for a random-access extract of a sparse tensor, so a tied
// embedding read the table densely; this raises the form to
// smlir.gather_rows, which smlir-lower-row-gathers lowers.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "../Codegen/RowStorage.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SparseTensor/IR/SparseTensor.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_RAISEROWGATHERS
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;

namespace {

/// The CSR or n:m table a gather body reads, or null where `generic` is not
/// exactly a lookup: one integer input indexed by every loop but the last,
/// an identity output, all loops parallel, and a body of only the index
/// cast, range checks and `tensor.extract %table[%index, linalg.index last]`.
static Value lookupTable(linalg::GenericOp generic) {
  if (!generic.hasPureTensorSemantics() || generic.getNumDpsInputs() != 1 ||
      generic.getNumDpsInits() != 1 || generic.getNumLoops() < 2 ||
      generic.getNumParallelLoops() != generic.getNumLoops())
    return {};
  unsigned loops = generic.getNumLoops();
  SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
  MLIRContext *ctx = generic.getContext();
  if (!maps[1].isIdentity() ||
      maps[0] != AffineMap::getMultiDimIdentityMap(loops, ctx)
                     .getMajorSubMap(loops - 1))
    return {};
  Block &body = generic.getRegion().front();
  BlockArgument index = body.getArgument(0);
  if (!index.getType().isSignlessInteger())
    return {};
  auto extract = dyn_cast_or_null<tensor::ExtractOp>(
      body.getTerminator()->getOperand(0).getDefiningOp());
  if (!extract || extract.getIndices().size() != 2 ||
      extract->getParentRegion() != &generic.getRegion())
    return {};
  Value table = extract.getTensor();
  auto tableType = cast<RankedTensorType>(table.getType());
  // (Tables of other formats keep the dense read, with its warning.)
  if (!codegen::rowStorage(tableType) ||
      generic.getRegion().isAncestor(table.getParentRegion()))
    return {};
  auto row = extract.getIndices()[0].getDefiningOp<arith::IndexCastOp>();
  auto column = extract.getIndices()[1].getDefiningOp<linalg::IndexOp>();
  if (!row || row.getIn() != index || !column ||
      column.getDim() != loops - 1)
    return {};
  // Anything else in the body (arithmetic on the value, another read)
  // makes it more than a lookup.
  for (Operation &op : body.without_terminator())
    if (!isa<arith::IndexCastOp, arith::CmpIOp, arith::ConstantOp,
             cf::AssertOp, linalg::IndexOp, tensor::ExtractOp>(op) ||
        (isa<tensor::ExtractOp>(op) && &op != extract.getOperation()))
      return {};
  auto resultType = cast<RankedTensorType>(generic.getResult(0).getType());
  if (resultType.getElementType() != tableType.getElementType() ||
      resultType.getShape().back() != tableType.getDimSize(1))
    return {};
  return table;
}

struct RaiseLookup : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp generic,
                                PatternRewriter &rewriter) const override {
    Value table = lookupTable(generic);
    if (!table)
      return rewriter.notifyMatchFailure(generic, "not a sparse table lookup");
    rewriter.replaceOpWithNewOp<GatherRowsOp>(
        generic, generic.getResult(0).getType(), table,
        generic.getDpsInputs()[0]);
    return success();
  }
};

struct RaiseRowGathersPass
    : public smlir::impl::RaiseRowGathersBase<RaiseRowGathersPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseLookup>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
