//===- LowerBatchMatmul.cpp - register-tiled dense batch_matmul -----------===//
//
// The pass: options, the tile, and the walk over linalg.batch_matmul ops.
// The kernel is lib/Codegen's (BatchMatmul.cpp).
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/IR/SparseMLIROps.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "../Codegen/BatchMatmul.h"
#include "../Codegen/KernelBuilder.h"
#include "../Utils/IntegerOptions.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_LOWERBATCHMATMUL
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;
using namespace mlir::smlir;
using namespace mlir::smlir::codegen;

namespace {

struct LowerBatchMatmulPass
    : public smlir::impl::LowerBatchMatmulBase<LowerBatchMatmulPass> {
  using LowerBatchMatmulBase::LowerBatchMatmulBase;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(smlir::checkIntegerOptions("smlir-lower-batch-matmul", options,
                                          {"rows", "vectors", "lanes"},
                                          errorHandler)))
      return failure();
    return Pass::initializeOptions(options, errorHandler);
  }

  void runOnOperation() override {
    // Register tiles: beyond 16 rows or vectors they would not fit any
    // register file.
    auto tileOk = [](int64_t v) { return v >= 0 && v <= 16; };
    if (!llvm::is_contained({4, 8, 16, 32}, static_cast<int64_t>(lanes)) ||
        !tileOk(rows) || !tileOk(vectors)) {
      getOperation().emitError(
          "smlir-lower-batch-matmul: lanes must be 4, 8, 16 or 32 and tile "
          "sizes 1 to 16, or 0 (the default for the lanes)");
      return signalPassFailure();
    }
    // Left at 0: smlir-lower-sparse-linear's CSR tile for the lanes (the
    // tile this kernel was measured with).
    int64_t rows = this->rows > 0 ? this->rows : 4;
    int64_t vectors = this->vectors > 0 ? this->vectors : lanes >= 16 ? 1 : 2;
    SmallVector<linalg::BatchMatmulOp> batchMatmuls;
    getOperation().walk([&](linalg::BatchMatmulOp op) {
      if (isPlainBatchMatmul(op))
        batchMatmuls.push_back(op);
    });
    for (linalg::BatchMatmulOp op : batchMatmuls) {
      OpBuilder b(op);
      Value y = buildBatchMatmulKernel(b, op.getLoc(), op, rows, vectors, lanes);
      op.getResult(0).replaceAllUsesWith(y);
      eraseDeadChain(op);
    }
  }
};

} // namespace
