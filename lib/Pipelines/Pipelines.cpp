//===- Pipelines.cpp - named smlir pass pipelines -------------------------===//

#include "SparseMLIR/Pipelines/Pipelines.h"
#include "SparseMLIR/Conversion/Passes.h"

#include "mlir/Dialect/SparseTensor/Pipelines/Passes.h"
#include "mlir/Dialect/SparseTensor/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

void mlir::smlir::buildSparseCPUPipeline(
    OpPassManager &pm, const SparseCPUPipelineOptions &options) {
  // Our sparsifiers and encodings become upstream linalg + sparse_tensor.
  pm.addPass(createConvertSparseMLIRToSparseTensor());
  // Sparse arguments and results of public functions become their buffers
  // (positions, coordinates, values), so callers pass torch storage directly.
  // (The default, direct-out=false, returns results as buffers we own.)
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
