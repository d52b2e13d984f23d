//===- BufferDeallocation.cpp - free temporaries where it is safe ---------===//

#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace mlir::smlir {
#define GEN_PASS_DEF_BUFFERDEALLOCATION
#include "SparseMLIR/Transforms/Passes.h.inc"
} // namespace mlir::smlir

using namespace mlir;

namespace {

struct BufferDeallocationPass
    : public smlir::impl::BufferDeallocationBase<BufferDeallocationPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    memref::ReallocOp realloc;
    module.walk([&](memref::ReallocOp op) {
      realloc = op;
      return WalkResult::interrupt();
    });
    if (realloc) {
      realloc.emitWarning()
          << "this kernel builds sparse tensors: its temporary buffers are "
             "not freed (MLIR 22 cannot lower the deallocation helper)";
      return;
    }
    OpPassManager pipeline(ModuleOp::getOperationName());
    // Returning a buffer the function does not own clones it: lower the
    // clones (alloc + copy) here, the rest of the pipeline does not.
    if (failed(parsePassPipeline(
            "buffer-deallocation-pipeline, convert-bufferization-to-memref",
            pipeline)) ||
        failed(runPipeline(pipeline, module)))
      signalPassFailure();
  }
};

} // namespace
