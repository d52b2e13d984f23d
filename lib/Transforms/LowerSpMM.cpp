//===- LowerSpMM.cpp - the CPU kernel of smlir.spmm -----------------------===//
//
// The pass: options, the tile for the feature count, and the walk over
// smlir.spmm ops. The kernel is lib/Codegen's (SpMM.cpp).
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "../Codegen/KernelBuilder.h"
#include "../Codegen/SpMM.h"
#include "../Utils/IntegerOptions.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_LOWERSPMM
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;

namespace {

struct LowerSpMMPass : public smlir::impl::LowerSpMMBase<LowerSpMMPass> {
  using LowerSpMMBase::LowerSpMMBase;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(smlir::checkIntegerOptions(
            "smlir-lower-spmm", options,
            {"lanes", "vectors", "entries", "chunks", "prefetch"}, errorHandler)))
      return failure();
    return Pass::initializeOptions(options, errorHandler);
  }

  void runOnOperation() override {
    // Beyond 16 vectors x 4 entries the accumulators would not fit any
    // register file.
    if (!llvm::is_contained({4, 8, 16, 32}, static_cast<int64_t>(lanes)) ||
        vectors < 0 || vectors > 16 || entries < 0 || entries > 4 ||
        chunks < 1 || chunks > 4096 || prefetch < 0 || prefetch > 1024) {
      getOperation().emitError(
          "smlir-lower-spmm: lanes must be 4, 8, 16 or 32, vectors 1 to 16, "
          "entries 1 to 4 (or 0: by the feature count), chunks 1 to 4096 and "
          "prefetch 0 to 1024");
      return signalPassFailure();
    }
    SmallVector<SpMMOp> ops;
    getOperation().walk([&](SpMMOp op) { ops.push_back(op); });
    for (SpMMOp op : ops) {
      auto h = cast<RankedTensorType>(op.getH().getType());
      if (!h.getElementType().isF32()) {
        op.emitOpError() << "has no CPU lowering for " << h.getElementType()
                         << " (the kernel computes in f32)";
        signalPassFailure();
        continue;
      }
      SpMMTile tile =
          defaultSpMMTile(h.getDimSize(1), lanes, vectors, entries, chunks, prefetch);
      OpBuilder b(op);
      Value y = buildSpMMKernel(b, op, tile);
      op.getResult().replaceAllUsesWith(y);
      op.erase();
    }
  }
};

} // namespace
