//===- LowerSDDMMRows.cpp - the grouped row kernel of smlir.sddmm_rows ----===//
//
// The pass: the walk over smlir.sddmm_rows ops and where each writes. The
// kernel is lib/Codegen's (SDDMMRows.cpp); the op's attributes carry its
// decisions.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "../Codegen/SDDMMRows.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_LOWERSDDMMROWS
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;

namespace {

/// The caller's buffer the result is written into, when that is its only
/// use (a row-major buffer of the result's shape): the kernel writes there
/// directly instead of into a new buffer then copied.
bufferization::MaterializeInDestinationOp destinationOf(SDDMMRowsOp op) {
  if (!op->hasOneUse())
    return {};
  auto write = dyn_cast<bufferization::MaterializeInDestinationOp>(
      *op->getUsers().begin());
  if (!write || write.getSource() != op.getResult())
    return {};
  auto buffer = dyn_cast<MemRefType>(write.getDest().getType());
  auto result = cast<RankedTensorType>(op.getResult().getType());
  if (!buffer || !buffer.getLayout().isIdentity() ||
      buffer.getElementType() != result.getElementType() ||
      failed(verifyCompatibleShape(buffer.getShape(), result.getShape())))
    return {};
  return write;
}

struct LowerSDDMMRowsPass
    : public smlir::impl::LowerSDDMMRowsBase<LowerSDDMMRowsPass> {
  void runOnOperation() override {
    SmallVector<SDDMMRowsOp> ops;
    getOperation().walk([&](SDDMMRowsOp op) { ops.push_back(op); });
    for (SDDMMRowsOp op : ops) {
      OpBuilder b(op);
      bufferization::MaterializeInDestinationOp write = destinationOf(op);
      if (write) {
        // The kernel goes where the write was: the caller's buffer is
        // defined there.
        b.setInsertionPoint(write);
        buildSDDMMRowsKernel(b, op, write.getDest());
        write.erase();
        op.erase();
        continue;
      }
      Value values = buildSDDMMRowsKernel(b, op, Value());
      Value result = bufferization::ToTensorOp::create(
          b, op.getLoc(), op.getResult().getType(), values,
          /*restrict=*/true, /*writable=*/true);
      op.getResult().replaceAllUsesWith(result);
      op.erase();
    }
  }
};

} // namespace
