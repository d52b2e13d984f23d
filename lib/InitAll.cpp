//===- InitAll.cpp - register every smlir dialect, pass, pipeline ---------===//

#include "SparseMLIR/InitAll.h"
#include "SparseMLIR/Conversion/LaunchFuncEffects.h"
#include "SparseMLIR/Conversion/Passes.h"
#include "SparseMLIR/IR/SparseMLIRDialect.h"
#include "SparseMLIR/Pipelines/Pipelines.h"
#include "SparseMLIR/Transforms/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/DialectRegistry.h"

#include <mutex>

void mlir::smlir::registerAllDialects(DialectRegistry &registry) {
  registry.insert<SparseMLIRDialect, math::MathDialect>();
  registerLaunchFuncMemoryEffects(registry);
}

void mlir::smlir::registerAllPasses() {
  // The registries are global: registering twice would abort.
  static std::once_flag once;
  std::call_once(once, [] {
    registerSparseMLIRConversionPasses();
    registerSparseMLIRTransformsPasses();
    registerSparseMLIRPipelines();
  });
}
