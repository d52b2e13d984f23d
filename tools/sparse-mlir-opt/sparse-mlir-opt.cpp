//===- sparse-mlir-opt.cpp - MLIR optimizer driver with smlir -------------===//
//
// mlir-opt with every upstream dialect, pass and extension plus smlir's.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  // Includes upstream pipelines such as `sparsifier`.
  mlir::registerAllPasses();
  mlir::smlir::registerAllPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // As in mlir-opt: gpu-module-to-binary translates gpu.module to LLVM IR.
  mlir::registerAllGPUToLLVMIRTranslations(registry);
  mlir::smlir::registerAllDialects(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "sparse_mlir optimizer driver\n", registry));
}
