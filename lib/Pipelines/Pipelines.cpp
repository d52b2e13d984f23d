//===- Pipelines.cpp - named smlir pass pipelines -------------------------===//

#include "SparseMLIR/Pipelines/Pipelines.h"
#include "SparseMLIR/Conversion/Passes.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/Dialect/SparseTensor/Pipelines/Passes.h"
#include "mlir/Dialect/SparseTensor/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

void mlir::smlir::buildSparseCPUPipeline(
    OpPassManager &pm, const SparseCPUPipelineOptions &options) {
  // Weights are sparsified once by the caller: their arguments become sparse.
  pm.addNestedPass<func::FuncOp>(createHoistArgumentSparsifiers());
  // x * W^T with sparse W -> (W * x^T)^T, the loop order that runs fast.
  pm.addNestedPass<func::FuncOp>(createRewriteSparseMatmul());
  // Our sparsifiers and encodings become upstream linalg + sparse_tensor.
  pm.addPass(createConvertSparseMLIRToSparseTensor());
  // Sparse arguments and results of public functions become their buffers
  // (positions, coordinates, values), so callers pass torch storage directly.
  // (direct-out=false: sparse results are written into caller-provided
  // buffers.)
  pm.addPass(createSparseAssembler());
  // Upstream sparsification, bufferization and lowering to the LLVM dialect.
  sparse_tensor::SparsifierOptions sparsifierOptions;
  sparsifierOptions.enableRuntimeLibrary = options.enableRuntimeLibrary;
  sparsifierOptions.vectorLength = options.vectorLength;
  sparse_tensor::buildSparsifier(pm, sparsifierOptions);
}

void mlir::smlir::registerSparseMLIRPipelines() {
  PassPipelineRegistration<SparseCPUPipelineOptions>(
      "smlir-sparse-cpu-pipeline",
      "Lower smlir + sparse_tensor to the LLVM dialect for the CPU",
      buildSparseCPUPipeline);
}
