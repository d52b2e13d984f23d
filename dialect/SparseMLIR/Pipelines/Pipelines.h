//===- Pipelines.h - named smlir pass pipelines -----------------*- C++ -*-===//
//
// Pipelines that Python's compile() runs by name, so that
// `sparse-mlir-opt --pass-pipeline=...` reproduces exactly what Python does.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_PIPELINES_PIPELINES_H
#define SPARSE_MLIR_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::smlir {

struct SparseCPUPipelineOptions
    : public PassPipelineOptions<SparseCPUPipelineOptions> {
  PassOptions::Option<int32_t> vectorLength{
      *this, "vl", llvm::cl::desc("SIMD vector length for sparse loops (0: none)"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> failOnFallback{
      *this, "fail-on-fallback",
      llvm::cl::desc("Error out when a sparse weight must be read densely"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> fuseSparsifiers{
      *this, "fuse-sparsifiers",
      llvm::cl::desc("Run streaming sparsifiers inside their producer "
                     "(false: after it, to compare)"),
      llvm::cl::init(true)};
};

/// smlir ops -> upstream sparse_tensor -> buffers -> LLVM dialect, for the CPU.
void buildSparseCPUPipeline(OpPassManager &pm,
                            const SparseCPUPipelineOptions &options);

void registerSparseMLIRPipelines();

} // namespace mlir::smlir

#endif // SPARSE_MLIR_PIPELINES_PIPELINES_H
